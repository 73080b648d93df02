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

    /// `b` on every lane, into `column`.
    fn compute(&self, b: Builtin, column: &mut Vec<u32>) {
        column.clear();
        match b {
            Builtin::GlobalId(a) => {
                let (i, size) = (a.index(), self.workgroup_size[a.index()]);
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
