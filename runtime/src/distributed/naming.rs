//! How the devices of a world are named, and the one device list their communicator takes.
//! Every backend whose devices span processes (CUDA's `from_world_env`, the simulator's
//! `SimWorldDevices`) names them alike and refuses other lists with these words.

use crate::collective::CollectiveError;
use crate::ids::DeviceId;

/// The devices of a world of `world_size` processes of backend `type_id`, in rank order: the
/// device of global rank `r` is `DeviceId { type_id, index: r }`.
pub fn world_devices(type_id: u16, world_size: u32) -> Vec<DeviceId> {
    (0..world_size)
        .map(|index| DeviceId { type_id, index })
        .collect()
}

/// Refuses a communicator over `peers` (device indices, in rank order) other than the world's,
/// `0..world_size` in order: a communicator of some of the world's processes would need an id
/// of its own, and a rendezvous makes only the world's.
///
/// # Errors
/// [`CollectiveError::InvalidDevices`] naming the list.
pub fn check_world_list(
    type_id: u16,
    world_size: u32,
    peers: &[u32],
) -> Result<(), CollectiveError> {
    if peers.iter().copied().eq(0..world_size) {
        return Ok(());
    }
    Err(CollectiveError::InvalidDevices {
        devices: peers
            .iter()
            .map(|&index| DeviceId { type_id, index })
            .collect(),
        reason: format!(
            "across processes the one communicator is the world's, ranks 0 to {} in order",
            world_size.saturating_sub(1)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_world_in_rank_order_is_a_communicator() {
        assert_eq!(check_world_list(0, 3, &[0, 1, 2]), Ok(()));
        let refused = check_world_list(0, 3, &[1, 0, 2]).unwrap_err();
        insta::assert_snapshot!(refused, @"invalid device list [0:1, 0:0, 0:2]: across processes the one communicator is the world's, ranks 0 to 2 in order");
        assert!(check_world_list(0, 3, &[0, 1]).is_err());
        assert_eq!(
            world_devices(4, 2),
            vec![
                DeviceId {
                    type_id: 4,
                    index: 0
                },
                DeviceId {
                    type_id: 4,
                    index: 1
                }
            ]
        );
    }
}
