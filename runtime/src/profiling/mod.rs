//! Profiling: [`ComputeClient::profile`] times a closure's device work, and profiling levels
//! ([`ProfileLevel`], `LOCKSTEP_PROFILE`) time every launch into a [`ProfileSummary`] that is
//! logged at `sync`.
//!
//! **API Boundary:** a device that can time its streams (`Features::timestamps`) is timed
//! with timestamps recorded on the profiled stream ([`TimingMethod::Device`]: events on CUDA,
//! timestamp queries on wgpu, virtual time on the simulator); any other device is timed on the
//! host around a synchronisation of the stream ([`TimingMethod::System`]). Profiling a stream
//! that captures a graph is refused at once.

mod summary;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use thiserror::Error;

use crate::block_on::block_on;
use crate::error::ServerError;

pub use summary::{KernelProfile, ProfileSummary};

/// The environment variable read when a client starts: `basic`, `medium`, `full` or
/// `execution-only` turn the matching [`ProfileLevel`] on; unset, empty or `off` leave it off.
pub const PROFILE_ENV: &str = "LOCKSTEP_PROFILE";

/// How a [`ProfileDuration`] was measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimingMethod {
    /// Timestamps recorded on the device, around the profiled stream's work.
    Device,
    /// The host clock, around a synchronisation of the stream before and after.
    System,
}

impl std::fmt::Display for TimingMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TimingMethod::Device => "device timing",
            TimingMethod::System => "system timing",
        })
    }
}

/// What every launch registers into the profile summary while a level is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProfileLevel {
    /// Timed, grouped by kernel name.
    Basic,
    /// Timed, grouped by kernel name and workgroup count.
    Medium,
    /// Timed, grouped by kernel name, content hash and workgroup count.
    Full,
    /// Counted by kernel name, not timed: launches run as they would unprofiled.
    ExecutionOnly,
}

impl ProfileLevel {
    /// Parses a value of [`PROFILE_ENV`]; `Ok(None)` means profiling off.
    pub fn parse(value: &str) -> Result<Option<Self>, ProfileError> {
        match value.trim().to_ascii_lowercase().as_str() {
            "" | "off" | "none" => Ok(None),
            "basic" => Ok(Some(Self::Basic)),
            "medium" => Ok(Some(Self::Medium)),
            "full" => Ok(Some(Self::Full)),
            "execution-only" | "execution_only" => Ok(Some(Self::ExecutionOnly)),
            _ => Err(ProfileError::UnknownLevel {
                value: value.to_owned(),
            }),
        }
    }

    /// The level [`PROFILE_ENV`] asks for. An unknown value is logged and leaves profiling off:
    /// a typo in an environment variable must not stop a program.
    pub fn from_env() -> Option<Self> {
        let value = std::env::var(PROFILE_ENV).ok()?;
        Self::parse(&value).unwrap_or_else(|err| {
            tracing::warn!(error = %err, "profiling stays off");
            None
        })
    }
}

/// Why profiling failed.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ProfileError {
    /// The stream refused (it captures a graph, the device is lost) or the device failed to
    /// time it.
    #[error("profiling `{name}` failed: {source}")]
    Server {
        /// The name given to `profile`.
        name: String,
        /// Why the stream refused or the device failed.
        #[source]
        source: ServerError,
    },
    /// The text of a level ([`PROFILE_ENV`], or [`ProfileLevel::parse`]'s input) names none.
    #[error("unknown profiling level `{value}`: use basic, medium, full, execution-only or off")]
    UnknownLevel {
        /// The text given.
        value: String,
    },
}

pub(crate) type DurationFuture =
    Pin<Box<dyn Future<Output = Result<Duration, ProfileError>> + Send>>;

/// The duration of profiled work, resolved once the work has completed.
pub struct ProfileDuration {
    method: TimingMethod,
    resolve: DurationFuture,
}

impl std::fmt::Debug for ProfileDuration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProfileDuration")
            .field("method", &self.method)
            .finish_non_exhaustive()
    }
}

impl ProfileDuration {
    /// A duration measured by `method`, known once `resolve` completes.
    pub(crate) fn new(method: TimingMethod, resolve: DurationFuture) -> Self {
        Self { method, resolve }
    }

    /// How the duration is measured: device timestamps or the host clock around stream syncs.
    pub fn timing_method(&self) -> TimingMethod {
        self.method
    }

    /// Waits for the profiled work (a synchronisation of its stream) and returns its duration.
    /// Nothing reaches the device before the future is first polled.
    ///
    /// # Errors
    /// [`ProfileError::Server`] if the device fails or is lost, or if the stream is capturing a
    /// graph when the future is polled (resolve before `start_capture` or after `stop_capture`).
    pub fn resolve(self) -> impl Future<Output = Result<Duration, ProfileError>> + Send {
        self.resolve
    }

    /// [`resolve`](Self::resolve), blocking.
    pub fn resolve_blocking(self) -> Result<Duration, ProfileError> {
        block_on(self.resolve)
    }
}
