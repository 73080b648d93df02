//! The driver's [`EdgeCall`]s: calls at the edges of the API, each judged exactly.

use lockstep::kernel::Scalar;
use lockstep::{
    Bytes, ComputeClient, CubeCount, Device, IoError, KernelArguments, ServerError, StreamId,
};

use super::{Run, State, create_on_peer, judge_read};
use crate::coverage::{Arg, Method, Number};
use crate::failure::{Check, Difference, ErrorKind, Side, Violation};
use crate::model::Model;
use crate::workload::{EdgeCall, ForeignCall, data};

impl<D: Device> Run<'_, D> {
    pub(super) fn edge(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
        s: StreamId,
        call: &EdgeCall,
    ) -> Result<(), Violation> {
        match *call {
            EdgeCall::EmptyBuffer { uninit } => self.empty_buffer(state, client, s, uninit),
            EdgeCall::EmptyWrite { slot } => {
                let Some((handle, _)) = state.in_slot(slot) else {
                    return Ok(());
                };
                state.hit(Method::WriteAt, s, Arg::Empty, &[]);
                client
                    .write_at(&handle, handle.size(), Bytes::default())
                    .map_err(|e| {
                        let what = "write_at of no bytes at the end";
                        Violation::refused(Method::WriteAt, Side::Explored, what, e)
                    })
            }
            EdgeCall::Misaligned {
                slot,
                offset,
                len,
                fill,
            } => self.misaligned(state, client, s, slot, (offset, len), fill),
            EdgeCall::Foreign { peer, call, slot } => {
                self.foreign(state, client, s, peer, call, slot)
            }
        }
    }

    /// A handle of no bytes: allocated (or refused as any allocation may be), written with no
    /// bytes and read back as no bytes.
    fn empty_buffer(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
        s: StreamId,
        uninit: bool,
    ) -> Result<(), Violation> {
        let method = if uninit {
            Method::Empty
        } else {
            Method::Create
        };
        let created = state.allocation(client, (method, s, Arg::Empty), || match uninit {
            true => client.empty(0),
            false => client.create(Bytes::default()),
        });
        let handle = match created {
            Ok(_) if state.model.lost => {
                return Err(Violation::new(
                    Check::SucceededAfterLoss(method),
                    "an allocation succeeded after the device was lost",
                ));
            }
            Ok(handle) if handle.size() == 0 => handle,
            Ok(handle) => {
                let detail = format!("a handle of no bytes has {} bytes", handle.size());
                return Err(Violation::new(Check::WrongHandleSize, detail));
            }
            Err(err) => return self.refused(state, (method, err), false),
        };
        state.hit(Method::WriteAt, s, Arg::Empty, &[]);
        client.write_at(&handle, 0, Bytes::default()).map_err(|e| {
            Violation::refused(Method::WriteAt, Side::Explored, "write of no bytes", e)
        })?;
        state.hit(Method::ReadOne, s, Arg::Empty, &[]);
        match client.read_one(handle) {
            Ok(bytes) if !bytes.is_empty() => {
                let read = Check::WrongRead {
                    on: Side::Explored,
                    differs: Difference::Length,
                };
                let detail = format!("a handle of no bytes read back {} bytes", bytes.len());
                Err(Violation::new(read, detail))
            }
            result => judge_read(
                &mut state.model,
                (s, Method::ReadOne),
                result.map(|_| Vec::new()),
            ),
        }
    }

    /// `write_at` of the bytes of [`misaligned_write`] into the slot, applied to the model by
    /// [`write_misaligned`] (unless the stream captures: then `stop_capture` must refuse).
    fn misaligned(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
        s: StreamId,
        slot: usize,
        (offset, len): (usize, usize),
        fill: u64,
    ) -> Result<(), Violation> {
        let Some((handle, buf)) = state.in_slot(slot) else {
            return Ok(());
        };
        let Some((offset, bytes)) = misaligned_write(state.model.len(buf) * 4, offset, len, fill)
        else {
            return Ok(());
        };
        state.number(Number::MisalignedLen, bytes.len() as u64);
        state.hit(Method::WriteAt, s, Arg::Misaligned, &[buf]);
        client
            .write_at(&handle, offset as u64, Bytes::from_bytes_vec(bytes.clone()))
            .map_err(|e| {
                let what = format!("misaligned write_at of {} bytes at {offset}", bytes.len());
                Violation::refused(Method::WriteAt, Side::Explored, what, e)
            })?;
        // In a capture window the write is enqueued, and refused late by `stop_capture`.
        match state.captures.recording(s) {
            Some(open) => open.refused_write = true,
            None => write_misaligned(&mut state.model, s, buf, offset, &bytes),
        }
        Ok(())
    }

    /// A fresh handle of peer `peer` given to this device: refused at the call with
    /// `WrongDevice`, before anything is enqueued.
    fn foreign(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
        s: StreamId,
        peer: usize,
        call: ForeignCall,
        slot: usize,
    ) -> Result<(), Violation> {
        let src = state.slots[slot].as_ref().map(|(h, _)| h.clone());
        if src.is_none() && matches!(call, ForeignCall::Launch { .. }) {
            return Ok(());
        }
        let peer = &self.peers[peer];
        let theirs = peer
            .create(Bytes::from_elems(&[0u32; 4]))
            .map_err(|e| create_on_peer(peer, e))?;
        let method = match call {
            ForeignCall::Write => Method::WriteAt,
            ForeignCall::Read => Method::ReadOne,
            ForeignCall::Launch { .. } => Method::Launch,
        };
        state.hit(method, s, Arg::Foreign, &[]);
        let result: Result<(), ServerError> = match call {
            ForeignCall::Write => client
                .write_at(&theirs, 0, Bytes::from_elems(&[1u32]))
                .map_err(ServerError::from),
            ForeignCall::Read => client.read_one(theirs).map(drop),
            ForeignCall::Launch { kernel } => {
                let src = src.expect("checked above");
                let args = KernelArguments::new()
                    .binding(&theirs)
                    .binding(&src)
                    .param(Scalar::U32(0));
                client
                    .launch(&self.kernels[kernel], CubeCount::Static(1, 1, 1), args)
                    .map_err(ServerError::from)
            }
        };
        match result {
            Err(ServerError::Io(IoError::WrongDevice { .. })) => Ok(()),
            other => Err(Violation::new(
                Check::WrongRefusal {
                    call: method,
                    got: ErrorKind::of_result(&other),
                },
                format!(
                    "{call:?} with a handle of peer {}: expected WrongDevice, got {other:?}",
                    peer.peer_id()
                ),
            )),
        }
    }
}

/// The byte offset (not a multiple of 4; `offset` taken modulo the buffer) and the bytes (up to
/// `len`) of [`EdgeCall::Misaligned`] on a buffer of `size` bytes. `None` for a one-element
/// buffer, where any such write would rewrite the whole buffer.
pub(crate) fn misaligned_write(
    size: usize,
    offset: usize,
    len: usize,
    fill: u64,
) -> Option<(usize, Vec<u8>)> {
    if size < 8 {
        return None;
    }
    let offset = match 1 + offset % (size - 1) {
        aligned if aligned % 4 == 0 => aligned - 1,
        offset => offset,
    };
    let len = len.min(size - offset);
    let bytes = data(fill, len.div_ceil(4))
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .take(len)
        .collect();
    Some((offset, bytes))
}

/// Applies a write of `bytes` at byte `offset` of `buf` to the model: each element the bytes
/// touch is rewritten on its own, so that no rewrite counts as covering the whole buffer.
pub(crate) fn write_misaligned(
    model: &mut Model,
    s: StreamId,
    buf: u64,
    offset: usize,
    bytes: &[u8],
) {
    let first = offset / 4;
    let last = (offset + bytes.len() - 1) / 4;
    let mut touched: Vec<u8> = model.values(buf)[first..=last]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    touched[offset - first * 4..][..bytes.len()].copy_from_slice(bytes);
    for (i, elem) in touched.chunks_exact(4).enumerate() {
        let value = u32::from_le_bytes(elem.try_into().expect("four bytes"));
        model.write(s, buf, first + i, &[value]);
    }
}
