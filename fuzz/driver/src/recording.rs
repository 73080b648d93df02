//! The recording reader under arbitrary bytes (fuzz target `recording`). Two files are read
//! from each input: its bytes as they are, and a well-formed file (header, then frames with
//! correct lengths and CRCs) whose payloads are slices of the input, so that postcard's decoding
//! of every [`Event`](lockstep::record::Event) is reached past the CRC check. Either must give
//! events and at most one typed error naming an offset inside the file: never a panic, never a
//! hang. Every event decoded is summarised and printed as `lockstep recording --events` does.

use lockstep::record::{Reader, RecordingError, Summary, brief, header};

/// Reads `data` as a recording, then its frames made well-formed.
pub fn run(data: &[u8]) {
    read_all(data);
    read_all(&framed(data));
}

/// Reads every event of `file`, as `lockstep recording --events` does; checks the error's
/// offset.
fn read_all(file: &[u8]) {
    let mut summary = Summary::default();
    for event in Reader::new(file) {
        match event {
            Ok(event) => {
                let _ = brief(&event);
                summary.add(&event);
            }
            Err(err) => {
                check_error(&err, file.len());
                break;
            }
        }
    }
    let _ = summary.to_string();
}

/// A typed error names an offset within the file and prints.
fn check_error(err: &RecordingError, len: usize) {
    assert!(
        err.offset() <= len as u64,
        "{err} names offset {} past the file's {len} bytes",
        err.offset()
    );
    let _ = err.to_string();
}

/// A recording's header, then one frame per piece of `data`: each piece is a length byte and
/// that many bytes (fewer at the end), framed with its true length and CRC-32.
fn framed(data: &[u8]) -> Vec<u8> {
    let mut file = header().to_vec();
    let mut rest = data;
    while let Some((&len, tail)) = rest.split_first() {
        let (payload, after) = tail.split_at(usize::from(len).min(tail.len()));
        let len = u32::try_from(payload.len()).expect("a piece is at most 255 bytes");
        file.extend_from_slice(&len.to_le_bytes());
        file.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
        file.extend_from_slice(payload);
        rest = after;
    }
    file
}

#[cfg(test)]
mod tests {
    use lockstep::record::{Event, encode_frame};

    use super::*;

    #[test]
    fn a_framed_piece_reads_back_as_the_event_it_encodes() {
        let event = Event::Process {
            pid: 7,
            data_bytes_max: 64,
        };
        let mut frame = Vec::new();
        encode_frame(&event, &mut frame);
        // The payload after the length and CRC words, as one piece.
        let payload = &frame[8..];
        let mut piece = vec![u8::try_from(payload.len()).expect("a short payload")];
        piece.extend_from_slice(payload);
        let file = framed(&piece);
        let events: Vec<_> = Reader::new(&file[..]).collect();
        assert_eq!(events.len(), 1);
        assert_eq!(brief(events[0].as_ref().expect("the event")), brief(&event));
    }
}
