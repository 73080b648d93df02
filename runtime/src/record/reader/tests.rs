//! Every way a file can be bad gives its typed error at its offset.

use super::super::format::{Event, Op};
use super::super::writer::{encode_frame, header};
use super::*;

fn events() -> Vec<Event> {
    vec![
        Event::Process {
            pid: 7,
            data_bytes_max: 64,
        },
        Event::Call {
            call: 0,
            device: 0,
            thread: 0,
            stream: 3,
            op: Op::Sync,
            at_ns: 1_500,
        },
    ]
}

/// A file of `events()`, and where its second frame starts.
fn file() -> (Vec<u8>, usize) {
    let mut bytes = header().to_vec();
    let events = events();
    encode_frame(&events[0], &mut bytes);
    let second = bytes.len();
    encode_frame(&events[1], &mut bytes);
    (bytes, second)
}

fn read(bytes: &[u8]) -> (Vec<Event>, Option<RecordingError>) {
    let mut events = Vec::new();
    for item in Reader::new(bytes) {
        match item {
            Ok(event) => events.push(event),
            Err(err) => return (events, Some(err)),
        }
    }
    (events, None)
}

#[test]
fn a_whole_file_reads_back_every_event() {
    let (bytes, _) = file();
    let (events_read, error) = read(&bytes);
    assert_eq!(events_read, events());
    assert!(error.is_none());
}

#[test]
fn a_truncated_file_yields_its_whole_frames_then_names_the_cut_frame() {
    let (bytes, second) = file();
    let (events_read, error) = read(&bytes[..bytes.len() - 1]);
    assert_eq!(events_read, events()[..1]);
    let total = bytes.len() - second;
    match error {
        Some(RecordingError::Truncated {
            offset,
            what: "frame",
            needed,
            found,
        }) => {
            assert_eq!(offset, second as u64);
            assert_eq!((needed, found), (total as u64, total as u64 - 1));
        }
        other => panic!("expected a truncated frame, got {other:?}"),
    }
    let (_, error) = read(&bytes[..second + 3]);
    assert!(matches!(
        error,
        Some(RecordingError::Truncated { offset, what: "frame head", needed: 8, found: 3 })
            if offset == second as u64
    ));
}

#[test]
fn a_truncated_header_and_an_empty_file_are_truncated_at_zero() {
    let (bytes, _) = file();
    for cut in [0, 5, 11] {
        let (_, error) = read(&bytes[..cut]);
        assert!(matches!(
            error,
            Some(RecordingError::Truncated { offset: 0, what: "header", needed: 12, found })
                if found == cut as u64
        ));
    }
}

#[test]
fn a_changed_byte_is_corruption_at_its_frame() {
    let (mut bytes, second) = file();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    let (events_read, error) = read(&bytes);
    assert_eq!(events_read.len(), 1);
    let error = error.expect("corrupted");
    assert!(matches!(error, RecordingError::Corrupted { .. }));
    assert_eq!(error.offset(), second as u64);
    assert!(error.to_string().contains("checksum"), "{error}");
}

#[test]
fn a_matching_checksum_over_bytes_that_do_not_decode_is_corruption() {
    let mut bytes = header().to_vec();
    let payload = [0xffu8; 3];
    bytes.extend_from_slice(&3u32.to_le_bytes());
    bytes.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    bytes.extend_from_slice(&payload);
    let (_, error) = read(&bytes);
    let error = error.expect("corrupted");
    assert_eq!(error.offset(), 12);
    assert!(error.to_string().contains("does not decode"), "{error}");
}

#[test]
fn an_impossible_length_is_corruption_not_an_allocation() {
    let mut bytes = header().to_vec();
    bytes.extend_from_slice(&u32::MAX.to_le_bytes());
    bytes.extend_from_slice(&[0; 4]);
    let (_, error) = read(&bytes);
    assert!(matches!(
        error,
        Some(RecordingError::Corrupted { offset: 12, .. })
    ));
}

#[test]
fn another_version_is_refused_at_its_offset() {
    let (mut bytes, _) = file();
    bytes[8] = VERSION as u8 + 1;
    let (events_read, error) = read(&bytes);
    assert!(events_read.is_empty());
    assert!(matches!(
        error,
        Some(RecordingError::WrongVersion {
            offset: 8,
            found,
            supported: VERSION,
        }) if found == VERSION + 1
    ));
}

#[test]
fn a_foreign_file_names_its_first_differing_byte() {
    let (_, error) = read(b"PK\x03\x04 a zip file, not a recording");
    assert!(matches!(error, Some(RecordingError::Foreign { offset: 0 })));
    let (_, error) = read(b"LKSTPRXC\x01\x00\x00\x00");
    assert!(matches!(error, Some(RecordingError::Foreign { offset: 6 })));
}
