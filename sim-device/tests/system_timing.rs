//! The host-timing fallback: a device without timestamps (here the simulator with its
//! `timestamps` feature hidden, every call passed through) is profiled with the host clock
//! around stream syncs, and says so. Durations are wall-clock, so the tests check the method,
//! that the profiled work ran, and that nothing is refused or lost, never a time.

use lockstep::device::{BufferSlice, LaunchCount};
use lockstep::kernel::{Access, Axis, CompileOptions, ElemType, KernelBuilder, KernelDef, Scalar};
use lockstep::{
    Bytes, ComputeClient, CubeCount, Device, DeviceError, DeviceProperties, Kernel,
    KernelArguments, ProfileLevel, TimingMethod,
};
use lockstep_sim::{SimConfig, SimDevice};

/// The simulator, reporting no timestamps.
struct Untimed {
    inner: SimDevice,
    properties: DeviceProperties,
}

impl Untimed {
    fn new(seed: u64) -> Self {
        let inner = SimDevice::new(SimConfig::new(seed));
        let mut properties = inner.properties().clone();
        properties.features.timestamps = false;
        Self { inner, properties }
    }
}

type Sim = SimDevice;

impl Device for Untimed {
    type Buffer = <Sim as Device>::Buffer;
    type Stream = <Sim as Device>::Stream;
    type Event = <Sim as Device>::Event;
    type Kernel = <Sim as Device>::Kernel;
    type PendingRead = <Sim as Device>::PendingRead;
    type Graph = <Sim as Device>::Graph;
    type Timestamp = <Sim as Device>::Timestamp;
    const TYPE_ID: u16 = Sim::TYPE_ID;

    fn properties(&self) -> &DeviceProperties {
        &self.properties
    }
    fn create_stream(&mut self) -> Result<Self::Stream, DeviceError> {
        self.inner.create_stream()
    }
    fn label_stream(&mut self, stream: Self::Stream, id: lockstep::StreamId) {
        self.inner.label_stream(stream, id)
    }
    fn allocate(&mut self, bytes: u64) -> Result<Self::Buffer, DeviceError> {
        self.inner.allocate(bytes)
    }
    fn free(&mut self, buffer: Self::Buffer) {
        self.inner.free(buffer)
    }
    fn write(
        &mut self,
        stream: Self::Stream,
        dst: &Self::Buffer,
        offset: u64,
        data: &[u8],
    ) -> Result<(), DeviceError> {
        self.inner.write(stream, dst, offset, data)
    }
    fn read(
        &mut self,
        stream: Self::Stream,
        src: &Self::Buffer,
        offset: u64,
        len: u64,
    ) -> Result<Self::PendingRead, DeviceError> {
        self.inner.read(stream, src, offset, len)
    }
    fn wait_read(&mut self, read: Self::PendingRead) -> Result<lockstep::Bytes, DeviceError> {
        self.inner.wait_read(read)
    }
    fn copy(
        &mut self,
        stream: Self::Stream,
        src: BufferSlice<'_, Self::Buffer>,
        dst: &Self::Buffer,
        dst_offset: u64,
    ) -> Result<(), DeviceError> {
        self.inner.copy(stream, src, dst, dst_offset)
    }
    fn compile(
        &mut self,
        kernel: &KernelDef,
        options: CompileOptions,
    ) -> Result<Self::Kernel, DeviceError> {
        self.inner.compile(kernel, options)
    }
    fn launch(
        &mut self,
        stream: Self::Stream,
        kernel: &Self::Kernel,
        count: LaunchCount<'_, Self::Buffer>,
        bindings: &[BufferSlice<'_, Self::Buffer>],
        params: &[Scalar],
    ) -> Result<(), DeviceError> {
        self.inner.launch(stream, kernel, count, bindings, params)
    }
    fn record_event(&mut self, stream: Self::Stream) -> Result<Self::Event, DeviceError> {
        self.inner.record_event(stream)
    }
    fn wait_event(&mut self, stream: Self::Stream, event: &Self::Event) -> Result<(), DeviceError> {
        self.inner.wait_event(stream, event)
    }
    fn event_complete(&mut self, event: &Self::Event) -> bool {
        self.inner.event_complete(event)
    }
    fn flush(&mut self, stream: Self::Stream) -> Result<(), DeviceError> {
        self.inner.flush(stream)
    }
    fn synchronize(&mut self, stream: Self::Stream) -> Result<(), DeviceError> {
        self.inner.synchronize(stream)
    }
    fn take_errors(&mut self, stream: Self::Stream) -> Vec<DeviceError> {
        self.inner.take_errors(stream)
    }
    fn record_timestamp(&mut self, _: Self::Stream) -> Result<Self::Timestamp, DeviceError> {
        Err(DeviceError::Unsupported {
            operation: "record_timestamp (hidden by the test)".to_owned(),
        })
    }
    fn elapsed_ns(&mut self, _: &Self::Timestamp, _: &Self::Timestamp) -> Result<u64, DeviceError> {
        Err(DeviceError::Unsupported {
            operation: "elapsed_ns (hidden by the test)".to_owned(),
        })
    }
    fn begin_capture(&mut self, stream: Self::Stream) -> Result<(), DeviceError> {
        self.inner.begin_capture(stream)
    }
    fn end_capture(&mut self, stream: Self::Stream) -> Result<Self::Graph, DeviceError> {
        self.inner.end_capture(stream)
    }
    fn replay(&mut self, stream: Self::Stream, graph: &Self::Graph) -> Result<(), DeviceError> {
        self.inner.replay(stream, graph)
    }
    fn destroy_graph(&mut self, graph: Self::Graph) {
        self.inner.destroy_graph(graph)
    }
}

fn add_one() -> Kernel {
    let mut k = KernelBuilder::new("add_one", [4, 1, 1]);
    let data = k.binding(ElemType::U32, Access::ReadWrite);
    let i = k.global_id(Axis::X);
    k.if_(i.lt(data.len()), |k| {
        k.store(data, i, data.load(i) + 1u32);
    });
    k.build().unwrap()
}

#[test]
fn a_device_without_timestamps_is_profiled_with_the_host_clock() {
    let c = ComputeClient::new(Untimed::new(1));
    assert_eq!(c.timing_method(), TimingMethod::System);
    let h = c.create(Bytes::from_elems(&[0u32; 16])).unwrap();
    let launch = || {
        c.launch(
            &add_one(),
            CubeCount::Static(4, 1, 1),
            KernelArguments::new().binding(&h),
        )
        .unwrap()
    };
    let ((), duration) = c.profile(launch, "add_one").unwrap();
    assert_eq!(duration.timing_method(), TimingMethod::System);
    duration.resolve_blocking().unwrap();

    // Every launch is still registered, timed on the host.
    c.set_profile_level(Some(ProfileLevel::Medium));
    launch();
    launch();
    c.sync().unwrap();
    let summary = c.profile_summary().unwrap();
    assert_eq!(summary.method, Some(TimingMethod::System));
    assert_eq!(summary.kernels.len(), 1);
    assert_eq!(summary.kernels[0].label, "add_one [4, 1, 1]");
    assert_eq!(summary.kernels[0].launches, 2);
    assert!(summary.kernels[0].total.is_some());
    assert_eq!(c.read_one(h).unwrap().to_elems::<u32>(), vec![3; 16]);
}
