//! The builtins of a batch's lanes (ids of the invocation and its workgroup), each computed for
//! every lane once per batch, the first time an expression asks for it.

use lockstep::kernel::Builtin;

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
        let [wx, wy, wz] = self.workgroup_size;
        let mut column = Vec::with_capacity(self.lane_count());
        for &group in &self.groups {
            for lz in 0..wz {
                for ly in 0..wy {
                    for lx in 0..wx {
                        column.push(f(group, [lx, ly, lz]));
                    }
                }
            }
        }
        column
    }
}
