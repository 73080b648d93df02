//! What a launch takes besides its [`Kernel`](crate::Kernel): a workgroup count and arguments.

use thiserror::Error;

use crate::handle::Handle;
use crate::kernel::Scalar;

/// How many workgroups a launch runs.
#[derive(Clone, Debug)]
pub enum CubeCount {
    /// Workgroups along x, y and z. A zero in any dimension makes the launch a no-op.
    Static(u32, u32, u32),
    /// Three little-endian `u32` counts read from this handle when the launch executes, so a
    /// kernel can size the next one without a round trip to the host.
    Dynamic(Handle),
}

impl CubeCount {
    /// The 1-D grid covering `n_elements` with workgroups of `workgroup_size` invocations
    /// along x: `ceil(n_elements / workgroup_size)` workgroups, so the last one may run past
    /// the end (guard it in the kernel, `i < len`).
    ///
    /// Zero elements give `Static(0, 1, 1)`, which [`launch`](crate::ComputeClient::launch)
    /// runs as a no-op. A count above the device's
    /// [`max_workgroups`](crate::DeviceProperties::max_workgroups)`[0]` is refused by `launch`
    /// with [`IoError::InvalidLaunch`](crate::IoError::InvalidLaunch) naming the maximum.
    ///
    /// ```
    /// use lockstep::{CubeCount, CubeCountError};
    /// assert!(matches!(CubeCount::covering(1000, 64)?, CubeCount::Static(16, 1, 1)));
    /// assert!(matches!(CubeCount::covering(0, 64)?, CubeCount::Static(0, 1, 1)));
    /// assert_eq!(
    ///     CubeCount::covering(u64::MAX, 1).unwrap_err(),
    ///     CubeCountError::TooManyWorkgroups {
    ///         n_elements: u64::MAX,
    ///         workgroup_size: 1,
    ///         workgroups: u64::MAX
    ///     }
    /// );
    /// # Ok::<(), lockstep::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`CubeCountError::ZeroWorkgroupSize`] for a workgroup of no invocations;
    /// [`CubeCountError::TooManyWorkgroups`] when the count does not fit a `u32`.
    pub fn covering(n_elements: u64, workgroup_size: u32) -> Result<CubeCount, CubeCountError> {
        if workgroup_size == 0 {
            return Err(CubeCountError::ZeroWorkgroupSize);
        }
        let workgroups = n_elements.div_ceil(u64::from(workgroup_size));
        let x = u32::try_from(workgroups).map_err(|_| CubeCountError::TooManyWorkgroups {
            n_elements,
            workgroup_size,
            workgroups,
        })?;
        Ok(CubeCount::Static(x, 1, 1))
    }
}

/// Why [`CubeCount::covering`] cannot size a grid.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum CubeCountError {
    /// `workgroup_size` was zero.
    #[error("a workgroup of zero invocations covers no elements")]
    ZeroWorkgroupSize,
    /// The grid needs more than `u32::MAX` workgroups along x: split the work over several
    /// launches, or cover it with a kernel that loops.
    #[error(
        "{n_elements} elements in workgroups of {workgroup_size} need {workgroups} workgroups, more than the {max} a launch can count",
        max = u32::MAX
    )]
    TooManyWorkgroups {
        /// Elements to cover.
        n_elements: u64,
        /// Invocations per workgroup.
        workgroup_size: u32,
        /// Workgroups needed.
        workgroups: u64,
    },
}

/// The arguments of a launch: one handle per declared binding, in order, and one scalar per
/// declared parameter.
#[derive(Clone, Debug, Default)]
pub struct KernelArguments {
    /// One handle per binding the kernel declares, in declaration order.
    pub bindings: Vec<Handle>,
    /// One value per parameter the kernel declares, in order and of the declared type.
    pub params: Vec<Scalar>,
}

impl KernelArguments {
    /// No arguments: add them with [`binding`](Self::binding) and [`param`](Self::param).
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends the next binding (the handle is cloned: the launch keeps the memory alive).
    pub fn binding(mut self, handle: &Handle) -> Self {
        self.bindings.push(handle.clone());
        self
    }

    /// Appends the next scalar parameter.
    pub fn param(mut self, value: Scalar) -> Self {
        self.params.push(value);
        self
    }
}

/// A workgroup count as the server sees it: static, or read from a buffer range `R`.
#[derive(Clone, Debug)]
pub(crate) enum CountArg<R> {
    Static([u32; 3]),
    Dynamic(R),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x_of(count: CubeCount) -> u32 {
        match count {
            CubeCount::Static(x, 1, 1) => x,
            other => panic!("a covering grid is 1-D and static, got {other:?}"),
        }
    }

    #[test]
    fn a_covering_grid_rounds_up_to_whole_workgroups() {
        let covering = |n, size| x_of(CubeCount::covering(n, size).unwrap());
        assert_eq!(covering(1024, 64), 16);
        assert_eq!(covering(1025, 64), 17);
        assert_eq!(covering(1, 256), 1);
        assert_eq!(covering(0, 64), 0);
        assert_eq!(covering(u64::from(u32::MAX) * 64, 64), u32::MAX);
    }

    #[test]
    fn a_covering_grid_refuses_what_no_launch_can_count() {
        assert_eq!(
            CubeCount::covering(10, 0).unwrap_err(),
            CubeCountError::ZeroWorkgroupSize
        );
        let n = u64::from(u32::MAX) * 64 + 1;
        assert_eq!(
            CubeCount::covering(n, 64).unwrap_err(),
            CubeCountError::TooManyWorkgroups {
                n_elements: n,
                workgroup_size: 64,
                workgroups: u64::from(u32::MAX) + 1,
            }
        );
    }
}
