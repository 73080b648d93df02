//! Memory accounting visible to users.

/// Device memory held by a client's device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryUsage {
    /// Bytes of allocations that some handle still references.
    pub bytes_in_use: u64,
    /// Bytes allocated from the device, including released memory whose last use has not
    /// completed yet.
    pub bytes_reserved: u64,
    /// Live allocations.
    pub allocations: u64,
}

impl std::fmt::Display for MemoryUsage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} bytes in use in {} allocations, {} bytes reserved",
            self.bytes_in_use, self.allocations, self.bytes_reserved
        )
    }
}
