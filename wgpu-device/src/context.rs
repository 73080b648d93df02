//! The wgpu objects a device drives: instance, adapter, device and queue, chosen once and
//! shareable by several [`WgpuDevice`](crate::WgpuDevice) views (the conformance suite opens one
//! view per case over one context). Also what outlives a view: the compiled-pipeline cache,
//! the device-lost flag and the sink for errors no error scope caught.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use lockstep::DeviceError;

use crate::pipelines::Pipelines;

/// Which adapter to open.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WgpuOptions {
    /// Only this backend; `None` tries every backend compiled in.
    pub backend: Option<BackendChoice>,
    /// Only adapters whose name contains this, ignoring case.
    pub adapter: Option<String>,
}

/// A backend named by `LOCKSTEP_WGPU_BACKEND`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    /// Vulkan (`vulkan` or `vk`): Linux, Windows, Android; lavapipe on a machine without a GPU.
    Vulkan,
    /// Metal (`metal`): macOS and iOS.
    Metal,
    /// Direct3D 12 (`dx12` or `d3d12`): Windows.
    Dx12,
    /// OpenGL / GLES (`gl`, `gles` or `opengl`).
    Gl,
}

impl BackendChoice {
    fn parse(name: &str) -> Result<Self, DeviceError> {
        match name.to_ascii_lowercase().as_str() {
            "vulkan" | "vk" => Ok(Self::Vulkan),
            "metal" => Ok(Self::Metal),
            "dx12" | "d3d12" => Ok(Self::Dx12),
            "gl" | "gles" | "opengl" => Ok(Self::Gl),
            other => Err(DeviceError::Unavailable {
                reason: format!(
                    "LOCKSTEP_WGPU_BACKEND={other:?}: expected vulkan, metal, dx12 or gl"
                ),
            }),
        }
    }

    fn backends(self) -> wgpu::Backends {
        match self {
            Self::Vulkan => wgpu::Backends::VULKAN,
            Self::Metal => wgpu::Backends::METAL,
            Self::Dx12 => wgpu::Backends::DX12,
            Self::Gl => wgpu::Backends::GL,
        }
    }
}

impl WgpuOptions {
    /// Reads `LOCKSTEP_WGPU_BACKEND` (vulkan, metal, dx12, gl) and `LOCKSTEP_WGPU_ADAPTER`
    /// (a substring of the adapter name).
    pub fn from_env() -> Result<Self, DeviceError> {
        let backend = match std::env::var("LOCKSTEP_WGPU_BACKEND") {
            Ok(name) if !name.is_empty() => Some(BackendChoice::parse(&name)?),
            _ => None,
        };
        let adapter = std::env::var("LOCKSTEP_WGPU_ADAPTER")
            .ok()
            .filter(|s| !s.is_empty());
        Ok(Self { backend, adapter })
    }
}

/// The errors the device thread shares with wgpu's callback for uncaptured errors.
#[derive(Debug, Default)]
pub(crate) struct Sink {
    /// Errors raised outside every error scope, oldest first.
    pub uncaptured: Vec<DeviceError>,
}

/// PCI vendor id of NVIDIA.
const NVIDIA: u32 = 0x10de;

/// Whether the adapter's compiler is known to fuse an `f16` multiply and add into one
/// rounding, which SPIR-V permits unless told otherwise and naga does not tell it: the IR
/// rounds each operation, so such an adapter does not claim `f16`. NVIDIA's Vulkan driver
/// (580, on an H200) computed `f16(5568) * f16(-0.18457) + 0.5` as -1027 where each
/// operation rounded gives -1028, even with the product written as
/// `f16(f32(a) * f32(b))`; lavapipe rounds each operation.
fn contracts_f16(info: &wgpu::AdapterInfo) -> bool {
    info.vendor == NVIDIA
}

/// An opened adapter and device. Cheap to share; see the module documentation.
#[derive(Debug)]
pub struct GpuContext {
    pub(crate) adapter_info: wgpu::AdapterInfo,
    /// The opened adapter's index among the adapters of the selected backends, in the order
    /// wgpu enumerates them, and how many there are: a device's ordinal and device count.
    pub(crate) adapter_index: u32,
    pub(crate) adapter_count: u32,
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) limits: wgpu::Limits,
    pub(crate) timestamps: bool,
    /// Whether the device was opened with `SHADER_F16` (the adapter has it).
    pub(crate) shader_f16: bool,
    pub(crate) sink: Arc<Mutex<Sink>>,
    /// Why the device was lost, once it was (set once, by wgpu's device-lost callback): read
    /// without a lock, since every operation checks it.
    lost: Arc<OnceLock<String>>,
    /// Compiled kernels by (IR content hash, checked), and the built-in kernels.
    pub(crate) pipelines: Mutex<Pipelines>,
    /// Bind group layouts by the read-only flags of their storage bindings.
    pub(crate) layouts: Mutex<HashMap<Vec<bool>, wgpu::BindGroupLayout>>,
    /// Source of buffer ids, unique across every view of this context.
    ids: AtomicU64,
}

/// Locks a mutex whose data stays consistent even if a holder panicked (every critical section
/// here is a push, a take or a map insert).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl GpuContext {
    /// Opens the adapter `options` select. No adapter (no driver, no loader, nothing matching)
    /// is [`DeviceError::Unavailable`] with the reason; this never panics.
    pub fn open(options: &WgpuOptions) -> Result<Arc<Self>, DeviceError> {
        let (instance, backends) = instance(options)?;
        let Chosen {
            adapter,
            index: adapter_index,
            count: adapter_count,
        } = choose_adapter(&instance, backends, options)?;
        let info = adapter.get_info();
        let timestamp_features =
            wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS;
        let timestamps = adapter.features().contains(timestamp_features);
        // `f16` in shaders and storage buffers (`enable f16;`), requested where the adapter
        // has it and rounds as the IR says; kernels using `f16` are refused elsewhere
        // (`Features::f16`).
        let shader_f16 =
            adapter.features().contains(wgpu::Features::SHADER_F16) && !contracts_f16(&info);
        let limits = adapter.limits();
        let mut required_features = wgpu::Features::empty();
        if timestamps {
            required_features |= timestamp_features;
        }
        if shader_f16 {
            required_features |= wgpu::Features::SHADER_F16;
        }
        let descriptor = wgpu::DeviceDescriptor {
            label: Some("lockstep"),
            required_features,
            required_limits: limits.clone(),
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        };
        let (device, queue) =
            pollster::block_on(adapter.request_device(&descriptor)).map_err(|err| {
                DeviceError::Unavailable {
                    reason: format!("{}: request_device failed: {err}", describe(&info)),
                }
            })?;
        let (sink, lost) = watch(&device);
        Ok(Arc::new(Self {
            adapter_info: info,
            adapter_index,
            adapter_count,
            device,
            queue,
            limits,
            timestamps,
            shader_f16,
            sink,
            lost,
            pipelines: Mutex::new(Pipelines::default()),
            layouts: Mutex::new(HashMap::new()),
            ids: AtomicU64::new(0),
        }))
    }

    /// "vulkan (llvmpipe: Mesa 22.3.6 (LLVM 15.0.6))": the backend and the driver.
    pub fn backend_description(&self) -> String {
        let info = &self.adapter_info;
        let backend = info.backend.to_string().to_lowercase();
        match (info.driver.is_empty(), info.driver_info.is_empty()) {
            (true, true) => backend,
            (false, true) => format!("{backend} ({})", info.driver),
            (true, false) => format!("{backend} ({})", info.driver_info),
            (false, false) => format!("{backend} ({} {})", info.driver, info.driver_info),
        }
    }

    pub(crate) fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::Relaxed)
    }

    /// The name of the adapter the context chose, as wgpu reports it.
    pub fn adapter_name(&self) -> &str {
        &self.adapter_info.name
    }

    /// Why the device was lost, if it was.
    pub(crate) fn lost(&self) -> Option<&str> {
        self.lost.get().map(String::as_str)
    }

    pub(crate) fn check_alive(&self) -> Result<(), DeviceError> {
        match self.lost() {
            Some(reason) => Err(DeviceError::Lost {
                reason: reason.to_owned(),
            }),
            None => Ok(()),
        }
    }

    /// The bind group layout for storage bindings with these read-only flags, followed by the
    /// read-only info binding with a dynamic offset.
    pub(crate) fn layout(&self, read_only: &[bool]) -> wgpu::BindGroupLayout {
        let mut layouts = lock(&self.layouts);
        if let Some(layout) = layouts.get(read_only) {
            return layout.clone();
        }
        let storage = |binding: u32, read_only: bool, dynamic: bool| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only },
                has_dynamic_offset: dynamic,
                min_binding_size: None,
            },
            count: None,
        };
        let mut entries: Vec<_> = read_only
            .iter()
            .enumerate()
            .map(|(i, &ro)| storage(i as u32, ro, false))
            .collect();
        entries.push(storage(read_only.len() as u32, true, true));
        let layout = self
            .device
            .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some("lockstep kernel"),
                entries: &entries,
            });
        layouts.insert(read_only.to_vec(), layout.clone());
        layout
    }
}

/// A wgpu instance on the backends `options` ask for that this build has, and those backends.
fn instance(options: &WgpuOptions) -> Result<(wgpu::Instance, wgpu::Backends), DeviceError> {
    let compiled_in = wgpu::Instance::enabled_backend_features();
    let wanted = options
        .backend
        .map_or(wgpu::Backends::all(), BackendChoice::backends);
    let backends = compiled_in & wanted;
    if backends.is_empty() {
        return Err(DeviceError::Unavailable {
            reason: format!(
                "backend {:?} is not compiled into this build (it has {compiled_in:?})",
                options.backend
            ),
        });
    }
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
        backends,
        // Indirect dispatches whose counts exceed the device's limits are undefined behaviour
        // unless wgpu validates them (it turns them into no-ops, the runtime's contract for a
        // dynamic count): on whatever the environment says.
        flags: wgpu::InstanceFlags::empty().with_env()
            | wgpu::InstanceFlags::VALIDATION_INDIRECT_CALL,
        memory_budget_thresholds: Default::default(),
        backend_options: Default::default(),
        display: None,
    });
    Ok((instance, backends))
}

/// The adapter a context opens, with its place among those the instance enumerated.
struct Chosen {
    adapter: wgpu::Adapter,
    /// Its index in the enumeration.
    index: u32,
    /// How many adapters the enumeration found.
    count: u32,
}

/// The most preferred adapter (a discrete GPU before an integrated one before a CPU) whose
/// name contains `options.adapter`, if given; none is `Unavailable`, listing what was found.
fn choose_adapter(
    instance: &wgpu::Instance,
    backends: wgpu::Backends,
    options: &WgpuOptions,
) -> Result<Chosen, DeviceError> {
    let adapters = pollster::block_on(instance.enumerate_adapters(backends));
    let found: Vec<String> = adapters.iter().map(|a| describe(&a.get_info())).collect();
    let count = adapters.len() as u32;
    let (index, adapter) = adapters
        .into_iter()
        .zip(0..)
        .map(|(a, i)| (i, a))
        .filter(|(_, a)| {
            options.adapter.as_ref().is_none_or(|want| {
                a.get_info()
                    .name
                    .to_lowercase()
                    .contains(&want.to_lowercase())
            })
        })
        .min_by_key(|(_, a)| preference(a.get_info().device_type))
        .ok_or_else(|| DeviceError::Unavailable {
            reason: if found.is_empty() {
                format!(
                    "no wgpu adapter for {backends:?} (is a Vulkan loader and driver installed?)"
                )
            } else {
                format!(
                    "no adapter name contains {:?}; found: {}",
                    options.adapter.as_deref().unwrap_or_default(),
                    found.join("; ")
                )
            },
        })?;
    Ok(Chosen {
        adapter,
        index,
        count,
    })
}

/// Where `device` reports what no call returns: its uncaptured errors (the sink) and the
/// reason it was lost, once.
fn watch(device: &wgpu::Device) -> (Arc<Mutex<Sink>>, Arc<OnceLock<String>>) {
    let sink = Arc::new(Mutex::new(Sink::default()));
    let lost = Arc::new(OnceLock::new());
    {
        let lost = lost.clone();
        device.set_device_lost_callback(move |reason, message| {
            if lost.set(format!("{reason:?}: {message}")).is_ok() {
                tracing::error!(?reason, %message, "wgpu device lost");
            }
        });
    }
    {
        let sink = sink.clone();
        device.on_uncaptured_error(Arc::new(move |error: wgpu::Error| {
            tracing::error!(%error, "uncaptured wgpu error");
            lock(&sink).uncaptured.push(device_error(&error, "wgpu"));
        }));
    }
    (sink, lost)
}

/// Discrete GPUs first, CPU renderers last.
fn preference(device_type: wgpu::DeviceType) -> u8 {
    match device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    }
}

fn describe(info: &wgpu::AdapterInfo) -> String {
    format!("{} ({:?}, {:?})", info.name, info.backend, info.device_type)
}

/// A wgpu error as a device error: out of memory stays out of memory, everything else is a
/// fault of the operation named.
pub(crate) fn device_error(error: &wgpu::Error, operation: &str) -> DeviceError {
    match error {
        wgpu::Error::OutOfMemory { .. } => DeviceError::OutOfMemory {
            requested_bytes: 0,
            available_bytes: 0,
        },
        other => DeviceError::ExecutionFault {
            operation: operation.to_owned(),
            reason: other.to_string(),
        },
    }
}
