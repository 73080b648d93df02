//! A batch's accesses to arrays: each checked against the array's length (a violation is
//! recorded, and in unchecked mode traps the lane), shown to the race check when it watches the
//! array, and a read of a word nothing wrote reported.

use lockstep::kernel::Array;

use super::super::BindingData;
use super::super::races::{Access, AccessKind, Race};
use super::super::{UnwrittenRead, Violation};
use super::{Batch, column};

impl Batch<'_, '_> {
    /// `array[at[l]]` into `at[l]` on every lane of `lanes`, in lane order; out of range
    /// yields zero, whose bits are zero in every type.
    pub(super) fn gather(&mut self, array: Array, at: &mut [u32], lanes: &[u32]) {
        let len = self.len(array);
        if self.per_lane(array) {
            column::each!(lanes, |l| {
                at[l] = self.load_word(l as u32, array, at[l], len)
            });
            return;
        }
        // Unwatched, an in-range read of a written word has no effect beyond its value: such
        // reads go first, then the others (each with an effect of its own) in lane order.
        let data = self.data(array);
        let (words, initialized) = (&data.words[..], &data.initialized[..]);
        // Consecutive written words in range, as a 1-D grid reads its own element: one copy.
        if let Some(range) = column::consecutive(at, lanes)
            && range.end <= words.len()
            && all_true(&initialized[range.clone()])
        {
            at[..range.len()].copy_from_slice(&words[range]);
            return;
        }
        let mut unusual = Vec::new();
        column::each!(lanes, |l| {
            let i = at[l] as usize;
            match initialized.get(i) {
                Some(true) => at[l] = words[i],
                _ => unusual.push(l),
            }
        });
        for l in unusual {
            at[l] = self.load_word(l as u32, array, at[l], len);
        }
    }

    /// `value[l]` into `array[at[l]]` on every lane of `lanes`, in lane order.
    pub(super) fn scatter(&mut self, array: Array, at: &[u32], value: &[u32], lanes: &[u32]) {
        let len = self.len(array);
        if self.per_lane(array) {
            column::each!(lanes, |l| {
                let (lane, i) = (l as u32, at[l]);
                if self.in_bounds(lane, array, i, len) {
                    self.watch(lane, array, i, AccessKind::Write);
                    self.store_word(lane, array, i, value[l]);
                }
            });
            return;
        }
        // Unwatched, a store in range has no effect but on its word: those go first, then
        // the lanes out of range (an effect each) in lane order.
        let mut stores = self.data_mut(array).stores();
        // Consecutive words in range, as a 1-D grid writes its own element: one copy.
        if let Some(range) = column::consecutive(at, lanes)
            && range.end <= len as usize
        {
            stores.store_range(range, value);
            return;
        }
        let mut outside = Vec::new();
        column::each!(lanes, |l| {
            if at[l] < len {
                stores.store(at[l], value[l]);
            } else {
                outside.push(l);
            }
        });
        for l in outside {
            self.out_of_bounds(l as u32, array, at[l]);
        }
    }

    /// The word at `array[index]` read by `lane` (zero when out of range).
    fn load_word(&mut self, lane: u32, array: Array, index: u32, len: u32) -> u32 {
        if !self.in_bounds(lane, array, index, len) {
            return 0;
        }
        self.watch(lane, array, index, AccessKind::Read);
        self.peek_word(lane, array, index)
    }

    fn data(&self, array: Array) -> &BindingData {
        match array {
            Array::Binding(b) => &self.bindings[b.0 as usize],
            Array::Shared(s) => &self.shared[s.0 as usize],
            Array::Local(l) => &self.local_arrays[l.0 as usize],
        }
    }

    fn data_mut(&mut self, array: Array) -> &mut BindingData {
        match array {
            Array::Binding(b) => &mut self.bindings[b.0 as usize],
            Array::Shared(s) => &mut self.shared[s.0 as usize],
            Array::Local(l) => &mut self.local_arrays[l.0 as usize],
        }
    }

    /// Whether `index` is inside `array` for `lane`. A violation is kept if it is the
    /// launch's first (lowest invocation; a lane's own violations come in program order, so
    /// its first is kept); in unchecked mode the lane also stops (it trapped).
    ///
    /// `len` is the array's length, which callers read once per statement.
    #[inline]
    pub(super) fn in_bounds(&mut self, lane: u32, array: Array, index: u32, len: u32) -> bool {
        index < len || self.out_of_bounds(lane, array, index)
    }

    /// Records an access outside its array; returns false.
    #[cold]
    fn out_of_bounds(&mut self, lane: u32, array: Array, index: u32) -> bool {
        let invocation = self.first_invocation + lane as u64;
        if self.violation.is_none_or(|v| invocation < v.invocation) {
            *self.violation = Some(Violation {
                invocation,
                array,
                index,
            });
        }
        if !self.launch.guards.checked {
            self.trapped[lane as usize] = true;
            self.any_trapped = true;
        }
        false
    }

    /// Where `lane`'s `array[index]` (in range) lies in the batch's words of `array`: a
    /// shared array has a copy per workgroup of the batch (see [`Batch::shared`]), a local
    /// array one per lane.
    #[inline]
    fn word_of(&self, lane: u32, array: Array, index: u32) -> usize {
        match array {
            Array::Binding(_) => index as usize,
            Array::Shared(s) => {
                let len = self.launch.def.shared[s.0 as usize].len as usize;
                (lane / self.group_lanes) as usize * len + index as usize
            }
            Array::Local(l) => {
                let len = self.launch.def.local_arrays[l.0 as usize].len as usize;
                lane as usize * len + index as usize
            }
        }
    }

    /// The workgroup (launch order) of `invocation`.
    fn workgroup_of(&self, invocation: u64) -> u64 {
        invocation / self.group_lanes as u64
    }

    /// The word at `index`, read by `lane`; a word nothing wrote is reported (a binding
    /// once per launch, a shared array once per launch with where it was read).
    #[inline]
    pub(super) fn peek_word(&mut self, lane: u32, array: Array, index: u32) -> u32 {
        let at = self.word_of(lane, array, index);
        let data = self.data(array);
        let word = data.words[at];
        if !data.initialized[at] {
            self.unwritten(lane, array, index);
        }
        word
    }

    /// Reports a read of an unwritten word. Of a shared array's, the one kept is the lowest
    /// workgroup's first: the one a launch running its workgroups one after another reports.
    #[cold]
    fn unwritten(&mut self, lane: u32, array: Array, index: u32) {
        let read = UnwrittenRead {
            array,
            index,
            invocation: self.first_invocation + lane as u64,
            statement: self.statement,
        };
        let group_lanes = self.group_lanes as u64;
        let later = |r: &UnwrittenRead| r.invocation / group_lanes > read.invocation / group_lanes;
        let outcome = &mut *self.outcome;
        match array {
            Array::Binding(b) if !outcome.uninitialized_loads.contains(&b) => {
                outcome.uninitialized_loads.push(b);
            }
            // Every word of a local array holds data: it starts at zero.
            Array::Binding(_) | Array::Local(_) => {}
            Array::Shared(_) => match outcome
                .unwritten_shared
                .iter_mut()
                .find(|r| r.array == array)
            {
                None => outcome.unwritten_shared.push(read),
                Some(kept) if later(kept) => *kept = read,
                Some(_) => {}
            },
        }
    }

    /// Elements in `array` (a shared array's, per workgroup).
    pub(super) fn len(&self, array: Array) -> u32 {
        match array {
            Array::Binding(b) => self.bindings[b.0 as usize].words.len() as u32,
            Array::Shared(s) => self.launch.def.shared[s.0 as usize].len,
            Array::Local(l) => self.launch.def.local_arrays[l.0 as usize].len,
        }
    }

    /// Whether the race check watches `array` (checked once per statement, not per lane).
    pub(super) fn watched(&self, array: Array) -> bool {
        self.data(array).log.is_some()
    }

    /// Whether each lane's access to `array` takes its own path: the race check watches the
    /// array, or the array has a copy per lane (a local array).
    fn per_lane(&self, array: Array) -> bool {
        matches!(array, Array::Local(_)) || self.watched(array)
    }

    /// Shows `lane`'s access to `array[index]` to the race check, if it watches the array.
    /// The race kept for each array is the first found by the lowest workgroup whose access
    /// completed one: the one a launch running its workgroups one after another keeps.
    pub(super) fn watch(&mut self, lane: u32, array: Array, index: u32, kind: AccessKind) {
        let access = Access {
            invocation: self.first_invocation + lane as u64,
            epoch: self.epoch,
            statement: self.statement,
            kind,
        };
        let at = self.word_of(lane, array, index) as u32;
        let Some(log) = &mut self.data_mut(array).log else {
            return;
        };
        let Some(first) = log.record(at, access) else {
            return;
        };
        let race = Race {
            array,
            index,
            first,
            second: access,
        };
        let group = self.workgroup_of(access.invocation);
        match self.outcome.races.iter().position(|r| r.array == array) {
            None => self.outcome.races.push(race),
            Some(k) if self.workgroup_of(self.outcome.races[k].second.invocation) > group => {
                self.outcome.races[k] = race;
            }
            Some(_) => {}
        }
    }

    #[inline]
    pub(super) fn store_word(&mut self, lane: u32, array: Array, index: u32, bits: u32) {
        let at = self.word_of(lane, array, index) as u32;
        self.data_mut(array).stores().store(at, bits);
    }
}

/// Whether every flag is set (a search for a zero byte, which the library vectorises).
fn all_true(flags: &[bool]) -> bool {
    !bytemuck::cast_slice::<bool, u8>(flags).contains(&0)
}
