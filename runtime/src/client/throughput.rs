//! Tuning's part of the client: [`ComputeClient::io_optimized_vector_sizes`] and
//! [`ComputeClient::measure_throughput`]. The types they return are in `crate::throughput`.

use std::time::Duration;

use super::ComputeClient;
use crate::bytes::Bytes;
use crate::device::Device;
use crate::dry_run;
use crate::error::ServerError;
use crate::kernel::{Access, Axis, ElemType, Kernel, KernelBuilder, Scalar};
use crate::launch::{CubeCount, KernelArguments};
use crate::profiling::ProfileError;
use crate::throughput::{KernelConfig, MAX_VECTOR_SIZE, ThroughputKey, ThroughputValue};

/// Invocations per workgroup of the measuring kernels.
const WORKGROUP_SIZE: u32 = 64;
/// Timed launches per measurement, after one untimed warm-up launch (which compiles).
const TIMED_LAUNCHES: u32 = 4;

/// The kernel of `key` and the work one launch of it does with `config`.
fn measuring_kernel(key: ThroughputKey, config: KernelConfig) -> (Kernel, u64) {
    let elements = u64::from(config.workgroups) * u64::from(WORKGROUP_SIZE);
    let kernel = match key {
        ThroughputKey::Arithmetic(elem) => {
            let mut b = KernelBuilder::new("throughput_arithmetic", [WORKGROUP_SIZE, 1, 1]);
            let out = b.binding(elem, Access::ReadWrite);
            let (scale, shift) = (b.param(elem), b.param(elem));
            let iterations = b.param(ElemType::U32);
            let i = b.global_id(Axis::X);
            let x = b.var(elem, i.cast(elem));
            b.for_range(ElemType::U32, 0u32, iterations, |b, _| {
                b.assign(x, x.get() * scale + shift);
            });
            b.if_(i.lt(out.len()), |b| b.store(out, i, x));
            b.build()
        }
        ThroughputKey::Memory => {
            let mut b = KernelBuilder::new("throughput_memory", [WORKGROUP_SIZE, 1, 1]);
            let dst = b.binding(ElemType::U32, Access::ReadWrite);
            let src = b.binding(ElemType::U32, Access::Read);
            let i = b.global_id(Axis::X);
            b.if_(i.lt(dst.len()), |b| b.store(dst, i, src.load(i)));
            b.build()
        }
    };
    let kernel = kernel.expect("the measuring kernels are valid IR");
    let work = match key {
        ThroughputKey::Arithmetic(_) => elements * u64::from(config.iterations) * 2,
        ThroughputKey::Memory => elements * 4 * 2,
    };
    (kernel, work)
}

impl<D: Device> ComputeClient<D> {
    /// Vector sizes (in elements of `elem_size` bytes) worth trying for loads and stores,
    /// widest first: powers of two up to the device's widest load
    /// ([`max_load_width_bytes`](crate::DeviceProperties::max_load_width_bytes)) and
    /// [`MAX_VECTOR_SIZE`]. Always ends with 1.
    pub fn io_optimized_vector_sizes(
        &self,
        elem_size: usize,
    ) -> impl Iterator<Item = usize> + Clone + use<D> {
        let load_width = self.properties().max_load_width_bytes as usize;
        let widest = (load_width / elem_size.max(1)).clamp(1, MAX_VECTOR_SIZE);
        // The largest power of two not above `widest`, then halving down to 1.
        let widest = 1usize << widest.ilog2();
        (0..=widest.ilog2()).rev().map(|p| 1usize << p)
    }

    /// The device's throughput for `key`, measured once per device: the first call launches a
    /// generated kernel of known work `config` describes and times it with
    /// [`profile`](Self::profile); later calls for the same key return that value without
    /// launching anything, whatever their `config`. Measures real launches even inside a
    /// [`dry_run`](crate::dry_run::dry_run).
    ///
    /// # Errors
    /// Allocation, launch or timing failures, as [`ProfileError::Server`].
    pub fn measure_throughput(
        &self,
        key: ThroughputKey,
        config: KernelConfig,
    ) -> Result<ThroughputValue, ProfileError> {
        let _span = call_span!(self, "measure_throughput", ?key);
        let name = format!("measure_throughput({key:?})");
        let failed = |source: ServerError| ProfileError::Server {
            name: name.clone(),
            source,
        };
        if let Some(cached) = self
            .call(move |server, _| Ok(server.cached_throughput(key)))
            .map_err(failed)?
        {
            return Ok(cached);
        }
        let value = dry_run::executing(|| self.measure(key, config, &name))?;
        self.call(move |server, _| Ok(server.cache_throughput(key, value)))
            .map_err(failed)
    }

    fn measure(
        &self,
        key: ThroughputKey,
        config: KernelConfig,
        name: &str,
    ) -> Result<ThroughputValue, ProfileError> {
        let failed = |source: ServerError| ProfileError::Server {
            name: name.to_owned(),
            source,
        };
        let (kernel, work) = measuring_kernel(key, config);
        let elements = config.workgroups as usize * WORKGROUP_SIZE as usize;
        let zeros = || Bytes::from(vec![0u8; elements * 4]);
        let dst = self.create(zeros()).map_err(failed)?;
        let mut args = KernelArguments::new().binding(&dst);
        let _src = match key {
            ThroughputKey::Arithmetic(elem) => {
                let (scale, shift) = match elem {
                    ElemType::F32 => (Scalar::F32(0.999), Scalar::F32(0.5)),
                    ElemType::U32 => (Scalar::U32(3), Scalar::U32(1)),
                    ElemType::I32 => (Scalar::I32(3), Scalar::I32(1)),
                    ElemType::F16 => (
                        Scalar::F16(half::f16::from_f32(0.999)),
                        Scalar::F16(half::f16::from_f32(0.5)),
                    ),
                    ElemType::BF16 => (
                        Scalar::BF16(half::bf16::from_f32(0.999)),
                        Scalar::BF16(half::bf16::from_f32(0.5)),
                    ),
                };
                args = args
                    .param(scale)
                    .param(shift)
                    .param(Scalar::U32(config.iterations));
                None
            }
            ThroughputKey::Memory => {
                let src = self.create(zeros()).map_err(failed)?;
                args = args.binding(&src);
                Some(src)
            }
        };
        let count = || CubeCount::Static(config.workgroups, 1, 1);
        let launch = || {
            self.launch(&kernel, count(), args.clone())
                .map_err(|e| failed(e.into()))
        };
        launch()?;
        self.sync().map_err(failed)?;
        let (launched, duration) =
            self.profile(|| (0..TIMED_LAUNCHES).try_for_each(|_| launch()), name)?;
        launched?;
        let method = duration.timing_method();
        let elapsed = duration.resolve_blocking()?;
        self.sync().map_err(failed)?;
        let work = work * u64::from(TIMED_LAUNCHES);
        // A clock coarser than the work must not divide by zero.
        let seconds = elapsed.max(Duration::from_nanos(1)).as_secs_f64();
        Ok(ThroughputValue {
            per_second: work as f64 / seconds,
            work,
            elapsed,
            method,
        })
    }
}
