//! `LockstepServer`: cubecl's server traits over a Lockstep client of the simulator.
//!
//! Each method is a few lines over the modules that hold its logic: the memory table
//! (`memory.rs`), the failure books (`books.rs`), the streams (`streams.rs`), the compile
//! pipeline (`compile.rs`) and the info buffers (`info.rs`); `server/` holds the launch
//! path, transfers, drains, error mapping and memory reports. The Lockstep client is inline:
//! cubecl already runs every server call on one device thread, so Lockstep's work runs there
//! too, with no second thread hop.

mod drain;
mod errors;
mod launch;
mod report;
mod transfer;

use std::collections::HashMap;
use std::sync::Arc;

use cubecl_common::bytes::Bytes;
use cubecl_common::device::{DeviceId, DeviceService, ServerUtilitiesHandle, ServiceId};
use cubecl_common::profile::ProfileDuration;
use cubecl_environment::backtrace::BackTrace;
use cubecl_environment::future::DynFut;
use cubecl_environment::stream::StreamId;
use cubecl_environment::time::Instant;
use cubecl_runtime::dry_run::LaunchMode;
use cubecl_runtime::kernel::CubeKernel;
use cubecl_runtime::logging::ServerLogger;
use cubecl_runtime::memory_management::{
    ManagedMemoryHandle, MemoryAllocationMode, StreamMemoryReport,
};
use cubecl_runtime::runtime::Runtime;
use cubecl_runtime::server::{
    BufferBinding, CopyDescriptor, CubeCount, IoError, KernelArguments, ProfileError,
    ProfilingToken, Server, ServerCommunication, ServerError, ServerStorage, ServerUtilities,
};
use cubecl_runtime::storage::{ComputeStorage, ManagedResource};
use cubecl_server::allocator::ContiguousMemoryLayoutPolicy;
use cubecl_server::storage::BytesStorage;
use lockstep::{ComputeClient, ServerOptions};

use crate::backend::{Backend, Simulator};
use crate::books::Books;
use crate::compile::KernelCache;
use crate::findings::{Findings, Mode};
use crate::info::InfoBuffers;
use crate::launch_log;
use crate::memory::MemoryTable;
use crate::properties::cubecl_properties;
use crate::runtime::LockstepRuntime;
use crate::streams::Streams;

/// cubecl's server for one Lockstep device of backend `B`.
#[derive(Debug)]
pub struct LockstepServer<B: Backend = Simulator> {
    utilities: Arc<ServerUtilities>,
    streams: Streams<B::Device>,
    memory: MemoryTable,
    books: Books,
    kernels: KernelCache,
    info: InfoBuffers,
    findings: Findings,
    /// Why the device was lost, once it was: every later call fails with it.
    lost: Option<String>,
    /// Open profiling windows: their start, by token.
    profiles: HashMap<u64, Instant>,
    next_profile: u64,
}

impl<B: Backend> DeviceService for LockstepServer<B> {
    /// # Panics
    /// When the backend has no such device (no adapter, no driver): the message says why.
    fn init(device_id: DeviceId) -> Self {
        launch_log::install();
        let device = B::open(device_id.index_id).unwrap_or_else(|error| {
            panic!("lockstep-cubecl: device {device_id} cannot be opened: {error}")
        });
        let findings = Findings::new(B::probe(&device), Mode::from_env());
        let client = ComputeClient::inline(device, ServerOptions::default());
        let declared = cubecl_properties(client.properties());
        let layout =
            ContiguousMemoryLayoutPolicy::new(client.properties().alignment_bytes as usize);
        let (utilities, _captures) = ServerUtilities::init(
            ServiceId::of::<Self>(device_id),
            "lockstep",
            declared,
            LockstepRuntime::<B>::target_properties(),
            Arc::new(ServerLogger::default()),
            layout,
        );
        Self {
            utilities: Arc::new(utilities),
            streams: Streams::new(client),
            memory: MemoryTable::default(),
            books: Books::default(),
            kernels: KernelCache::default(),
            info: InfoBuffers::default(),
            findings,
            lost: None,
            profiles: HashMap::new(),
            next_profile: 0,
        }
    }

    fn utilities(&self) -> ServerUtilitiesHandle {
        self.utilities.clone() as ServerUtilitiesHandle
    }
}

impl<B: Backend> Server for LockstepServer<B> {
    fn initialize_memory(
        &mut self,
        memory: ManagedMemoryHandle,
        size: u64,
        stream: StreamId,
    ) -> Result<(), ServerError> {
        self.allocate(memory, size, stream)
    }

    fn logger(&self) -> Arc<ServerLogger> {
        self.utilities.logger.clone()
    }

    fn utilities(&self) -> Arc<ServerUtilities> {
        self.utilities.clone()
    }

    fn read(
        &mut self,
        descriptors: Vec<CopyDescriptor>,
        stream: StreamId,
    ) -> DynFut<Result<Vec<Bytes>, ServerError>> {
        let result = self.read_now(descriptors, stream);
        Box::pin(async move { result })
    }

    fn write(&mut self, descriptors: Vec<(CopyDescriptor, Bytes)>, stream: StreamId) {
        self.write_now(descriptors, stream);
    }

    fn sync(
        &mut self,
        handles: Vec<BufferBinding>,
        _stream: StreamId,
    ) -> DynFut<Result<(), ServerError>> {
        let result = self.drain_all().and_then(|()| self.check_now(&handles));
        Box::pin(async move { result })
    }

    fn check(&mut self, handles: Vec<BufferBinding>, _stream: StreamId) -> Result<(), ServerError> {
        self.check_now(&handles)
    }

    unsafe fn launch(
        &mut self,
        kernel: Box<dyn CubeKernel>,
        count: CubeCount,
        args: KernelArguments,
        stream: StreamId,
        mode: LaunchMode,
    ) {
        self.launch_now(&*kernel, count, &args, stream, mode);
    }

    /// Lockstep's simulator runs queued work when it is waited for, so there is nothing to
    /// submit; a launch failure is the buffers' to report, never the flush's. Only a lost
    /// device fails it.
    fn flush(&mut self, _stream: StreamId) -> Result<(), ServerError> {
        self.ensure_alive()
    }

    fn memory_report(&mut self, stream: StreamId) -> Option<StreamMemoryReport> {
        let key = self.streams.key(stream);
        let report = self.streams.client(key).memory_report().ok()?;
        Some(report::stream_report(stream, &report))
    }

    fn memory_cleanup(&mut self, stream: StreamId) -> Result<(), ServerError> {
        self.sweep();
        let key = self.streams.key(stream);
        self.streams.client(key).memory_cleanup();
        Ok(())
    }

    /// Profiling on host time, around a drain of the stream.
    fn start_profile(&mut self, _stream: StreamId) -> Result<ProfilingToken, ServerError> {
        self.ensure_alive()?;
        self.next_profile += 1;
        self.profiles.insert(self.next_profile, Instant::now());
        Ok(ProfilingToken {
            id: self.next_profile,
        })
    }

    fn end_profile(
        &mut self,
        _stream: StreamId,
        token: ProfilingToken,
    ) -> Result<ProfileDuration, ProfileError> {
        let start = self
            .profiles
            .remove(&token.id)
            .ok_or(ProfileError::NotRegistered {
                backtrace: BackTrace::capture(),
            })?;
        self.drain_all().map_err(|error| ProfileError::Unknown {
            reason: error.to_string(),
            backtrace: BackTrace::capture(),
        })?;
        Ok(ProfileDuration::new_system_time(start, Instant::now()))
    }

    fn abandon_profile(&mut self, _stream: StreamId, token: ProfilingToken) {
        self.profiles.remove(&token.id);
    }

    fn allocation_mode(&mut self, mode: MemoryAllocationMode, stream: StreamId) {
        let key = self.streams.key(stream);
        self.streams
            .client(key)
            .allocation_mode(report::allocation_mode(mode));
    }
}

impl<B: Backend> ServerCommunication for LockstepServer<B> {}

/// cubecl's native resources are for interop with a backend's own API; Lockstep hands none
/// out, so the storage type only names one.
impl<B: Backend> ServerStorage for LockstepServer<B> {
    type Storage = BytesStorage;

    fn get_resource(
        &mut self,
        _binding: BufferBinding,
        _stream: StreamId,
    ) -> Result<ManagedResource<<BytesStorage as ComputeStorage>::Resource>, ServerError> {
        Err(ServerError::Io(IoError::UnsupportedIoOperation {
            backtrace: BackTrace::capture(),
        }))
    }
}
