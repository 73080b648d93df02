//! The rendezvous's logic, without I/O: what rank 0 and the other ranks decide from each frame.
//!
//! The drivers (`bootstrap.rs`) feed these state machines what a [`Transport`] delivers, so the
//! same decisions hold over TCP and over the simulator's in-memory transport.
//!
//! [`Transport`]: super::Transport

use std::collections::BTreeSet;

use super::error::{BootstrapError, MAX_LISTED_MISSING};
use super::frame::{MAX_ID_BYTES, Message, Undecodable};

/// Rank 0's side: collects one join per other rank, then every rank gets the id at once.
///
/// Invariant: `joined` holds distinct ranks in `1..world_size`; the rendezvous is complete when
/// it holds all of them. The first failure ends it for every rank (see [`BootstrapError`]).
#[derive(Debug)]
pub struct RankZero {
    world_size: u32,
    joined: BTreeSet<u32>,
    timeout_ms: u64,
}

/// What rank 0 does with a frame from a new connection.
#[derive(Debug, PartialEq, Eq)]
pub enum Admission {
    /// This rank joined; keep its connection for the reply.
    Joined(u32),
    /// Not a rendezvous peer (another program, a port scan): drop the connection, keep waiting.
    Stranger,
}

impl RankZero {
    /// Rank 0 of a world of `world_size`, whose rendezvous times out after `timeout_ms`.
    pub fn new(world_size: u32, timeout_ms: u64) -> Self {
        Self {
            world_size,
            joined: BTreeSet::new(),
            timeout_ms,
        }
    }

    /// Whether every other rank has joined.
    pub fn is_complete(&self) -> bool {
        self.joined.len() as u64 + 1 == u64::from(self.world_size)
    }

    /// Admits the first frame of a connection from `peer`.
    ///
    /// # Errors
    /// The failure that aborts the rendezvous: [`BootstrapError::WorldSizeMismatch`],
    /// [`BootstrapError::DuplicateRank`] (rank 0 itself included),
    /// [`BootstrapError::VersionMismatch`], or [`BootstrapError::Protocol`] for a frame of this
    /// version that is not a valid join.
    pub fn admit(&mut self, frame: &[u8], peer: &str) -> Result<Admission, BootstrapError> {
        let (rank, world_size) = match Message::decode(frame) {
            Ok(Message::Join { rank, world_size }) => (rank, world_size),
            Ok(other) => {
                return Err(BootstrapError::Protocol {
                    peer: peer.to_owned(),
                    reason: format!("expected a join, got {other:?}"),
                });
            }
            Err(Undecodable::Stranger(_)) => return Ok(Admission::Stranger),
            Err(other) => return Err(other.into_error(peer)),
        };
        if world_size != self.world_size {
            return Err(BootstrapError::WorldSizeMismatch {
                rank,
                expected: self.world_size,
                actual: world_size,
            });
        }
        if rank >= world_size {
            return Err(BootstrapError::Protocol {
                peer: peer.to_owned(),
                reason: format!("rank {rank} is not below its world size {world_size}"),
            });
        }
        if rank == 0 || !self.joined.insert(rank) {
            return Err(BootstrapError::DuplicateRank { rank });
        }
        Ok(Admission::Joined(rank))
    }

    /// The failure of a rendezvous whose time ran out, naming the ranks that never joined
    /// (the first [`MAX_LISTED_MISSING`] of them when more are missing). Its cost is bounded by
    /// the ranks that joined, not by the world's size.
    pub fn timed_out(&self) -> BootstrapError {
        // Each rank skipped is a joined one, so this looks at most `joined + 1 + MAX` ranks.
        let listed: Vec<u32> = (1..self.world_size)
            .filter(|rank| !self.joined.contains(rank))
            .take(MAX_LISTED_MISSING + 1)
            .collect();
        if listed.len() <= MAX_LISTED_MISSING {
            return BootstrapError::RankTimeout {
                world_size: self.world_size,
                missing: listed,
                timeout_ms: self.timeout_ms,
            };
        }
        // `joined` holds distinct ranks in `1..world_size`: fewer than `world_size`.
        let joined = self.joined.len() as u32;
        BootstrapError::ManyRanksTimeout {
            world_size: self.world_size,
            first_missing: listed[..MAX_LISTED_MISSING].to_vec(),
            missing_count: self.world_size.saturating_sub(1).saturating_sub(joined),
            timeout_ms: self.timeout_ms,
        }
    }

    /// The reply every joined rank gets once the rendezvous is complete, carrying `id` whole.
    ///
    /// # Errors
    /// [`BootstrapError::Id`] for an id over [`MAX_ID_BYTES`], which no frame carries.
    pub fn welcome(&self, id: &[u8]) -> Result<Vec<u8>, BootstrapError> {
        debug_assert!(self.is_complete(), "the id goes out once every rank joined");
        if id.len() > MAX_ID_BYTES {
            return Err(BootstrapError::Id {
                reason: format!(
                    "an id of {} bytes, over the {MAX_ID_BYTES} a rendezvous frame carries",
                    id.len()
                ),
            });
        }
        Ok(Message::Welcome {
            world_size: self.world_size,
            id: id.to_vec(),
        }
        .encode())
    }
}

/// The frame rank 0 sends every joined rank when the rendezvous fails.
pub fn refusal(error: &BootstrapError) -> Vec<u8> {
    Message::Refused(error.clone()).encode()
}

/// A rank other than 0: sends one join, then reads one reply.
#[derive(Clone, Debug)]
pub struct Joiner {
    /// This process's `RANK`, never 0.
    pub rank: u32,
    /// This process's `WORLD_SIZE`.
    pub world_size: u32,
    /// Rank 0's address, for messages.
    pub addr: String,
    /// The rendezvous's timeout in milliseconds, for messages.
    pub timeout_ms: u64,
}

impl Joiner {
    /// The join this rank sends rank 0 as its first frame.
    pub fn join_frame(&self) -> Vec<u8> {
        Message::Join {
            rank: self.rank,
            world_size: self.world_size,
        }
        .encode()
    }

    /// The communicator id in rank 0's reply.
    ///
    /// # Errors
    /// The failure rank 0 sent (the same value rank 0 returns), a world-size mismatch, or a
    /// reply that is not a rendezvous frame of this version.
    pub fn reply(&self, frame: &[u8]) -> Result<Vec<u8>, BootstrapError> {
        let peer = format!("rank 0 at {}", self.addr);
        match Message::decode(frame).map_err(|err| err.into_error(&peer))? {
            Message::Welcome { world_size, id } if world_size == self.world_size => Ok(id),
            Message::Welcome { world_size, .. } => Err(BootstrapError::WorldSizeMismatch {
                rank: self.rank,
                expected: world_size,
                actual: self.world_size,
            }),
            Message::Refused(error) => Err(error),
            Message::Join { .. } => Err(BootstrapError::Protocol {
                peer,
                reason: "expected a reply, got a join".to_owned(),
            }),
        }
    }

    /// Rank 0 closed the connection without a reply.
    pub fn closed(&self) -> BootstrapError {
        BootstrapError::RankZeroClosed {
            addr: self.addr.clone(),
            rank: self.rank,
        }
    }

    /// No reply came within the timeout and `margin_ms` more.
    pub fn reply_timed_out(&self, margin_ms: u64) -> BootstrapError {
        BootstrapError::ReplyTimeout {
            addr: self.addr.clone(),
            rank: self.rank,
            timeout_ms: self.timeout_ms.saturating_add(margin_ms),
        }
    }

    /// No connection to rank 0 in time.
    pub fn unreachable(&self, attempts: u32, reason: String) -> BootstrapError {
        BootstrapError::Unreachable {
            addr: self.addr.clone(),
            attempts,
            timeout_ms: self.timeout_ms,
            reason,
        }
    }

    /// An I/O failure of the connection while `during`.
    pub fn io(&self, during: &'static str, err: &std::io::Error) -> BootstrapError {
        BootstrapError::Io {
            peer: format!("rank 0 at {}", self.addr),
            during,
            reason: err.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn join(rank: u32, world_size: u32) -> Vec<u8> {
        Message::Join { rank, world_size }.encode()
    }

    #[test]
    fn rank_zero_completes_when_every_other_rank_joined() {
        let mut zero = RankZero::new(3, 100);
        assert!(!zero.is_complete());
        assert_eq!(zero.admit(&join(2, 3), "p"), Ok(Admission::Joined(2)));
        assert_eq!(zero.admit(b"garbage", "p"), Ok(Admission::Stranger));
        assert!(!zero.is_complete());
        assert_eq!(zero.admit(&join(1, 3), "p"), Ok(Admission::Joined(1)));
        assert!(zero.is_complete());
        assert!(RankZero::new(1, 100).is_complete());
    }

    #[test]
    fn rank_zero_names_what_is_wrong() {
        let mut zero = RankZero::new(4, 100);
        assert_eq!(zero.admit(&join(1, 4), "p"), Ok(Admission::Joined(1)));
        assert_eq!(
            zero.admit(&join(1, 4), "p"),
            Err(BootstrapError::DuplicateRank { rank: 1 })
        );
        assert_eq!(
            zero.admit(&join(0, 4), "p"),
            Err(BootstrapError::DuplicateRank { rank: 0 })
        );
        assert_eq!(
            zero.admit(&join(2, 3), "p"),
            Err(BootstrapError::WorldSizeMismatch {
                rank: 2,
                expected: 4,
                actual: 3
            })
        );
        assert_eq!(
            zero.timed_out(),
            BootstrapError::RankTimeout {
                world_size: 4,
                missing: vec![2, 3],
                timeout_ms: 100
            }
        );
        let welcome = Message::Welcome {
            world_size: 4,
            id: vec![],
        };
        assert_eq!(
            zero.admit(&welcome.encode(), "peer x")
                .unwrap_err()
                .to_string(),
            "malformed rendezvous message from peer x: expected a join, got Welcome { world_size: 4, id: [] }"
        );
    }

    #[test]
    fn a_timeout_names_at_most_the_first_missing_ranks_and_counts_them_all() {
        let mut zero = RankZero::new(u32::MAX, 100);
        assert_eq!(
            zero.admit(&join(3, u32::MAX), "p"),
            Ok(Admission::Joined(3))
        );
        let first_missing: Vec<u32> = [1, 2]
            .into_iter()
            .chain(4..=MAX_LISTED_MISSING as u32 + 1)
            .collect();
        assert_eq!(first_missing.len(), MAX_LISTED_MISSING);
        assert_eq!(
            zero.timed_out(),
            BootstrapError::ManyRanksTimeout {
                world_size: u32::MAX,
                first_missing,
                missing_count: u32::MAX - 2,
                timeout_ms: 100
            }
        );
        let mut few = RankZero::new(MAX_LISTED_MISSING as u32 + 2, 100);
        assert_eq!(
            few.admit(&join(1, MAX_LISTED_MISSING as u32 + 2), "p"),
            Ok(Admission::Joined(1))
        );
        assert_eq!(
            few.timed_out(),
            BootstrapError::RankTimeout {
                world_size: MAX_LISTED_MISSING as u32 + 2,
                missing: (2..MAX_LISTED_MISSING as u32 + 2).collect(),
                timeout_ms: 100
            }
        );
    }

    #[test]
    fn joiner_reads_the_id_or_the_refusal() {
        let joiner = Joiner {
            rank: 1,
            world_size: 2,
            addr: "h:1".to_owned(),
            timeout_ms: 100,
        };
        let welcome = |world_size| {
            Message::Welcome {
                world_size,
                id: vec![1, 2],
            }
            .encode()
        };
        assert_eq!(joiner.reply(&welcome(2)), Ok(vec![1, 2]));
        assert_eq!(
            joiner.reply(&welcome(3)),
            Err(BootstrapError::WorldSizeMismatch {
                rank: 1,
                expected: 3,
                actual: 2
            })
        );
        let refused = BootstrapError::DuplicateRank { rank: 1 };
        assert_eq!(joiner.reply(&refusal(&refused)), Err(refused));
        assert_eq!(
            joiner.reply(b"HTTP/1.1 400").unwrap_err().to_string(),
            "malformed rendezvous message from rank 0 at h:1: not a Lockstep rendezvous: it sent \
             b\"HTTP/1.1 400\"; is another service at that address and port?"
        );
    }
}
