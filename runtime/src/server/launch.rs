//! Kernel launches: compiling, ordering a launch after the work its buffers wait on, and noting
//! what a launch recorded into a capture touches.
//!
//! A checked launch (see [`ServerOptions::kernel_checks`](super::ServerOptions::kernel_checks)) also binds
//! its stream's fault record, allocated and zeroed on the stream's first checked launch.

use super::streams::CaptureState;
use super::{Server, raw_slice};
use crate::device::{BufferSlice, Device, LaunchCount};
use crate::error::{DeviceError, ServerError};
use crate::ids::CountArg;
use crate::ids::{BufferId, BufferRange};
use crate::kernel::{Access, FaultRecord, Kernel, KernelChecks, Scalar};
use crate::stream::StreamId;

impl<D: Device> Server<D> {
    /// Compiles `kernel` now, so that a compile failure is reported at the call.
    pub fn compile(&mut self, stream: StreamId, kernel: &Kernel) -> Result<(), ServerError> {
        self.check_alive()?;
        let checks = self.checks_for(kernel);
        self.kernels
            .get_or_compile(&mut self.device, kernel, checks)
            .map(|_| ())
            .map_err(|err| ServerError::device(stream, err))
    }

    /// Enqueues a launch; failures (including compile errors) surface at the stream's next
    /// blocking call.
    pub fn launch(
        &mut self,
        stream: StreamId,
        kernel: &Kernel,
        count: CountArg<BufferRange>,
        bindings: &[BufferRange],
        params: &[Scalar],
    ) {
        if self.lost.is_some() || self.stream(stream).is_err() {
            return;
        }
        let checked = self.checks_for(kernel).is_checked();
        if checked && self.ensure_fault_record(stream).is_none() {
            return;
        }
        let accessed = accessed_buffers(kernel, bindings, &count);
        let capturing = matches!(
            self.streams[&stream].capture,
            CaptureState::Capturing { .. }
        );
        let launched = self.enqueue_or_queue_error(stream, |server| {
            // A recorded launch runs at each replay, which is ordered then.
            if !capturing {
                for &(buffer, write) in &accessed {
                    server.order_before_access(stream, buffer, write)?;
                }
            }
            server.launch_on_device(stream, kernel, &count, bindings, params)
        });
        if capturing {
            self.note_captured_launch(stream, &accessed, checked);
            return;
        }
        if launched.is_some() && checked {
            self.streams
                .get_mut(&stream)
                .expect("stream exists")
                .fault_record_dirty = true;
        }
        self.after_access(stream, &accessed);
    }

    /// The device call of a launch: compiles `kernel` on first use, resolves the bindings to
    /// device slices (plus the fault record when checked) and launches on `stream`.
    fn launch_on_device(
        &mut self,
        stream: StreamId,
        kernel: &Kernel,
        count: &CountArg<BufferRange>,
        bindings: &[BufferRange],
        params: &[Scalar],
    ) -> Result<(), DeviceError> {
        let checks = self.checks_for(kernel);
        let checked = checks.is_checked();
        let compiled = self
            .kernels
            .get_or_compile(&mut self.device, kernel, checks)?;
        let state = &self.streams[&stream];
        let slice = |range: &BufferRange| raw_slice(&self.buffers, &self.pages, range);
        // `launch_view_offsets` off re-introduces a known defect for the explorer to find.
        let view_offsets = self.options.launch_view_offsets;
        let mut slices: Vec<_> = bindings
            .iter()
            .map(|range| match view_offsets {
                true => slice(range),
                false => slice(&BufferRange {
                    offset: 0,
                    ..*range
                }),
            })
            .collect();
        if let Some(record) = state.fault_record.as_ref().filter(|_| checked) {
            slices.push(BufferSlice {
                buffer: record,
                offset: 0,
                len: FaultRecord::BYTES as u64,
            });
        }
        let count = match count {
            CountArg::Static(dims) => LaunchCount::Static(*dims),
            CountArg::Dynamic(range) => LaunchCount::Dynamic(slice(range)),
        };
        self.device
            .launch(state.raw, &compiled.raw, count, &slices, params)
    }

    /// A launch was recorded into `stream`'s capture: the capture notes the buffers it touches
    /// (and whether it writes each) and keeps the ones it had not touched yet alive, as its
    /// graph will.
    fn note_captured_launch(
        &mut self,
        stream: StreamId,
        accessed: &[(BufferId, bool)],
        checked: bool,
    ) {
        let state = self.streams.get_mut(&stream).expect("stream exists");
        let CaptureState::Capturing {
            buffers,
            checked: graph_checked,
            ..
        } = &mut state.capture
        else {
            unreachable!("note_captured_launch is called for a capturing stream")
        };
        let mut captured = Vec::new();
        for &(buffer, write) in accessed {
            let entry = buffers.entry(buffer);
            if matches!(entry, std::collections::btree_map::Entry::Vacant(_)) {
                captured.push(buffer);
            }
            *entry.or_default() |= write;
        }
        *graph_checked |= checked;
        for buffer in captured {
            self.buffers
                .get_mut(&buffer)
                .expect("a launch's buffers are alive")
                .graph_refs += 1;
        }
    }

    /// How `kernel` is compiled and launched here: checked when both the server and the kernel
    /// are ([`Kernel::with_checks`]).
    fn checks_for(&self, kernel: &Kernel) -> KernelChecks {
        match kernel.checks().is_checked() {
            true => self.options.kernel_checks,
            false => kernel.checks(),
        }
    }

    /// Allocates and zeroes the stream's fault record on its first checked launch.
    pub(super) fn ensure_fault_record(&mut self, stream: StreamId) -> Option<()> {
        if self.streams[&stream].fault_record.is_some() {
            return Some(());
        }
        let raw_stream = self.streams[&stream].raw;
        let record = self.enqueue_or_queue_error(stream, |server| {
            let record = server.device.allocate(FaultRecord::BYTES as u64)?;
            server
                .device
                .write(raw_stream, &record, 0, &[0u8; FaultRecord::BYTES])?;
            Ok(record)
        })?;
        self.streams
            .get_mut(&stream)
            .expect("stream exists")
            .fault_record = Some(record);
        Some(())
    }
}

/// The buffers a launch touches and whether it writes each: its bindings in declaration order
/// (written when declared read-write), then the buffer of a dynamic count (read).
fn accessed_buffers(
    kernel: &Kernel,
    bindings: &[BufferRange],
    count: &CountArg<BufferRange>,
) -> Vec<(BufferId, bool)> {
    let mut accessed: Vec<(BufferId, bool)> = kernel
        .def()
        .bindings
        .iter()
        .zip(bindings)
        .map(|(decl, range)| (range.buffer, decl.access == Access::ReadWrite))
        .collect();
    if let CountArg::Dynamic(range) = count {
        accessed.push((range.buffer, false));
    }
    accessed
}
