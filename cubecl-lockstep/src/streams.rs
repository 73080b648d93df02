//! cubecl's streams folded onto Lockstep's, each with a client pinned to it.
//!
//! cubecl gives every thread its own stream id and lets tests pin ids; its own backends fold
//! them onto a pool of `max_streams` streams (`cubecl_server::stream::stream_index`), and so
//! does the adapter, so that two ids cubecl's suite means to share one pooled stream share
//! one Lockstep stream. Lockstep orders accesses across its streams itself.

use std::collections::BTreeMap;

use cubecl_environment::stream::StreamId as CubeclStream;
use cubecl_runtime::config::{CubeClRuntimeConfig, RuntimeConfig};
use cubecl_server::stream::stream_index;
use lockstep::{ComputeClient, Device, StreamId};

use crate::books::StreamKey;

/// The Lockstep streams in use, each with its pinned client.
#[derive(Debug)]
pub struct Streams<D: Device> {
    device: ComputeClient<D>,
    max_streams: usize,
    pinned: BTreeMap<StreamKey, ComputeClient<D>>,
}

impl<D: Device> Streams<D> {
    /// Streams of `device`, folded as cubecl's configuration says.
    pub fn new(device: ComputeClient<D>) -> Self {
        let max_streams = CubeClRuntimeConfig::get().streaming.max_streams.max(1) as usize;
        Self {
            device,
            max_streams,
            pinned: BTreeMap::new(),
        }
    }

    /// The Lockstep stream cubecl's `stream` folds onto.
    pub fn key(&self, stream: CubeclStream) -> StreamKey {
        stream_index(&stream, self.max_streams) as StreamKey
    }

    /// The client pinned to stream `key`.
    pub fn client(&mut self, key: StreamKey) -> &ComputeClient<D> {
        let device = &self.device;
        self.pinned.entry(key).or_insert_with(|| {
            let mut client = device.clone();
            client.set_stream(StreamId(key));
            client
        })
    }

    /// The device's client, for what is not per stream (properties, memory usage).
    pub fn device(&self) -> &ComputeClient<D> {
        &self.device
    }
}
