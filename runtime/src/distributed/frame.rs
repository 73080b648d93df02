//! The rendezvous's wire format: one small frame per message, versioned.
//!
//! A frame is the magic `LKRV`, the protocol version (`u16`), a kind byte and the kind's fields,
//! integers big-endian. The transport delimits frames (TCP prefixes each with its length); a
//! frame is at most [`MAX_FRAME_BYTES`]. The magic and version come first in every version, so
//! a peer of another version is told apart from a stranger (a port scan, another program on
//! the port), which rank 0 ignores.

use super::error::{BootstrapError, MAX_LISTED_MISSING};

/// The version this build speaks. A peer of another version is refused with
/// [`BootstrapError::VersionMismatch`]. Version 2 added the refusal that lists the first
/// missing ranks and counts them all (a timeout with more than `MAX_LISTED_MISSING` missing).
pub const PROTOCOL_VERSION: u16 = 2;
/// The largest frame either side sends or accepts (an NCCL id is 128 bytes).
pub const MAX_FRAME_BYTES: usize = 4096;
/// The longest communicator id a welcome carries: a frame less the welcome's magic, version,
/// kind, world size and id length.
pub const MAX_ID_BYTES: usize = MAX_FRAME_BYTES - 15;
/// The longest refusal text a frame carries; longer text is cut (it is for a person to read).
const MAX_TEXT_BYTES: usize = MAX_FRAME_BYTES / 2;
const MAGIC: [u8; 4] = *b"LKRV";
/// How many of a stranger's first bytes its error quotes.
pub const STRANGER_BYTES: usize = 16;

const JOIN: u8 = 1;
const WELCOME: u8 = 2;
const REFUSED: u8 = 3;

const REFUSED_TIMEOUT: u8 = 1;
const REFUSED_MISMATCH: u8 = 2;
const REFUSED_DUPLICATE: u8 = 3;
const REFUSED_OTHER: u8 = 4;
const REFUSED_MANY_TIMEOUT: u8 = 5;

/// A message of the rendezvous.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// A rank other than 0 asks for the id, saying who it is and what world it expects.
    Join {
        /// The sender's `RANK`.
        rank: u32,
        /// The sender's `WORLD_SIZE`, which must be rank 0's.
        world_size: u32,
    },
    /// Rank 0's answer once every rank joined: the communicator id.
    Welcome {
        /// Rank 0's `WORLD_SIZE`.
        world_size: u32,
        /// The communicator id, opaque bytes (NCCL's 128-byte unique id on CUDA).
        id: Vec<u8>,
    },
    /// Rank 0 aborted the rendezvous, for this reason.
    Refused(BootstrapError),
}

/// Why bytes are not a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Undecodable {
    /// Not a rendezvous frame at all: no magic, or too short for a header. Holds the first
    /// bytes (at most 16, `STRANGER_BYTES`), to say what the peer sent.
    Stranger(Vec<u8>),
    /// A rendezvous frame of another protocol version.
    Version(u16),
    /// A rendezvous frame of this version that does not parse.
    Malformed(String),
}

impl Undecodable {
    /// The error of a rank that got these bytes from `peer`.
    pub fn into_error(self, peer: &str) -> BootstrapError {
        let peer = peer.to_owned();
        match self {
            Undecodable::Stranger(first) => BootstrapError::Protocol {
                peer,
                reason: format!(
                    "not a Lockstep rendezvous: it sent b\"{}\"; is another service at that \
                     address and port?",
                    first.escape_ascii()
                ),
            },
            Undecodable::Version(theirs) => BootstrapError::VersionMismatch {
                peer,
                ours: PROTOCOL_VERSION,
                theirs,
            },
            Undecodable::Malformed(reason) => BootstrapError::Protocol { peer, reason },
        }
    }
}

impl Message {
    /// The frame of this message, for [`Link::send`](super::Link::send). Invariant: it fits
    /// in [`MAX_FRAME_BYTES`] unless it is a welcome whose id is over [`MAX_ID_BYTES`] (ids are
    /// never cut: [`RankZero::welcome`](super::RankZero::welcome) refuses such an id, and
    /// `send` such a frame). A refusal's text is cut to half a frame, and a timeout lists at
    /// most [`MAX_LISTED_MISSING`] missing ranks (more travel as
    /// [`BootstrapError::ManyRanksTimeout`]: the first ones and their count).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&PROTOCOL_VERSION.to_be_bytes());
        match self {
            Message::Join { rank, world_size } => {
                out.push(JOIN);
                put_u32(&mut out, *rank);
                put_u32(&mut out, *world_size);
            }
            Message::Welcome { world_size, id } => {
                out.push(WELCOME);
                put_u32(&mut out, *world_size);
                put_bytes(&mut out, id);
            }
            Message::Refused(error) => {
                out.push(REFUSED);
                encode_refusal(&mut out, error);
            }
        }
        out
    }

    /// The message of a frame [`encode`](Self::encode) made.
    ///
    /// # Errors
    /// [`Undecodable`] saying whether the bytes are a stranger's, another version's, or
    /// malformed.
    pub fn decode(bytes: &[u8]) -> Result<Self, Undecodable> {
        if bytes.len() < 7 || bytes[..4] != MAGIC {
            let first = &bytes[..bytes.len().min(STRANGER_BYTES)];
            return Err(Undecodable::Stranger(first.to_vec()));
        }
        let version = u16::from_be_bytes([bytes[4], bytes[5]]);
        if version != PROTOCOL_VERSION {
            return Err(Undecodable::Version(version));
        }
        let mut reader = Reader(&bytes[7..]);
        let message = match bytes[6] {
            JOIN => Message::Join {
                rank: reader.u32()?,
                world_size: reader.u32()?,
            },
            WELCOME => Message::Welcome {
                world_size: reader.u32()?,
                id: reader.bytes()?.to_vec(),
            },
            REFUSED => Message::Refused(decode_refusal(&mut reader)?),
            kind => return Err(Undecodable::Malformed(format!("unknown kind {kind}"))),
        };
        if !reader.0.is_empty() {
            return Err(Undecodable::Malformed(format!(
                "{} bytes after the message",
                reader.0.len()
            )));
        }
        Ok(message)
    }
}

fn encode_refusal(out: &mut Vec<u8>, error: &BootstrapError) {
    match error {
        BootstrapError::RankTimeout {
            world_size,
            missing,
            timeout_ms,
        } if missing.len() <= MAX_LISTED_MISSING => {
            out.push(REFUSED_TIMEOUT);
            put_u32(out, *world_size);
            out.extend_from_slice(&timeout_ms.to_be_bytes());
            put_ranks(out, missing);
        }
        BootstrapError::RankTimeout {
            world_size,
            missing,
            timeout_ms,
        } => {
            let count = u32::try_from(missing.len()).unwrap_or(u32::MAX);
            put_many_missing(out, *world_size, *timeout_ms, missing, count);
        }
        BootstrapError::ManyRanksTimeout {
            world_size,
            first_missing,
            missing_count,
            timeout_ms,
        } => put_many_missing(out, *world_size, *timeout_ms, first_missing, *missing_count),
        BootstrapError::WorldSizeMismatch {
            rank,
            expected,
            actual,
        } => {
            out.push(REFUSED_MISMATCH);
            [*rank, *expected, *actual]
                .iter()
                .for_each(|&v| put_u32(out, v));
        }
        BootstrapError::DuplicateRank { rank } => {
            out.push(REFUSED_DUPLICATE);
            put_u32(out, *rank);
        }
        other => {
            out.push(REFUSED_OTHER);
            let text = other.to_string();
            put_bytes(out, &text.as_bytes()[..text.len().min(MAX_TEXT_BYTES)]);
        }
    }
}

/// A timeout's refusal with more missing ranks than a frame lists: the first
/// [`MAX_LISTED_MISSING`] of `listed`, and `count`, how many are missing in all.
fn put_many_missing(
    out: &mut Vec<u8>,
    world_size: u32,
    timeout_ms: u64,
    listed: &[u32],
    count: u32,
) {
    out.push(REFUSED_MANY_TIMEOUT);
    put_u32(out, world_size);
    out.extend_from_slice(&timeout_ms.to_be_bytes());
    put_u32(out, count);
    put_ranks(out, &listed[..listed.len().min(MAX_LISTED_MISSING)]);
}

/// A count (`u32`) and the ranks; callers pass at most [`MAX_LISTED_MISSING`].
fn put_ranks(out: &mut Vec<u8>, ranks: &[u32]) {
    put_u32(out, ranks.len() as u32);
    ranks.iter().for_each(|&rank| put_u32(out, rank));
}

fn decode_refusal(reader: &mut Reader<'_>) -> Result<BootstrapError, Undecodable> {
    Ok(match reader.u8()? {
        REFUSED_TIMEOUT => BootstrapError::RankTimeout {
            world_size: reader.u32()?,
            timeout_ms: reader.u64()?,
            missing: reader.ranks()?,
        },
        REFUSED_MANY_TIMEOUT => BootstrapError::ManyRanksTimeout {
            world_size: reader.u32()?,
            timeout_ms: reader.u64()?,
            missing_count: reader.u32()?,
            first_missing: reader.ranks()?,
        },
        REFUSED_MISMATCH => BootstrapError::WorldSizeMismatch {
            rank: reader.u32()?,
            expected: reader.u32()?,
            actual: reader.u32()?,
        },
        REFUSED_DUPLICATE => BootstrapError::DuplicateRank {
            rank: reader.u32()?,
        },
        REFUSED_OTHER => BootstrapError::Aborted {
            reason: String::from_utf8_lossy(reader.bytes()?).into_owned(),
        },
        code => return Err(Undecodable::Malformed(format!("unknown refusal {code}"))),
    })
}

fn put_u32(out: &mut Vec<u8>, value: u32) {
    out.extend_from_slice(&value.to_be_bytes());
}

/// A length (`u32`) and the bytes, all of them.
fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_u32(out, u32::try_from(bytes.len()).unwrap_or(u32::MAX));
    out.extend_from_slice(bytes);
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], Undecodable> {
        if self.0.len() < len {
            return Err(Undecodable::Malformed(format!(
                "truncated: {len} bytes wanted, {} left",
                self.0.len()
            )));
        }
        let (head, rest) = self.0.split_at(len);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, Undecodable> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, Undecodable> {
        Ok(u32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn u64(&mut self) -> Result<u64, Undecodable> {
        Ok(u64::from_be_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    /// A count (`u32`) and that many ranks.
    fn ranks(&mut self) -> Result<Vec<u32>, Undecodable> {
        let count = self.u32()? as usize;
        if count > self.0.len() / 4 {
            return Err(Undecodable::Malformed(format!(
                "{count} missing ranks in {} bytes",
                self.0.len()
            )));
        }
        (0..count).map(|_| self.u32()).collect()
    }

    fn bytes(&mut self) -> Result<&'a [u8], Undecodable> {
        let len = self.u32()? as usize;
        self.take(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_round_trips() {
        let messages = [
            Message::Join {
                rank: 3,
                world_size: 4,
            },
            Message::Welcome {
                world_size: 4,
                id: vec![7; 128],
            },
            Message::Refused(BootstrapError::RankTimeout {
                world_size: 4,
                missing: vec![2, 3],
                timeout_ms: 500,
            }),
            Message::Refused(BootstrapError::WorldSizeMismatch {
                rank: 1,
                expected: 4,
                actual: 2,
            }),
            Message::Refused(BootstrapError::DuplicateRank { rank: 2 }),
            Message::Refused(BootstrapError::ManyRanksTimeout {
                world_size: 5000,
                first_missing: (10..10 + MAX_LISTED_MISSING as u32).collect(),
                missing_count: 4000,
                timeout_ms: 500,
            }),
        ];
        for message in messages {
            assert_eq!(Message::decode(&message.encode()), Ok(message));
        }
    }

    #[test]
    fn other_refusals_travel_as_their_message() {
        let error = BootstrapError::Id {
            reason: "no NCCL".to_owned(),
        };
        assert_eq!(
            Message::decode(&Message::Refused(error).encode()),
            Ok(Message::Refused(BootstrapError::Aborted {
                reason: "rank 0 could not make the communicator id: no NCCL".to_owned()
            }))
        );
    }

    #[test]
    fn a_timeout_with_too_many_ranks_to_list_travels_cut_and_counted() {
        let every = BootstrapError::RankTimeout {
            world_size: 3000,
            missing: (1..3000).collect(),
            timeout_ms: 500,
        };
        let frame = refusal_frame(every);
        assert!(frame.len() <= MAX_FRAME_BYTES, "{} bytes", frame.len());
        let cut = BootstrapError::ManyRanksTimeout {
            world_size: 3000,
            first_missing: (1..=MAX_LISTED_MISSING as u32).collect(),
            missing_count: 2999,
            timeout_ms: 500,
        };
        assert_eq!(Message::decode(&frame), Ok(Message::Refused(cut.clone())));
        let mut longer = cut.clone();
        if let BootstrapError::ManyRanksTimeout { first_missing, .. } = &mut longer {
            first_missing.extend(100..2000);
        }
        assert_eq!(
            Message::decode(&refusal_frame(longer)),
            Ok(Message::Refused(cut))
        );
    }

    #[test]
    fn the_longest_id_fills_a_frame_and_travels_whole() {
        let welcome = Message::Welcome {
            world_size: 2,
            id: (0..MAX_ID_BYTES).map(|i| i as u8).collect(),
        };
        let frame = welcome.encode();
        assert_eq!(frame.len(), MAX_FRAME_BYTES);
        assert_eq!(Message::decode(&frame), Ok(welcome));
    }

    fn refusal_frame(error: BootstrapError) -> Vec<u8> {
        Message::Refused(error).encode()
    }

    #[test]
    fn join_frame_is_exact() {
        let frame = Message::Join {
            rank: 1,
            world_size: 2,
        }
        .encode();
        assert_eq!(frame, b"LKRV\0\x02\x01\0\0\0\x01\0\0\0\x02");
    }

    #[test]
    fn strangers_other_versions_and_malformed_frames_are_told_apart() {
        assert_eq!(
            Message::decode(b"GET / HTTP/1.1"),
            Err(Undecodable::Stranger(b"GET / HTTP/1.1".to_vec()))
        );
        assert_eq!(
            Message::decode(b"LKRV"),
            Err(Undecodable::Stranger(b"LKRV".to_vec()))
        );
        assert_eq!(
            Message::decode(b"LKRV\0\x03\x01"),
            Err(Undecodable::Version(3))
        );
        let malformed = |bytes: &[u8]| match Message::decode(bytes) {
            Err(Undecodable::Malformed(reason)) => reason,
            other => panic!("expected a malformed frame, got {other:?}"),
        };
        assert_eq!(
            malformed(b"LKRV\0\x02\x01\0\0"),
            "truncated: 4 bytes wanted, 2 left"
        );
        assert_eq!(malformed(b"LKRV\0\x02\x09"), "unknown kind 9");
        assert_eq!(
            malformed(b"LKRV\0\x02\x01\0\0\0\x01\0\0\0\x02\0"),
            "1 bytes after the message"
        );
        assert_eq!(
            malformed(b"LKRV\0\x02\x03\x01\0\0\0\x02\0\0\0\0\0\0\0\x05\xff\xff\xff\xff"),
            "4294967295 missing ranks in 0 bytes"
        );
    }
}
