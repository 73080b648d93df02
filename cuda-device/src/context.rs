//! The CUDA context one or more [`CudaDevice`](crate::CudaDevice)s run on, and what they share
//! through it: the compiled modules, pooled events, and whether a sticky error has made the
//! context unusable (its pinned host blocks are `pinned.rs`'s pool, which holds the context).
//!
//! **Invariant:** every driver call is made with this context current on the calling thread
//! ([`Context::bind`] first). Objects that outlive a device (events, pending reads, kernels)
//! hold an `Arc<Context>`, so the context is released only after the last of them.

use std::collections::HashMap;
use std::ffi::{CString, c_int};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use cudarc::driver::sys::{self, CUresult};
use cudarc::driver::{DriverError, result};
use lockstep::DeviceError;
use lockstep::kernel::KernelDef;

use crate::error::{describe, execution_fault, is_sticky, lost_reason};

/// The oldest CUDA driver this build's bindings (`cuda-13000`) can call: older drivers lack
/// symbols the bindings load, which cudarc would turn into a panic.
const MIN_DRIVER_VERSION: c_int = 13000;

/// What the driver says about the device, read once.
#[derive(Clone, Debug)]
pub(crate) struct DeviceInfo {
    pub name: String,
    pub memory_bytes: u64,
    pub compute_capability: (i32, i32),
    pub max_grid: [u32; 3],
    pub multiprocessors: u32,
    /// Static shared memory one block may declare (48 KiB on every GPU since Volta; more
    /// needs dynamic shared memory, which lowered kernels do not use).
    pub max_shared_bytes: u64,
    pub driver_version: c_int,
    pub nvrtc_version: (c_int, c_int),
}

/// A compiled kernel's entry point, valid as long as the [`Context`] that loaded it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Function(pub sys::CUfunction);

// SAFETY: a `CUfunction` is an opaque driver handle; the driver API is thread-safe and the
// handle may be used from any thread on which its context is current (`Context::bind`).
unsafe impl Send for Function {}
// SAFETY: as for `Send`; the handle is never mutated through a shared reference.
unsafe impl Sync for Function {}

pub(crate) struct Context {
    raw: sys::CUcontext,
    device: sys::CUdevice,
    pub info: DeviceInfo,
    /// Set by the first sticky error; from then on every call fails with it.
    lost: OnceLock<String>,
    /// Modules by (IR content hash, checked), with their entry point. Never evicted: a kernel
    /// is compiled once per process and context.
    modules: Mutex<HashMap<(u64, bool), (sys::CUmodule, Function)>>,
    /// Idle events without timing (ordering only), ready to be recorded again.
    events: Mutex<Vec<sys::CUevent>>,
    /// Idle events with timing (timestamps).
    timing_events: Mutex<Vec<sys::CUevent>>,
}

// SAFETY: the raw handles are opaque driver identifiers; the CUDA driver API is thread-safe
// and every call is made with the context current on the calling thread (the module's
// invariant: `Context::bind` first). Mutable state is behind `Mutex`es and a `OnceLock`.
unsafe impl Send for Context {}
// SAFETY: as for `Send`.
unsafe impl Sync for Context {}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("device", &self.info.name)
            .field("lost", &self.lost.get())
            .finish_non_exhaustive()
    }
}

fn unavailable(reason: impl Into<String>) -> DeviceError {
    DeviceError::Unavailable {
        reason: reason.into(),
    }
}

/// Checks that the driver and NVRTC libraries can be loaded, before anything calls into them
/// (cudarc panics when a library it needs is missing).
fn check_libraries() -> Result<(), DeviceError> {
    // SAFETY: probing dlopens the candidate library names and runs their initialisers, which
    // is what loading the CUDA driver or NVRTC always does.
    if !unsafe { sys::is_culib_present() } {
        return Err(unavailable(
            "libcuda.so could not be loaded (no NVIDIA driver on this machine?)",
        ));
    }
    // SAFETY: as above, for NVRTC.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(unavailable(
            "libnvrtc.so could not be loaded; install the CUDA toolkit's NVRTC or add its lib64 folder to LD_LIBRARY_PATH",
        ));
    }
    Ok(())
}

fn driver_version() -> Result<c_int, DriverError> {
    let mut version = 0;
    // SAFETY: writes one int through a valid pointer; callable before `cuInit`.
    unsafe { sys::cuDriverGetVersion(&mut version) }.result()?;
    Ok(version)
}

fn nvrtc_version() -> (c_int, c_int) {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: writes two ints through valid pointers. On failure the version reads 0.0, which
    // only shows in the backend description.
    let _ = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    (major, minor)
}

fn attribute(device: sys::CUdevice, attr: sys::CUdevice_attribute) -> Result<i32, DriverError> {
    // SAFETY: `device` came from `cuDeviceGet` after a successful `cuInit`.
    unsafe { result::device::get_attribute(device, attr) }
}

impl Context {
    /// Retains the primary context of device `ordinal`. Returns [`DeviceError::Unavailable`]
    /// when the libraries, the driver or the device are missing or too old.
    pub fn new(ordinal: u32) -> Result<Arc<Self>, DeviceError> {
        check_libraries()?;
        let version = driver_version().map_err(|e| {
            unavailable(format!("the CUDA driver does not answer: {}", describe(e)))
        })?;
        if version < MIN_DRIVER_VERSION {
            return Err(unavailable(format!(
                "the CUDA driver supports CUDA {}.{}; this build needs CUDA 13.0 or newer",
                version / 1000,
                version % 1000 / 10
            )));
        }
        result::init().map_err(|e| unavailable(format!("cuInit failed: {}", describe(e))))?;
        let count = result::device::get_count()
            .map_err(|e| unavailable(format!("cannot count CUDA devices: {}", describe(e))))?;
        if count <= 0 {
            return Err(unavailable("the CUDA driver reports no device"));
        }
        if i64::from(ordinal) >= i64::from(count) {
            return Err(unavailable(format!(
                "CUDA device {ordinal} does not exist ({count} present)"
            )));
        }
        let query = |e: DriverError| {
            unavailable(format!(
                "cannot query CUDA device {ordinal}: {}",
                describe(e)
            ))
        };
        let device = result::device::get(ordinal as c_int).map_err(query)?;
        use sys::CUdevice_attribute::*;
        let grid = |attr| attribute(device, attr).map(|v| v.max(1) as u32);
        let info = DeviceInfo {
            name: result::device::get_name(device).map_err(query)?,
            // SAFETY: `device` came from `cuDeviceGet`.
            memory_bytes: unsafe { result::device::total_mem(device) }.map_err(query)? as u64,
            compute_capability: (
                attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR).map_err(query)?,
                attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR).map_err(query)?,
            ),
            max_grid: [
                grid(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X).map_err(query)?,
                grid(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y).map_err(query)?,
                grid(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z).map_err(query)?,
            ],
            multiprocessors: grid(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).map_err(query)?,
            max_shared_bytes: grid(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)
                .map_err(query)? as u64,
            driver_version: version,
            nvrtc_version: nvrtc_version(),
        };
        // SAFETY: `device` came from `cuDeviceGet`; the retain is released in `Drop`.
        let raw = unsafe { result::primary_ctx::retain(device) }.map_err(|e| {
            unavailable(format!(
                "cannot create a context on CUDA device {ordinal}: {}",
                describe(e)
            ))
        })?;
        let context = Arc::new(Self {
            raw,
            device,
            info,
            lost: OnceLock::new(),
            modules: Mutex::new(HashMap::new()),
            events: Mutex::new(Vec::new()),
            timing_events: Mutex::new(Vec::new()),
        });
        context.bind()?;
        Ok(context)
    }

    /// Makes this context current on the calling thread, or returns the sticky error that
    /// made it unusable.
    pub fn bind(&self) -> Result<(), DeviceError> {
        self.check_alive()?;
        match result::ctx::get_current() {
            Ok(Some(current)) if current == self.raw => Ok(()),
            _ => {
                // SAFETY: `raw` is retained until `Drop`.
                unsafe { result::ctx::set_current(self.raw) }
                    .map_err(|e| self.fail("cuCtxSetCurrent", e))
            }
        }
    }

    /// The GPU's ordinal (`CUdevice` is the ordinal the context was opened with).
    pub fn ordinal(&self) -> u32 {
        self.device as u32
    }

    /// `Lost` once a sticky error happened.
    pub fn check_alive(&self) -> Result<(), DeviceError> {
        match self.lost.get() {
            Some(reason) => Err(DeviceError::Lost {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    pub fn is_lost(&self) -> bool {
        self.lost.get().is_some()
    }

    /// Maps a failure of `call`: a sticky error marks the context lost (the first one is
    /// remembered and returned from then on); any other is an [`DeviceError::ExecutionFault`].
    pub fn fail(&self, call: &str, err: DriverError) -> DeviceError {
        if is_sticky(err.0) {
            let reason = self.lost.get_or_init(|| {
                let reason = lost_reason(call, err);
                tracing::error!(%reason, "CUDA context lost");
                reason
            });
            DeviceError::Lost {
                reason: reason.clone(),
            }
        } else {
            execution_fault(call, err)
        }
    }

    /// Free device memory, for out-of-memory reports (0 if the driver does not say).
    pub fn memory_free_bytes(&self) -> u64 {
        result::mem_get_info().map_or(0, |(free, _)| free as u64)
    }

    // ---- events --------------------------------------------------------------------------

    fn pooled_event(
        &self,
        pool: &Mutex<Vec<sys::CUevent>>,
        flags: sys::CUevent_flags,
    ) -> Result<sys::CUevent, DeviceError> {
        if let Some(event) = lock(pool).pop() {
            return Ok(event);
        }
        result::event::create(flags).map_err(|e| self.fail("cuEventCreate", e))
    }

    /// An event for ordering and completion queries (no timing, cheaper to record).
    pub fn event(&self) -> Result<sys::CUevent, DeviceError> {
        self.pooled_event(&self.events, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
    }

    /// Returns an event from [`event`](Self::event) for reuse. A pending record is fine: a
    /// later record replaces it, and waits already enqueued keep the old one.
    ///
    /// # Safety
    /// `event` came from this context's [`event`](Self::event) and the caller gives it up:
    /// nothing records, queries or recycles it afterwards. The pool hands it out again, and
    /// two holders of one event would each read the other's records as their own completion
    /// (a pinned block lent again while its copy still runs).
    pub unsafe fn recycle_event(&self, event: sys::CUevent) {
        lock(&self.events).push(event);
    }

    /// An event that records a timestamp.
    pub fn timing_event(&self) -> Result<sys::CUevent, DeviceError> {
        self.pooled_event(&self.timing_events, sys::CUevent_flags::CU_EVENT_DEFAULT)
    }

    /// Returns an event from [`timing_event`](Self::timing_event) for reuse.
    ///
    /// # Safety
    /// As for [`recycle_event`](Self::recycle_event), for an event of
    /// [`timing_event`](Self::timing_event).
    pub unsafe fn recycle_timing_event(&self, event: sys::CUevent) {
        lock(&self.timing_events).push(event);
    }

    /// Whether the work before `event` has completed. A sticky error marks the context lost
    /// and counts as complete, since nothing will run any more.
    ///
    /// # Safety
    /// `event` is live: it came from [`event`](Self::event) or
    /// [`timing_event`](Self::timing_event) of a context that is still alive (a pool destroys
    /// its events only in `Drop`, with its context). A sticky error is recorded on `self`.
    pub unsafe fn event_done(&self, event: sys::CUevent) -> bool {
        // SAFETY: a live event (this function's contract).
        match unsafe { result::event::query(event) } {
            Ok(()) => true,
            Err(e) if e.0 == CUresult::CUDA_ERROR_NOT_READY => false,
            Err(e) => {
                let err = self.fail("cuEventQuery", e);
                if !err.is_fatal() {
                    tracing::warn!(error = %err, "event query failed; treating the event as complete");
                }
                true
            }
        }
    }

    // ---- modules -------------------------------------------------------------------------

    /// The entry point of `def` compiled in mode `checked`, compiling and loading it on first
    /// use. A compile failure is [`DeviceError::Compile`] with NVRTC's log.
    pub fn function(&self, def: &KernelDef, checked: bool) -> Result<Function, DeviceError> {
        let key = (def.content_hash(), checked);
        if let Some((_, function)) = lock(&self.modules).get(&key) {
            return Ok(*function);
        }
        let (major, minor) = self.info.compute_capability;
        let image = crate::compile::compile(def, checked, &format!("sm_{major}{minor}"))?;
        let load_failed = |call: &str, e: DriverError| match self.fail(call, e) {
            DeviceError::ExecutionFault { reason, .. } => DeviceError::Compile {
                kernel: def.name.clone(),
                log: format!("the driver refused the compiled module: {reason}"),
            },
            other => other,
        };
        // SAFETY: `image` is a complete CUBIN produced by NVRTC for this device's
        // architecture; the driver copies it during the call.
        let module = unsafe { result::module::load_data(image.as_ptr().cast()) }
            .map_err(|e| load_failed("cuModuleLoadData", e))?;
        let entry = CString::new(crate::lower::ENTRY).expect("the entry name has no NUL");
        // SAFETY: `module` was just loaded in this context.
        let function = match unsafe { result::module::get_function(module, entry) } {
            Ok(function) => Function(function),
            Err(e) => {
                // SAFETY: `module` is loaded and referenced nowhere else.
                let _ = unsafe { result::module::unload(module) };
                return Err(load_failed("cuModuleGetFunction", e));
            }
        };
        let mut modules = lock(&self.modules);
        if let Some((_, existing)) = modules.get(&key) {
            // Another device of this context compiled the same kernel meanwhile.
            // SAFETY: `module` is loaded and referenced nowhere else.
            let _ = unsafe { result::module::unload(module) };
            return Ok(*existing);
        }
        modules.insert(key, (module, function));
        Ok(function)
    }
}

/// Locks `mutex`, ignoring poisoning: every critical section leaves its data consistent
/// before anything in it can panic.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Drop for Context {
    fn drop(&mut self) {
        // Every device, event, read and kernel of this context is gone (each holds an `Arc`).
        // Errors are ignored: on a lost context the driver refuses everything, and the
        // memory goes with the process.
        // SAFETY: `raw` is still retained.
        let _ = unsafe { result::ctx::set_current(self.raw) };
        if !self.is_lost() {
            let _ = result::ctx::synchronize();
        }
        for event in lock(&self.events)
            .drain(..)
            .chain(lock(&self.timing_events).drain(..))
        {
            // SAFETY: events of this context's pools, referenced nowhere else: everything that
            // takes one (a device, a `CudaEvent`, a `PinnedBlock`) holds an `Arc` of the
            // context, so none is left, and the context's work was waited for above.
            let _ = unsafe { result::event::destroy(event) };
        }
        for (_, (module, _)) in lock(&self.modules).drain() {
            // SAFETY: loaded by `function` in this context, unloaded once (drained); no kernel of
            // it is alive (a `CudaKernel` holds an `Arc` of the context), so no launch can use
            // the module.
            let _ = unsafe { result::module::unload(module) };
        }
        // SAFETY: balances the retain in `new`.
        let _ = unsafe { result::primary_ctx::release(self.device) };
    }
}
