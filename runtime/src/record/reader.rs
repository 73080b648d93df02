//! Reading a recording: a streaming iterator of events over any `Read`, which stops at the
//! first bad byte with a [`RecordingError`] naming its offset.
//!
//! The decisions are pure functions of the bytes (`check_header`, `check_frame`), so the
//! tests and a later fuzz target drive them without files. Invariants: every event yielded
//! came from a whole frame whose CRC-32 matched; after an error the iterator yields nothing;
//! no length read from the file allocates more than [`FRAME_BYTES_MAX`].

use std::io::Read;

use thiserror::Error;

use super::format::{Event, HEADER_BYTES, MAGIC, VERSION};

/// The largest payload a frame may claim; a larger length is corruption, not an allocation.
pub const FRAME_BYTES_MAX: u32 = 1 << 30;

/// Bytes of a frame's head: its length and its CRC-32.
const FRAME_HEAD_BYTES: usize = 8;

/// Why a recording cannot be read past a point. Every variant names the byte offset, from the
/// file's start, of the header or frame at fault.
#[derive(Debug, Error)]
pub enum RecordingError {
    /// The file is not a Lockstep recording.
    #[error("not a Lockstep recording: byte {offset} differs from the magic \"LKSTPREC\"")]
    Foreign {
        /// The first byte that differs.
        offset: u64,
    },
    /// A recording of another format version.
    #[error(
        "recording format version {found} (at byte {offset}); this build reads version {supported}"
    )]
    WrongVersion {
        /// Where the version is.
        offset: u64,
        /// The file's version.
        found: u16,
        /// The version this build reads.
        supported: u16,
    },
    /// The file ends inside the header or a frame (a crash while recording leaves this).
    #[error(
        "recording truncated: the {what} at byte {offset} needs {needed} bytes, {found} remain"
    )]
    Truncated {
        /// Where the incomplete header or frame starts.
        offset: u64,
        /// `header`, `frame head` or `frame payload`.
        what: &'static str,
        /// Bytes it needs.
        needed: u64,
        /// Bytes the file holds from there.
        found: u64,
    },
    /// A frame whose bytes were changed: its CRC-32 does not match, it claims an impossible
    /// length, or its payload does not decode.
    #[error("recording corrupted: the frame at byte {offset} {reason}")]
    Corrupted {
        /// Where the frame starts.
        offset: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// The file could not be read.
    #[error("reading the recording at byte {offset}: {source}")]
    Io {
        /// Where reading failed.
        offset: u64,
        /// The error.
        source: std::io::Error,
    },
}

impl RecordingError {
    /// The byte offset it names.
    pub fn offset(&self) -> u64 {
        match self {
            RecordingError::Foreign { offset }
            | RecordingError::WrongVersion { offset, .. }
            | RecordingError::Truncated { offset, .. }
            | RecordingError::Corrupted { offset, .. }
            | RecordingError::Io { offset, .. } => *offset,
        }
    }
}

/// Checks a header of `found` bytes (fewer than [`HEADER_BYTES`] if the file ended).
fn check_header(header: &[u8]) -> Result<(), RecordingError> {
    if let Some(offset) = header.iter().zip(&MAGIC).position(|(a, b)| a != b) {
        return Err(RecordingError::Foreign {
            offset: offset as u64,
        });
    }
    if header.len() < HEADER_BYTES {
        return Err(RecordingError::Truncated {
            offset: 0,
            what: "header",
            needed: HEADER_BYTES as u64,
            found: header.len() as u64,
        });
    }
    let found = u16::from_le_bytes([header[MAGIC.len()], header[MAGIC.len() + 1]]);
    if found != VERSION {
        return Err(RecordingError::WrongVersion {
            offset: MAGIC.len() as u64,
            found,
            supported: VERSION,
        });
    }
    Ok(())
}

/// The payload length a frame head claims, once it is possible.
fn check_frame_head(head: [u8; FRAME_HEAD_BYTES], offset: u64) -> Result<u32, RecordingError> {
    let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    if len > FRAME_BYTES_MAX {
        return Err(RecordingError::Corrupted {
            offset,
            reason: format!("claims {len} bytes, above the {FRAME_BYTES_MAX} a frame may hold"),
        });
    }
    Ok(len)
}

/// The event a frame holds, once its CRC-32 matches and its payload decodes whole.
fn check_frame(
    head: [u8; FRAME_HEAD_BYTES],
    payload: &[u8],
    offset: u64,
) -> Result<Event, RecordingError> {
    let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    let computed = crc32fast::hash(payload);
    if crc != computed {
        return Err(RecordingError::Corrupted {
            offset,
            reason: format!("has checksum {crc:#010x} but its bytes give {computed:#010x}"),
        });
    }
    match postcard::take_from_bytes::<Event>(payload) {
        Ok((event, [])) => Ok(event),
        Ok((_, rest)) => Err(RecordingError::Corrupted {
            offset,
            reason: format!("leaves {} bytes after its event", rest.len()),
        }),
        Err(err) => Err(RecordingError::Corrupted {
            offset,
            reason: format!("does not decode: {err}"),
        }),
    }
}

/// The events of a recording, in file order; ends after the last whole frame, or with one
/// error.
pub struct Reader<R: Read> {
    input: R,
    /// Bytes consumed so far.
    offset: u64,
    /// The header was checked.
    started: bool,
    /// An error was returned, or the file ended: nothing more.
    done: bool,
}

impl<R: Read> Reader<R> {
    /// A reader of `input`, which starts at the file's first byte.
    pub fn new(input: R) -> Self {
        Self {
            input,
            offset: 0,
            started: false,
            done: false,
        }
    }

    /// Fills `buf` as far as the input goes; returns how many bytes it got.
    fn fill(&mut self, buf: &mut [u8]) -> Result<usize, RecordingError> {
        let mut got = 0;
        while got < buf.len() {
            match self.input.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(RecordingError::Io {
                        offset: self.offset + got as u64,
                        source,
                    });
                }
            }
        }
        Ok(got)
    }

    fn next_event(&mut self) -> Result<Option<Event>, RecordingError> {
        if !self.started {
            let mut header = [0u8; HEADER_BYTES];
            let got = self.fill(&mut header)?;
            check_header(&header[..got])?;
            self.offset = HEADER_BYTES as u64;
            self.started = true;
        }
        let start = self.offset;
        let mut head = [0u8; FRAME_HEAD_BYTES];
        let got = self.fill(&mut head)?;
        if got == 0 {
            return Ok(None);
        }
        let truncated = |what, needed: usize, found: usize| RecordingError::Truncated {
            offset: start,
            what,
            needed: needed as u64,
            found: found as u64,
        };
        if got < FRAME_HEAD_BYTES {
            return Err(truncated("frame head", FRAME_HEAD_BYTES, got));
        }
        let len = check_frame_head(head, start)? as usize;
        // Read through `take`, so a length past the file's end allocates only what is there.
        let mut payload = Vec::new();
        (&mut self.input)
            .take(len as u64)
            .read_to_end(&mut payload)
            .map_err(|source| RecordingError::Io {
                offset: start + FRAME_HEAD_BYTES as u64,
                source,
            })?;
        if payload.len() < len {
            return Err(truncated(
                "frame",
                FRAME_HEAD_BYTES + len,
                FRAME_HEAD_BYTES + payload.len(),
            ));
        }
        let event = check_frame(head, &payload, start)?;
        self.offset = start + (FRAME_HEAD_BYTES + len) as u64;
        Ok(Some(event))
    }
}

impl<R: Read> Iterator for Reader<R> {
    type Item = Result<Event, RecordingError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let next = self.next_event().transpose();
        self.done = !matches!(next, Some(Ok(_)));
        next
    }
}

#[cfg(test)]
mod tests;
