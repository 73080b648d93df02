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
    /// The builtins asked for so far, each on every lane.
    columns: Vec<(Builtin, Vec<u32>)>,
}

impl Builtins {
    pub fn new(groups: &[[u32; 3]], workgroup_size: [u32; 3], num_workgroups: [u32; 3]) -> Self {
        Self {
            groups: groups.to_vec(),
            workgroup_size,
            num_workgroups,
            columns: Vec::new(),
        }
    }

    /// The lanes of the batch.
    pub fn lane_count(&self) -> usize {
        let [x, y, z] = self.workgroup_size;
        self.groups.len() * (x * y * z) as usize
    }

    /// `b` on every lane.
    pub fn column(&mut self, b: Builtin) -> &[u32] {
        let at = match self.columns.iter().position(|(known, _)| *known == b) {
            Some(at) => at,
            None => {
                let column = self.compute(b);
                self.columns.push((b, column));
                self.columns.len() - 1
            }
        };
        &self.columns[at].1
    }

    fn compute(&self, b: Builtin) -> Vec<u32> {
        let size = self.workgroup_size;
        match b {
            Builtin::GlobalId(a) => {
                let i = a.index();
                self.per_lane(|group, local| group[i].wrapping_mul(size[i]).wrapping_add(local[i]))
            }
            Builtin::LocalId(a) => self.per_lane(|_, local| local[a.index()]),
            Builtin::WorkgroupId(a) => self.per_lane(|group, _| group[a.index()]),
            Builtin::NumWorkgroups(a) => vec![self.num_workgroups[a.index()]; self.lane_count()],
        }
    }

    /// `f(workgroup id, local id)` on every lane.
    fn per_lane(&self, f: impl Fn([u32; 3], [u32; 3]) -> u32) -> Vec<u32> {
        let locals = ids(self.workgroup_size);
        let mut column = vec![0; self.lane_count()];
        for (lanes, &group) in column.chunks_exact_mut(locals.len()).zip(&self.groups) {
            for (lane, &local) in lanes.iter_mut().zip(&locals) {
                *lane = f(group, local);
            }
        }
        column
    }
}
