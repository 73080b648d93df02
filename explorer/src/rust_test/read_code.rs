//! The workload's reads as the client calls the driver makes for them (`driver`'s `read`,
//! `read_pair`, `read_tensors`, `read_lazy`, `materialize` and `last_read`), each asserting
//! the model's values or the fault the stream owes.

use lockstep::StreamId;

use super::{
    Group, HOST_STREAM, Lazy, Printer, Slot, Unprintable, error_code, refusal_code, vec_of,
};
use crate::coverage::Method;
use crate::driver::{READ, refusal};
use crate::view::{View, ViewRefusal};

impl Printer<'_> {
    /// `read_one` of the buffer in `slot`, if any.
    pub(super) fn read_one(
        &mut self,
        c: &str,
        s: StreamId,
        slot: usize,
    ) -> Result<(), Unprintable> {
        let Some(Slot { var, buf }) = &self.slots[slot] else {
            return Ok(());
        };
        let (call, buf) = (format!("{c}.read_one({var}.clone())"), *buf);
        self.read((s, Method::ReadOne), &call, false, &[buf], None)
    }

    /// `read_async` of the buffers in slots `a` and `b`, if both hold one.
    pub(super) fn read_pair(
        &mut self,
        c: &str,
        s: StreamId,
        a: usize,
        b: usize,
    ) -> Result<(), Unprintable> {
        let (Some(a), Some(b)) = (&self.slots[a], &self.slots[b]) else {
            return Ok(());
        };
        let call = format!(
            "block_on({c}.read_async(vec![{}.clone(), {}.clone()]))",
            a.var, b.var
        );
        let bufs = [a.buf, b.buf];
        self.code.uses("lockstep", &["block_on"]);
        self.read((s, Method::ReadAsync), &call, true, &bufs, None)
    }

    /// `read_tensor_async` of every tensor of the group in tensor slot `slot`, if any, and of
    /// `view` of the dense one it names: refused at the call where the view is.
    pub(super) fn read_tensors(
        &mut self,
        c: &str,
        s: StreamId,
        slot: usize,
        view: Option<&View>,
    ) -> Result<(), Unprintable> {
        let Some(group) = &self.tensors[slot] else {
            return Ok(());
        };
        let mut descriptors = descriptors(group);
        let mut bufs = group.bufs.clone();
        let viewed = view.and_then(|v| Some((v, self.view(slot, v.index)?)));
        if let Some((view, (memory, _))) = &viewed {
            descriptors.push(format!(
                "CopyDescriptor::new({memory}.clone(), vec!{:?}, vec!{:?}, 4)",
                view.shape, view.strides
            ));
        }
        let call = format!(
            "block_on({c}.read_tensor_async(vec![{}]))",
            descriptors.join(", ")
        );
        self.code.uses("lockstep", &["CopyDescriptor", "block_on"]);
        if let Some((view, (_, buf))) = &viewed {
            if let Some(refusal) = view.refusal(self.model.len(*buf) as u64 * 4) {
                let variant = match refusal {
                    ViewRefusal::Layout => "InvalidLayout",
                    ViewRefusal::Range => "OutOfRange",
                };
                self.code.uses("lockstep", &["IoError", "ServerError"]);
                self.code.line(format!(
                    "assert!(matches!({call}, Err(ServerError::Io(IoError::{variant} {{ .. }}))));"
                ));
                return Ok(());
            }
            bufs.push(*buf);
        }
        let read = (s, Method::ReadTensorAsync);
        self.read(read, &call, true, &bufs, viewed.map(|(v, _)| v))
    }

    /// `read_lazy` of the buffer in `slot`, if any: materialised by a later step.
    pub(super) fn read_lazy(&mut self, c: &str, s: StreamId, slot: usize) {
        let Some((handle, buf)) = self.in_slot(slot) else {
            return;
        };
        let len = self.model.len(buf);
        let var = self.var("lazy");
        self.code.uses("lockstep", &["CopyDescriptor"]);
        self.code.line(format!(
            "let {var} = {c}.read_lazy(CopyDescriptor::new({handle}.clone(), vec![{len}], vec![1], 4));"
        ));
        self.lazies.push_back(Lazy {
            var,
            buf,
            stream: s,
        });
    }

    /// Materialises the oldest lazy read, if any: refused while its stream captures.
    pub(super) fn materialize(&mut self) -> Result<(), Unprintable> {
        let Some(lazy) = self.lazies.pop_front() else {
            return Ok(());
        };
        self.code.uses("lockstep", &["Bytes"]);
        let mut call = format!(
            "{}.materialize().map(|b| Bytes::from(b.to_vec()))",
            lazy.var
        );
        // As the driver does where clients run on actor threads: from another thread.
        if self.world.actor {
            call = format!("std::thread::scope(|s| s.spawn(|| {call}).join().unwrap())");
        }
        if self.captures.records(lazy.stream) {
            let expected = refusal_code(&mut self.code, &refusal(READ, lazy.stream));
            self.code
                .line(format!("assert_eq!({call}.err(), {expected});"));
        } else {
            let read = (lazy.stream, Method::Materialize);
            self.read(read, &call, false, &[lazy.buf], None)?;
        }
        self.code.line(format!("drop({});", lazy.var));
        Ok(())
    }

    /// A read on `s` by `method` (the code `call`), of `bufs`: the stream's owed fault, or
    /// every buffer's values (`many`: the call returns a `Vec` of them), the last one's
    /// gathered by `view` if there is one.
    fn read(
        &mut self,
        (s, method): (StreamId, Method),
        call: &str,
        many: bool,
        bufs: &[u64],
        view: Option<&View>,
    ) -> Result<(), Unprintable> {
        if let Some(fault) = self.model.expected_fault(s).cloned() {
            let expected = error_code(&mut self.code, &fault)?;
            self.code
                .line(format!("assert_eq!({call}.err(), Some({expected}));"));
            return self.blocking(s, method, true);
        }
        self.blocking(s, method, true)?;
        if !many {
            let expected = vec_of(self.model.values(bufs[0]));
            self.code.line(format!(
                "assert_eq!({call}.unwrap().to_elems::<u32>(), {expected});"
            ));
            return Ok(());
        }
        let read = self.var("read");
        self.code.line(format!("let {read} = {call}.unwrap();"));
        for (i, &buf) in bufs.iter().enumerate() {
            let values = self.model.values(buf);
            let expected = match view {
                Some(view) if i + 1 == bufs.len() => vec_of(&view.gather(values)),
                _ => vec_of(values),
            };
            self.code.line(format!(
                "assert_eq!({read}[{i}].to_elems::<u32>(), {expected});"
            ));
        }
        Ok(())
    }

    /// The driver's read-back of everything live after its drain (`driver`'s `last_read`):
    /// one `read_async` of every slot's handle, then one `read_tensor_async` of every group's
    /// tensors, each skipped when there is nothing to read.
    pub(super) fn read_back_everything(&mut self) -> Result<(), Unprintable> {
        let s = StreamId(HOST_STREAM);
        let slots: Vec<&Slot> = self.slots.iter().flatten().collect();
        if !slots.is_empty() {
            self.code.uses("lockstep", &["block_on"]);
            let handles: Vec<String> = slots.iter().map(|s| format!("{}.clone()", s.var)).collect();
            let call = format!("block_on(client.read_async(vec![{}]))", handles.join(", "));
            let bufs: Vec<u64> = slots.iter().map(|s| s.buf).collect();
            self.read((s, Method::ReadAsync), &call, true, &bufs, None)?;
        }
        let groups: Vec<&Group> = self.tensors.iter().flatten().collect();
        if groups.is_empty() {
            return Ok(());
        }
        let descriptors: Vec<String> = groups.iter().flat_map(|g| descriptors(g)).collect();
        let bufs: Vec<u64> = groups.iter().flat_map(|g| g.bufs.iter().copied()).collect();
        self.code.uses("lockstep", &["CopyDescriptor", "block_on"]);
        let call = format!(
            "block_on(client.read_tensor_async(vec![{}]))",
            descriptors.join(", ")
        );
        self.read((s, Method::ReadTensorAsync), &call, true, &bufs, None)
    }
}

/// A `CopyDescriptor` expression per tensor of `group`, reading it whole.
fn descriptors(group: &Group) -> Vec<String> {
    group
        .shapes
        .iter()
        .enumerate()
        .map(|(i, shape)| {
            format!(
                "CopyDescriptor::new({v}[{i}].memory.clone(), vec!{shape:?}, {v}[{i}].strides.clone(), 4)",
                v = group.var
            )
        })
        .collect()
}
