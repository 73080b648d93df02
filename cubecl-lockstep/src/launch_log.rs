//! The launch log cubecl's suite runner reads: with `LOCKSTEP_CUBECL_LAUNCH_LOG` naming a
//! file, every kernel launch appends `launched\t<issuing thread>\t<stream>\t<kernel>` to it,
//! and every launch of a kernel that does not compile for Lockstep (a translator refusal, a
//! limit, a validation failure) `refused\t<stream>\t<kernel>`, `<stream>` being cubecl's
//! stream id, which ties a refusal to the launch (kernel names repeat across tests).
//!
//! A kernel sanitizer finding (`findings`) appends
//! `finding\t<stream>\t<kernel>\t<kind>\t<detail>`.
//!
//! libtest runs each test on a thread named after it, and cubecl tells launch observers on
//! the issuing thread, so the log says which tests launched a kernel: a passing test that
//! launched none returned before running anything, which is how a test skips when a feature
//! is not declared; a passing test whose kernel was refused did not run it either. Nothing is
//! logged, and nothing observed, without the variable.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use cubecl_environment::stream::StreamId;
use cubecl_runtime::logging::{LaunchObservation, LaunchObserver};

use crate::findings::Found;

/// The variable naming the launch log.
pub const LAUNCH_LOG_ENV: &str = "LOCKSTEP_CUBECL_LAUNCH_LOG";

struct LaunchLog {
    file: Mutex<File>,
}

impl LaunchLog {
    fn append(&self, line: &str) {
        if let Ok(mut file) = self.file.lock() {
            // A line is one append, so lines of concurrent tests never interleave.
            let _ = file.write_all(line.as_bytes());
        }
    }
}

impl LaunchObserver for LaunchLog {
    fn launched(&self, kernel: &'static str) {
        let thread = std::thread::current();
        let stream = StreamId::current().value;
        self.append(&format!(
            "launched\t{}\t{stream}\t{kernel}\n",
            thread.name().unwrap_or("?")
        ));
    }
}

/// The log and its observation, once installed (`None` without the variable).
static LOG: OnceLock<Option<(Arc<LaunchLog>, LaunchObservation)>> = OnceLock::new();

/// Starts logging launches if `LOCKSTEP_CUBECL_LAUNCH_LOG` is set (once per process).
///
/// # Panics
/// If the variable names a file that cannot be opened for appending.
pub fn install() {
    LOG.get_or_init(|| {
        let path = std::env::var_os(LAUNCH_LOG_ENV)?;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap_or_else(|error| {
                panic!("{LAUNCH_LOG_ENV}={path:?} cannot be opened for appending: {error}")
            });
        let log = Arc::new(LaunchLog {
            file: Mutex::new(file),
        });
        let observation = LaunchObservation::new(log.clone());
        Some((log, observation))
    });
}

/// Logs that `kernel`, launched on `stream`, does not compile for Lockstep, if the log is
/// installed.
pub fn refused(stream: StreamId, kernel: &str) {
    if let Some(Some((log, _))) = LOG.get() {
        log.append(&format!("refused\t{}\t{kernel}\n", stream.value));
    }
}

/// Logs a kernel sanitizer finding, if the log is installed.
pub fn finding(found: &Found) {
    if let Some(Some((log, _))) = LOG.get() {
        log.append(&format!(
            "finding\t{}\t{}\t{}\t{}\n",
            found.stream.value,
            found.kernel,
            found.kind,
            found.detail.replace(['\t', '\n'], " ")
        ));
    }
}
