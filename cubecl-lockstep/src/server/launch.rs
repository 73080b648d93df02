//! The launch path: compile (cached), skip on a claimed input, bind, enqueue.

use cubecl_environment::backtrace::BackTrace;
use cubecl_environment::stream::StreamId;
use cubecl_runtime::dry_run::LaunchMode;
use cubecl_runtime::kernel::CubeKernel;
use cubecl_runtime::server::{
    BufferBinding, CubeCount, KernelArguments, KernelResource, LaunchError, ServerError,
};
use lockstep::{CubeCount as LockstepCount, Handle, KernelArguments as LockstepArguments};

use super::LockstepServer;
use super::errors::refused;
use crate::backend::Backend;
use crate::books::{Region, StreamKey};
use crate::compile::{Compiled, Target};
use crate::launch_log;
use crate::memory::region;
use crate::translate::BindingSource;

impl<B: Backend> LockstepServer<B> {
    /// cubecl's launch: failures land on the outputs, never returned.
    pub(super) fn launch_now(
        &mut self,
        kernel: &dyn CubeKernel,
        count: CubeCount,
        args: &KernelArguments,
        stream: StreamId,
        mode: LaunchMode,
    ) {
        self.sweep();
        let target = Target {
            cubecl: &self.utilities.properties,
            lockstep: self.streams.device().properties(),
        };
        let compiled = match self.kernels.get(kernel, target) {
            Ok(compiled) => compiled,
            Err(error) => {
                // A kernel that never compiled has no analysis: its declared outputs carry
                // the failure, its inputs stay readable. A dry run leaves nothing stale.
                launch_log::refused(stream, kernel.name());
                if !mode.is_skipped() {
                    let written: Vec<Region> = args.buffers_written(None).map(region).collect();
                    self.books.refused(&written, ServerError::Launch(error));
                }
                return;
            }
        };
        if mode.is_skipped() {
            return;
        }
        let io = compiled.io.as_deref();
        let written: Vec<Region> = args.buffers_written(io).map(region).collect();
        let mut read: Vec<Region> = args.buffers_read(io).map(region).collect();
        if let CubeCount::Dynamic(binding) = &count {
            read.push(region(binding));
        }
        if let Some(claim) = self.books.claim(&read) {
            self.books.skipped(kernel.id(), claim, &written);
            return;
        }
        let key = self.streams.key(stream);
        let before = self.findings.enqueued();
        let enqueued = self.enqueue(&compiled, &count, args, key, &written);
        if let (Some(start), Some(end)) = (before, self.findings.enqueued()) {
            let name = kernel.name();
            self.findings
                .launched(start..end, key, stream, name, &written);
        }
        match enqueued {
            Ok(true) => self.books.accepted(key, written),
            Ok(false) => {}
            Err(error) => self.books.refused(&written, error),
        }
    }

    /// Binds and enqueues a compiled kernel on stream `key`; `Ok(false)` when the launch runs
    /// no workgroup (its outputs keep whatever claims they had).
    fn enqueue(
        &mut self,
        compiled: &Compiled,
        count: &CubeCount,
        args: &KernelArguments,
        key: StreamKey,
        written: &[Region],
    ) -> Result<bool, ServerError> {
        self.ensure_alive()?;
        let Some(count) = self.count(count, key, written)? else {
            return Ok(false);
        };
        let mut arguments = LockstepArguments::new();
        for source in &compiled.plan.bindings {
            arguments = arguments.binding(&self.bound(*source, args, key)?);
        }
        let client = self.streams.client(key);
        client
            .launch(&compiled.kernel, count, arguments)
            .map_err(|error| {
                ServerError::Launch(LaunchError::Unknown {
                    reason: format!("Lockstep refused the launch: {error}"),
                    backtrace: BackTrace::capture(),
                })
            })?;
        Ok(true)
    }

    /// The Lockstep handle a binding of the plan takes.
    fn bound(
        &mut self,
        source: BindingSource,
        args: &KernelArguments,
        key: StreamKey,
    ) -> Result<Handle, ServerError> {
        match source {
            BindingSource::Info => {
                let client = self.streams.client(key).clone();
                self.info
                    .get(&client, &args.info.data)
                    .map_err(|e| self.observe(&e))
            }
            BindingSource::Resource(k) => match args.resources.get(k) {
                Some(KernelResource::Buffer(binding)) => self.view(binding),
                _ => Err(refused(format!(
                    "the kernel binds resource {k}, which is not a buffer of this launch"
                ))),
            },
        }
    }

    fn view(&self, binding: &BufferBinding) -> Result<Handle, ServerError> {
        self.memory
            .view(binding)
            .map_err(refused)?
            .ok_or_else(|| refused("a binding of zero bytes"))
    }

    /// Lockstep's count for cubecl's; `None` when it is zero. A dynamic count is read first
    /// when an output carries a claim, so that a count of zero leaves the claim standing (a
    /// launch of no workgroup writes nothing).
    fn count(
        &mut self,
        count: &CubeCount,
        key: StreamKey,
        written: &[Region],
    ) -> Result<Option<LockstepCount>, ServerError> {
        match count {
            &CubeCount::Static(x, y, z) => {
                Ok((x * y * z != 0).then_some(LockstepCount::Static(x, y, z)))
            }
            CubeCount::Dynamic(binding) => {
                let handle = self.view(binding)?;
                if self.books.claim(written).is_none() {
                    return Ok(Some(LockstepCount::Dynamic(handle)));
                }
                let client = self.streams.client(key);
                let words = client
                    .read_one(handle.clone())
                    .map_err(|e| self.observe(&e))?
                    .to_elems::<u32>();
                Ok((!words.iter().take(3).any(|&w| w == 0))
                    .then_some(LockstepCount::Dynamic(handle)))
            }
        }
    }
}
