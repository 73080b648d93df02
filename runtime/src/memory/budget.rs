//! The device budget: a cap on the bytes every pool of a device reserves together (pages,
//! whether sliced, exclusive or persistent), so that it bounds what the process takes from the
//! device. Pools' own caps bound one size class of one stream; the budget bounds them all.
//!
//! Invariant: the pools' reserved bytes never exceed the budget. A page is allocated only if
//! it fits ([`Budget::admits`]), and a budget below what the pools reserve is refused
//! ([`MemoryBudgetError::BelowReserved`]) once cleanup has given back what it could.

use thiserror::Error;

use crate::error::{OutOfMemoryReason, ServerError};

/// Why `ComputeClient::set_memory_budget` left the budget as it was.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum MemoryBudgetError {
    /// The pools still reserve more than the new budget after every free page went back to
    /// the device: release handles (or let their work finish) and set it again.
    #[error(
        "the pools reserve {bytes_reserved} bytes after cleanup, more than a budget of {budget_bytes} bytes; the budget is unchanged"
    )]
    BelowReserved {
        /// The budget asked for, in bytes.
        budget_bytes: u64,
        /// Bytes of pages the pools still reserve.
        bytes_reserved: u64,
    },
    /// The call could not reach the device's server.
    #[error(transparent)]
    Server(#[from] ServerError),
}

/// The budget in force: `None` is no budget (only the device's memory bounds the pools).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Budget {
    pub bytes: Option<u64>,
}

impl Budget {
    /// Whether a page of `page_bytes` may join pools reserving `bytes_reserved`, or why not.
    pub fn admits(self, page_bytes: u64, bytes_reserved: u64) -> Result<(), OutOfMemoryReason> {
        match self.bytes {
            Some(budget_bytes)
                if bytes_reserved
                    .checked_add(page_bytes)
                    .is_none_or(|total| total > budget_bytes) =>
            {
                Err(OutOfMemoryReason::Budget {
                    page_bytes,
                    budget_bytes,
                    bytes_reserved,
                })
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_is_admitted_up_to_the_budget_exactly() {
        let budget = Budget { bytes: Some(4096) };
        assert_eq!(budget.admits(1024, 3072), Ok(()));
        assert_eq!(
            budget.admits(1024, 3073),
            Err(OutOfMemoryReason::Budget {
                page_bytes: 1024,
                budget_bytes: 4096,
                bytes_reserved: 3073,
            })
        );
        assert!(budget.admits(u64::MAX, 1).is_err(), "no overflow");
        assert_eq!(Budget::default().admits(u64::MAX, u64::MAX), Ok(()));
    }
}
