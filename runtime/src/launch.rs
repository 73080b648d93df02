//! What a launch takes besides its [`Kernel`](crate::Kernel): a workgroup count and arguments.

use thiserror::Error;

use crate::error::IoError;
use crate::handle::Handle;
use crate::ids::{BufferRange, CountArg, DeviceId};
use crate::kernel::{Access, KernelDef, Scalar};

/// How many workgroups a launch runs.
#[derive(Clone, Debug)]
pub enum CubeCount {
    /// Workgroups along x, y and z. A zero in any dimension makes the launch a no-op.
    Static(u32, u32, u32),
    /// Three little-endian `u32` counts read from this handle when the launch executes, so a
    /// kernel can size the next one without a round trip to the host. As WebGPU has it for an
    /// indirect dispatch, counts with a zero, or above the device's
    /// [`max_workgroups`](crate::DeviceProperties::max_workgroups) in any dimension, make the
    /// launch do nothing, on every device (a static count above it is refused at the call).
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

impl KernelArguments {
    /// The bindings' ranges, in order, once the arguments match `def`'s declarations: as many
    /// bindings and parameters as declared, each parameter of its declared type, and each
    /// binding on `device`, a whole number of its elements, and sharing no byte with another
    /// binding when either is writable (devices may assume bindings do not alias; two views of
    /// one packed allocation that do not overlap do not alias). With `by_range` off (a
    /// self-test's knob, `ServerOptions::launch_aliasing_by_range`), bindings of one allocation
    /// count as sharing memory, as they once did.
    pub(crate) fn checked_ranges(
        &self,
        def: &KernelDef,
        device: DeviceId,
        by_range: bool,
    ) -> Result<Vec<BufferRange>, IoError> {
        let invalid = |reason| invalid(def, reason);
        if self.bindings.len() != def.bindings.len() {
            return Err(invalid(format!(
                "{} bindings given, {} declared",
                self.bindings.len(),
                def.bindings.len()
            )));
        }
        if self.params.len() != def.params.len() {
            return Err(invalid(format!(
                "{} parameters given, {} declared",
                self.params.len(),
                def.params.len()
            )));
        }
        for (i, (param, &elem)) in self.params.iter().zip(&def.params).enumerate() {
            if param.elem_type() != elem {
                return Err(invalid(format!(
                    "parameter {i} is {}, declared {elem}",
                    param.elem_type()
                )));
            }
        }
        let mut ranges: Vec<BufferRange> = Vec::with_capacity(self.bindings.len());
        for (i, (handle, decl)) in self.bindings.iter().zip(&def.bindings).enumerate() {
            let range = handle.range_on(device)?;
            let elem_size = decl.elem.size_bytes() as u64;
            if range.len % elem_size != 0 {
                return Err(invalid(format!(
                    "binding {i} has {} bytes, not a whole number of {} elements",
                    range.len, decl.elem
                )));
            }
            let aliased = ranges.iter().zip(&def.bindings).position(|(r, d)| {
                (if by_range {
                    r.overlaps(&range)
                } else {
                    r.buffer == range.buffer
                }) && (decl.access == Access::ReadWrite || d.access == Access::ReadWrite)
            });
            if let Some(j) = aliased {
                return Err(invalid(format!(
                    "bindings {j} and {i} share memory and one of them is writable"
                )));
            }
            ranges.push(range);
        }
        Ok(ranges)
    }
}

impl CubeCount {
    /// The count as the server takes it, or `None` when a static count has a zero dimension
    /// (the launch is a no-op). A static count may not exceed the device's `max_workgroups`;
    /// a dynamic one's handle must be on `device` and hold at least 12 bytes.
    pub(crate) fn checked(
        &self,
        def: &KernelDef,
        device: DeviceId,
        max_workgroups: [u32; 3],
    ) -> Result<Option<CountArg<BufferRange>>, IoError> {
        match *self {
            CubeCount::Static(x, y, z) if x == 0 || y == 0 || z == 0 => Ok(None),
            CubeCount::Static(x, y, z) => {
                let [max_x, max_y, max_z] = max_workgroups;
                if x > max_x || y > max_y || z > max_z {
                    return Err(invalid(
                        def,
                        format!(
                            "{:?} workgroups exceed the device's maximum {max_workgroups:?}",
                            [x, y, z]
                        ),
                    ));
                }
                Ok(Some(CountArg::Static([x, y, z])))
            }
            CubeCount::Dynamic(ref handle) => {
                Ok(Some(CountArg::Dynamic(handle.sub_range_on(device, 0, 12)?)))
            }
        }
    }
}

/// Refuses a launch of `def`'s kernel at the call, saying why.
fn invalid(def: &KernelDef, reason: String) -> IoError {
    IoError::InvalidLaunch {
        kernel: def.name.clone(),
        reason,
    }
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
