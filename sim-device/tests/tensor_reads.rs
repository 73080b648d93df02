//! Tensor reads through the client on the simulator: strided and broadcast views come back
//! gathered dense, and a view whose dense bytes no host holds is refused with a typed error,
//! never a panic or an abort.

use lockstep::{Bytes, ComputeClient, CopyDescriptor, IoError, ServerError, StreamId, block_on};
use lockstep_sim::{SimConfig, SimDevice};

fn client() -> ComputeClient<SimDevice> {
    let mut c = ComputeClient::new(SimDevice::new(SimConfig::new(5)));
    c.set_stream(StreamId(0));
    c
}

fn read(
    c: &ComputeClient<SimDevice>,
    handle: &lockstep::Handle,
    shape: &[usize],
    strides: &[usize],
) -> Result<Vec<u32>, ServerError> {
    let descriptor = CopyDescriptor::new(handle.clone(), shape.to_vec(), strides.to_vec(), 4);
    let mut read = block_on(c.read_tensor_async(vec![descriptor]))?;
    Ok(read.remove(0).to_elems())
}

#[test]
fn transposed_and_broadcast_views_read_back_dense() {
    let c = client();
    let h = c.create(Bytes::from_elems(&[1u32, 2, 3, 4, 5, 6])).unwrap();
    assert_eq!(read(&c, &h, &[3, 2], &[1, 3]), Ok(vec![1, 4, 2, 5, 3, 6]));
    assert_eq!(read(&c, &h, &[2, 3], &[0, 1]), Ok(vec![1, 2, 3, 1, 2, 3]));
    assert_eq!(read(&c, &h, &[4], &[0]), Ok(vec![1; 4]));
    assert_eq!(read(&c, &h, &[0, 5], &[usize::MAX, 1]), Ok(vec![]));
}

/// Found drawing the explorer's strides from boundary classes: a broadcast view (stride 0) spans one element of
/// its handle whatever its shape, and its dense size went unchecked, so reading it panicked
/// multiplying (2^62 elements), panicked allocating (2^61) or aborted the process when the
/// host refused the bytes (2^46 elements, 256 TiB).
#[test]
fn a_broadcast_view_of_more_bytes_than_any_host_holds_is_refused() {
    let c = client();
    let h = c.create(Bytes::from_elems(&[7u32])).unwrap();
    let mut messages = Vec::new();
    for shape in [
        vec![1usize << 62],
        vec![1 << 61],
        vec![1 << 31, 1 << 31, 1 << 31],
    ] {
        let strides = vec![0; shape.len()];
        let err = read(&c, &h, &shape, &strides).unwrap_err();
        assert!(
            matches!(err, ServerError::Io(IoError::InvalidLayout { .. })),
            "{shape:?}: {err}"
        );
        messages.push(err.to_string());
    }
    // Within `isize::MAX`, but more than any address space holds: refused by the host.
    let err = read(&c, &h, &[1 << 46], &[0]).unwrap_err();
    let stream = StreamId(0);
    assert_eq!(
        err,
        ServerError::HostOutOfMemory {
            bytes: 1 << 48,
            stream
        }
    );
    messages.push(err.to_string());
    insta::assert_snapshot!(messages.join("\n"));
    // Nothing else failed: the stream reads on.
    assert_eq!(read(&c, &h, &[3], &[0]), Ok(vec![7; 3]));
    c.sync().unwrap();
}
