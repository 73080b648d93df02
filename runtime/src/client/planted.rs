//! The runtime self-tests' hook into the client: planting a defect in the server's books.

use super::ComputeClient;
use crate::device::Device;
use crate::invariant::PlantedDefect;

impl<D: Device> ComputeClient<D> {
    /// Self-test hook: plants `defect` in the server's books (never in the device) and returns
    /// whether the server held what it needs (a free range, a live buffer, a deferred free).
    /// The server then checks its invariants as after any task. Not for programs: a planted
    /// defect breaks the runtime's guarantees on purpose.
    #[doc(hidden)]
    pub fn plant_defect(&self, defect: PlantedDefect) -> bool {
        self.call(move |server, _| Ok(server.plant_defect(defect)))
            .unwrap_or(false)
    }
}
