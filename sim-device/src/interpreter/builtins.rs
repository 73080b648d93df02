//! The builtins of a batch's lanes (ids of the invocation and its workgroup), each computed for
//! every lane once per batch, the first time an expression asks for it.

use lockstep::kernel::Builtin;

/// Every id in a box of `size`, x fastest, then y, then z: the order of a launch's workgroups
/// and of a workgroup's invocations.
pub(super) fn ids(size: [u32; 3]) -> Vec<[u32; 3]> {
    let [x, y, z] = size;
    let mut ids = Vec::with_capacity(x as usize * y as usize * z as usize);
    for z in 0..z {
        for y in 0..y {
            ids.extend((0..x).map(|x| [x, y, z]));
        }
    }
    ids
}

/// Fills `ids` with the ids of the box of `size` numbered `first..first + len` in [`ids`]'s
/// order (x fastest), `len` as many as there are, at most `max`.
pub(super) fn batch_ids(ids: &mut Vec<[u32; 3]>, size: [u32; 3], first: u64, max: usize) {
    let [x, y, z] = size.map(u64::from);
    let end = (x * y * z).min(first.saturating_add(max as u64));
    ids.clear();
    ids.extend((first..end).map(|i| [i % x, (i / x) % y, i / (x * y)].map(|d| d as u32)));
}

/// A batch's lanes are its workgroups in order, each one lane per local id, x fastest.
pub(super) struct Builtins {
    groups: Vec<[u32; 3]>,
    workgroup_size: [u32; 3],
    num_workgroups: [u32; 3],
    /// Per axis, that axis of the local id of each lane of one workgroup.
    local_ids: [Vec<u32>; 3],
    /// The builtins asked for so far in this batch, each on every lane.
    columns: Vec<(Builtin, Vec<u32>)>,
    /// Buffers of earlier batches' columns, for reuse.
    spare: Vec<Vec<u32>>,
}

impl Builtins {
    /// The builtins of a launch's batches, with no workgroup yet ([`start`](Self::start)).
    pub fn new(workgroup_size: [u32; 3], num_workgroups: [u32; 3]) -> Self {
        Self {
            groups: Vec::new(),
            workgroup_size,
            num_workgroups,
            local_ids: [0, 1, 2].map(|a| ids(workgroup_size).iter().map(|id| id[a]).collect()),
            columns: Vec::new(),
            spare: Vec::new(),
        }
    }

    /// The builtins of the batch of `groups`, none computed yet.
    pub fn start(&mut self, groups: &[[u32; 3]]) {
        self.groups.clear();
        self.groups.extend_from_slice(groups);
        self.spare
            .extend(self.columns.drain(..).map(|(_, column)| column));
    }

    /// The lanes of the batch.
    pub fn lane_count(&self) -> usize {
        self.groups.len() * self.local_ids[0].len()
    }

    /// `b` on every lane.
    pub fn column(&mut self, b: Builtin) -> &[u32] {
        let at = match self.columns.iter().position(|(known, _)| *known == b) {
            Some(at) => at,
            None => {
                let mut column = self.spare.pop().unwrap_or_default();
                self.compute(b, &mut column);
                self.columns.push((b, column));
                self.columns.len() - 1
            }
        };
        &self.columns[at].1
    }

    /// The batch's lanes, when their global ids along axis `i` run on from the first lane's
    /// one by one (as in a 1-D grid): the workgroups are one-dimensional along `i` and follow
    /// each other along it. Lane `k` then has global id `first + k` (wrapping, as each id
    /// does), which is computed a batch at a time instead of a workgroup at a time.
    fn run_along(&self, i: usize) -> Option<u32> {
        let one_dimensional = (0..3).all(|d| d == i || self.workgroup_size[d] == 1);
        let first = self.groups.first()?[i];
        let consecutive =
            (self.groups.iter().zip(0u32..)).all(|(group, k)| group[i] == first.wrapping_add(k));
        (one_dimensional && consecutive).then(|| self.lane_count() as u32)
    }

    /// `b` on every lane, into `column`.
    fn compute(&self, b: Builtin, column: &mut Vec<u32>) {
        column.clear();
        match b {
            Builtin::GlobalId(a) => {
                let (i, size) = (a.index(), self.workgroup_size[a.index()]);
                if let Some(lanes) = self.run_along(i) {
                    let first = self.groups[0][i].wrapping_mul(size);
                    column.extend((0..lanes).map(|k| first.wrapping_add(k)));
                    return;
                }
                for group in &self.groups {
                    let first = group[i].wrapping_mul(size);
                    let locals = self.local_ids[i].iter();
                    column.extend(locals.map(|&local| first.wrapping_add(local)));
                }
            }
            Builtin::LocalId(a) => {
                for _ in &self.groups {
                    column.extend_from_slice(&self.local_ids[a.index()]);
                }
            }
            Builtin::WorkgroupId(a) => {
                for group in &self.groups {
                    let lanes = self.local_ids[0].len();
                    column.extend(std::iter::repeat_n(group[a.index()], lanes));
                }
            }
            Builtin::NumWorkgroups(a) => {
                column.resize(self.lane_count(), self.num_workgroups[a.index()]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use lockstep::kernel::Axis;

    use super::*;

    #[test]
    fn batches_of_ids_are_the_boxs_ids_in_order() {
        let mut batch = Vec::new();
        for (size, per_batch) in [
            ([5, 3, 2], 4),
            ([1, 1, 1], 8),
            ([7, 1, 3], 7),
            ([2, 9, 1], 100),
        ] {
            let mut made = Vec::new();
            let mut next = 0;
            loop {
                batch_ids(&mut batch, size, next, per_batch);
                if batch.is_empty() {
                    break;
                }
                assert!(batch.len() <= per_batch);
                next += batch.len() as u64;
                made.extend_from_slice(&batch);
            }
            assert_eq!(made, ids(size), "{size:?} by {per_batch}");
        }
        // The largest launch a device allows is made a batch at a time, never whole.
        batch_ids(&mut batch, [65_535; 3], 65_535 * 65_535 * 65_534, 3);
        assert_eq!(batch, vec![[0, 0, 65_534], [1, 0, 65_534], [2, 0, 65_534]]);
    }

    #[test]
    fn global_ids_are_each_workgroups_offset_plus_its_local_ids() {
        let cases: [([u32; 3], [u32; 3], std::ops::Range<usize>); 6] = [
            ([8, 1, 1], [300, 1, 1], 0..128),
            ([8, 1, 1], [300, 1, 1], 256..300),
            ([4, 2, 1], [6, 1, 1], 0..6),
            ([8, 1, 1], [3, 4, 1], 0..12),
            ([1, 8, 1], [1, 5, 2], 2..9),
            ([2, 2, 2], [2, 2, 2], 0..8),
        ];
        for (size, count, batch) in cases {
            let groups = &ids(count)[batch.clone()];
            let mut builtins = Builtins::new(size, count);
            builtins.start(groups);
            for axis in [Axis::X, Axis::Y, Axis::Z] {
                let a = axis.index();
                let expected: Vec<u32> = (groups.iter())
                    .flat_map(|g| ids(size).into_iter().map(move |l| g[a] * size[a] + l[a]))
                    .collect();
                let column = builtins.column(Builtin::GlobalId(axis));
                assert_eq!(column, expected, "{size:?} {count:?} {batch:?} {axis:?}");
            }
        }
    }
}
