//! `write_tensor` on the simulator: exact bytes for pitched, sliced and transposed layouts,
//! typed refusals that write nothing, and one device copy per run of consecutive elements.

use lockstep::{
    Bytes, ComputeClient, CopyDescriptor, Handle, IoError, MemoryLayoutDescriptor,
    MemoryLayoutStrategy, ServerOptions,
};
use lockstep_sim::{SimConfig, SimDevice, SimProbe};

/// An inline client: a call has run its task when it returns, so the probe counts its copies.
fn client() -> (ComputeClient<SimDevice>, SimProbe) {
    let device = SimDevice::new(SimConfig::new(31));
    let probe = device.probe();
    (
        ComputeClient::inline(device, ServerOptions::default()),
        probe,
    )
}

fn elems(values: std::ops::Range<u32>) -> Bytes {
    Bytes::from_elems(&values.collect::<Vec<_>>())
}

fn raw(c: &ComputeClient<SimDevice>, handle: &Handle) -> Vec<u32> {
    c.read_one(handle.clone()).unwrap().to_elems()
}

fn tensor(handle: &Handle, shape: &[usize], strides: &[usize]) -> CopyDescriptor {
    CopyDescriptor::new(handle.clone(), shape.to_vec(), strides.to_vec(), 4)
}

#[test]
fn a_pitched_tensor_is_written_row_by_row_and_its_padding_kept() {
    let (c, probe) = client();
    // Two rows of three u32s, pitched to 16 bytes: strides [4, 1], the padding zeroed.
    let layout = c.create_tensor(elems(1..7), &[2, 3], 4).unwrap();
    assert_eq!(layout.strides, vec![4, 1]);
    let t = tensor(&layout.memory, &[2, 3], &layout.strides);
    let enqueued = probe.observations().ops_enqueued;
    c.write_tensor(t.clone(), elems(10..16)).unwrap();
    assert_eq!(
        probe.observations().ops_enqueued - enqueued,
        2,
        "one copy per row"
    );
    assert_eq!(raw(&c, &layout.memory), vec![10, 11, 12, 0, 13, 14, 15, 0]);
    assert_eq!(
        c.read_tensor(vec![t]).remove(0).to_elems::<u32>(),
        vec![10, 11, 12, 13, 14, 15]
    );
}

#[test]
fn a_dense_write_into_a_pitched_tensor_fills_the_padding_as_its_docs_say() {
    let (c, _) = client();
    let layout = c.create_tensor(elems(1..7), &[2, 3], 4).unwrap();
    c.write(&layout.memory, elems(10..16)).unwrap();
    // The last element of the created tensor stays, past the six bytes written.
    assert_eq!(raw(&c, &layout.memory), vec![10, 11, 12, 13, 14, 15, 6, 0]);
    let t = tensor(&layout.memory, &[2, 3], &layout.strides);
    assert_eq!(
        c.read_tensor(vec![t]).remove(0).to_elems::<u32>(),
        vec![10, 11, 12, 14, 15, 6],
        "the second row reads back shifted"
    );
}

#[test]
fn a_column_block_leaves_the_other_columns_and_a_dense_tensor_is_one_copy() {
    let (c, probe) = client();
    let h = c.create(elems(0..12)).unwrap();
    // Columns 0 and 1 of a 3 x 4 matrix.
    c.write_tensor(tensor(&h, &[3, 2], &[4, 1]), elems(100..106))
        .unwrap();
    assert_eq!(
        raw(&c, &h),
        vec![100, 101, 2, 3, 102, 103, 6, 7, 104, 105, 10, 11]
    );
    let enqueued = probe.observations().ops_enqueued;
    c.write_tensor(tensor(&h, &[3, 4], &[4, 1]), elems(20..32))
        .unwrap();
    assert_eq!(probe.observations().ops_enqueued - enqueued, 1);
    assert_eq!(raw(&c, &h), (20..32).collect::<Vec<_>>());
}

#[test]
fn a_transposed_layout_is_written_element_by_element() {
    let (c, _) = client();
    let h = c.empty(24).unwrap();
    // Element [i, j] at i + 2 * j.
    c.write_tensor(tensor(&h, &[2, 3], &[1, 2]), elems(1..7))
        .unwrap();
    assert_eq!(raw(&c, &h), vec![1, 4, 2, 5, 3, 6]);
}

#[test]
fn packed_tensors_are_written_each_at_its_own_offset() {
    let (c, _) = client();
    let desc =
        |shape: Vec<usize>| MemoryLayoutDescriptor::new(MemoryLayoutStrategy::Optimized, shape, 4);
    let layouts = c
        .empty_tensors(vec![desc(vec![2, 3]), desc(vec![3])])
        .unwrap();
    let tensors: Vec<CopyDescriptor> = layouts
        .iter()
        .zip([vec![2, 3], vec![3]])
        .map(|(l, shape)| tensor(&l.memory, &shape, &l.strides))
        .collect();
    c.write_tensors(vec![
        (tensors[0].clone(), elems(1..7)),
        (tensors[1].clone(), elems(7..10)),
    ])
    .unwrap();
    let read: Vec<Vec<u32>> = c
        .read_tensor(tensors)
        .into_iter()
        .map(|b| b.to_elems())
        .collect();
    assert_eq!(read, vec![vec![1, 2, 3, 4, 5, 6], vec![7, 8, 9]]);
}

#[test]
fn bad_tensor_writes_are_refused_at_the_call_and_write_nothing() {
    let (c, _) = client();
    let h = c.create(elems(0..6)).unwrap();
    let refusals = [
        c.write_tensor(tensor(&h, &[2, 3], &[3]), elems(0..6)),
        c.write_tensor(
            CopyDescriptor::new(h.clone(), vec![6], vec![1], 0),
            elems(0..6),
        ),
        c.write_tensor(tensor(&h, &[2, 3], &[2, 1]), elems(0..6)),
        c.write_tensor(tensor(&h, &[2, 3], &[3, 1]), elems(0..5)),
        c.write_tensor(tensor(&h, &[2, 3], &[4, 1]), elems(0..6)),
        c.write_tensor(tensor(&h, &[2, usize::MAX], &[usize::MAX, 1]), elems(0..6)),
    ];
    let messages: Vec<String> = refusals
        .into_iter()
        .map(|r| r.expect_err("refused").to_string())
        .collect();
    insta::assert_snapshot!(messages.join("\n"));
    // Another device's handle (its id varies with the tests run before, so it is not in the
    // snapshot).
    let other = ComputeClient::new(SimDevice::new(SimConfig::new(32)));
    let foreign = other.create(elems(0..6)).unwrap();
    assert!(matches!(
        c.write_tensor(tensor(&foreign, &[2, 3], &[3, 1]), elems(0..6)),
        Err(IoError::WrongDevice { .. })
    ));
    // The second tensor is refused: the first is not written either.
    let refused = c.write_tensors(vec![
        (tensor(&h, &[6], &[1]), elems(50..56)),
        (tensor(&h, &[7], &[1]), elems(50..57)),
    ]);
    assert!(
        matches!(refused, Err(IoError::OutOfRange { .. })),
        "{refused:?}"
    );
    c.sync()
        .expect("nothing was enqueued; the stream is healthy");
    assert_eq!(raw(&c, &h), (0..6).collect::<Vec<_>>());
}
