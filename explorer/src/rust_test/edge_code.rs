//! The [`EdgeCall`]s as the client calls the driver makes for them (`driver/edge.rs`).

use lockstep::StreamId;

use super::{Printer, Slot, Unprintable, error_code};
use crate::coverage::Method;
use crate::driver::{misaligned_write, write_misaligned};
use crate::workload::{EdgeCall, ForeignCall};

impl Printer<'_> {
    /// Prints edge call `call` on client `c` of stream `s`.
    pub(super) fn edge(
        &mut self,
        c: &str,
        s: StreamId,
        call: &EdgeCall,
    ) -> Result<(), Unprintable> {
        match *call {
            EdgeCall::EmptyBuffer { uninit } => self.empty_buffer(c, s, uninit)?,
            EdgeCall::EmptyWrite { slot } => {
                if let Some(Slot { var, .. }) = &self.slots[slot] {
                    self.code.uses("lockstep", &["Bytes"]);
                    self.code.line(format!(
                        "{c}.write_at(&{var}, {var}.size(), Bytes::default()).unwrap();"
                    ));
                }
            }
            EdgeCall::Misaligned {
                slot,
                offset,
                len,
                fill,
            } => self.misaligned(c, s, slot, (offset, len), fill),
            EdgeCall::Foreign { peer, call, slot } => self.foreign(c, peer, call, slot),
        }
        Ok(())
    }

    /// A handle of no bytes, written with no bytes and read back as none.
    fn empty_buffer(&mut self, c: &str, s: StreamId, uninit: bool) -> Result<(), Unprintable> {
        self.code.uses("lockstep", &["Bytes"]);
        let var = self.var("none");
        let create = if uninit {
            format!("{c}.empty(0)")
        } else {
            format!("{c}.create(Bytes::default())")
        };
        self.code.line(format!("let {var} = {create}.unwrap();"));
        self.code.line(format!("assert_eq!({var}.size(), 0);"));
        self.code.line(format!(
            "{c}.write_at(&{var}, 0, Bytes::default()).unwrap();"
        ));
        let read = format!("{c}.read_one({var})");
        match self.model.expected_fault(s).cloned() {
            Some(fault) => {
                let expected = error_code(&mut self.code, &fault)?;
                self.code
                    .line(format!("assert_eq!({read}.err(), Some({expected}));"));
            }
            None => self
                .code
                .line(format!("assert!({read}.unwrap().is_empty());")),
        }
        self.blocking(s, Method::ReadOne, true)
    }

    /// `write_at` of the bytes of [`misaligned_write`] into the slot.
    fn misaligned(
        &mut self,
        c: &str,
        s: StreamId,
        slot: usize,
        (offset, len): (usize, usize),
        fill: u64,
    ) {
        let Some((var, buf)) = self.in_slot(slot) else {
            return;
        };
        let Some((offset, bytes)) = misaligned_write(self.model.len(buf) * 4, offset, len, fill)
        else {
            return;
        };
        self.code.uses("lockstep", &["Bytes"]);
        self.code.line(format!(
            "{c}.write_at(&{var}, {offset}, Bytes::from_bytes_vec(vec!{bytes:?})).unwrap();"
        ));
        // In a capture window the write is enqueued, and refused late by `stop_capture`.
        match self.captures.recording(s) {
            Some(open) => open.refused_write = true,
            None => write_misaligned(&mut self.model, s, buf, offset, &bytes),
        }
    }

    /// A fresh handle of peer `peer` given to `call` on this device: refused with
    /// `WrongDevice`.
    fn foreign(&mut self, c: &str, peer: usize, call: ForeignCall, slot: usize) {
        let src = self.slots[slot].as_ref().map(|slot| slot.var.clone());
        if src.is_none() && matches!(call, ForeignCall::Launch { .. }) {
            return;
        }
        self.code.uses("lockstep", &["Bytes", "IoError"]);
        let theirs = self.var("theirs");
        self.code.line(format!(
            "let {theirs} = peer{peer}.create(Bytes::from_elems::<u32>(&[0; 4])).unwrap();"
        ));
        let refused = match call {
            ForeignCall::Write => format!(
                "{c}.write_at(&{theirs}, 0, Bytes::from_elems::<u32>(&[1])), Err(IoError::WrongDevice {{ .. }})"
            ),
            ForeignCall::Read => {
                self.code.uses("lockstep", &["ServerError"]);
                format!(
                    "{c}.read_one({theirs}), Err(ServerError::Io(IoError::WrongDevice {{ .. }}))"
                )
            }
            ForeignCall::Launch { kernel } => {
                let src = src.expect("checked above");
                let kernel = self.kernel(kernel);
                self.code
                    .uses("lockstep", &["CubeCount", "KernelArguments"]);
                self.code.uses("lockstep::kernel", &["Scalar"]);
                format!(
                    "{c}.launch(&{kernel}, CubeCount::Static(1, 1, 1), KernelArguments::new().binding(&{theirs}).binding(&{src}).param(Scalar::U32(0))), Err(IoError::WrongDevice {{ .. }})"
                )
            }
        };
        self.code.line(format!("assert!(matches!({refused}));"));
    }
}
