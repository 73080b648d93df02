//! The per-launch profile: launches grouped by label, with their count and device time.

use std::collections::BTreeMap;
use std::time::Duration;

use super::TimingMethod;

/// One group of launches in a [`ProfileSummary`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelProfile {
    /// The kernel's name, with its workgroup count (`medium`) and content hash (`full`).
    pub label: String,
    /// Launches in the group.
    pub launches: u64,
    /// Their summed duration; `None` at `execution-only`, which does not time.
    pub total: Option<Duration>,
}

impl KernelProfile {
    /// The mean duration of one launch; `None` when untimed or when there are no (or more than
    /// `u32::MAX`) launches.
    pub fn mean(&self) -> Option<Duration> {
        let launches = u32::try_from(self.launches).ok().filter(|&n| n > 0)?;
        self.total.map(|total| total / launches)
    }
}

/// Every launch profiled since the level was set, slowest group first (then by label).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProfileSummary {
    /// How launches were timed; `None` when nothing was timed.
    pub method: Option<TimingMethod>,
    /// One group per label, slowest first (then by label).
    pub kernels: Vec<KernelProfile>,
}

impl ProfileSummary {
    /// Builds the summary from per-label `(launches, total)`.
    pub(crate) fn new(
        method: Option<TimingMethod>,
        groups: &BTreeMap<String, (u64, Option<Duration>)>,
    ) -> Self {
        let mut kernels: Vec<KernelProfile> = groups
            .iter()
            .map(|(label, &(launches, total))| KernelProfile {
                label: label.clone(),
                launches,
                total,
            })
            .collect();
        kernels.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.label.cmp(&b.label)));
        Self { method, kernels }
    }

    /// Launches profiled, over every group.
    pub fn launches(&self) -> u64 {
        self.kernels.iter().map(|k| k.launches).sum()
    }

    /// Summed duration of every group; `None` when any group is untimed.
    pub fn total(&self) -> Option<Duration> {
        self.kernels.iter().map(|k| k.total).sum()
    }
}

/// `1.234 ms`-style text with three significant decimals, or `-` for untimed launches.
fn human(duration: Option<Duration>) -> String {
    let Some(duration) = duration else {
        return "-".to_owned();
    };
    let ns = duration.as_nanos() as f64;
    match ns {
        ns if ns >= 1e9 => format!("{:.3} s", ns / 1e9),
        ns if ns >= 1e6 => format!("{:.3} ms", ns / 1e6),
        ns if ns >= 1e3 => format!("{:.3} us", ns / 1e3),
        ns => format!("{ns} ns"),
    }
}

impl std::fmt::Display for ProfileSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let method = self
            .method
            .map_or("counted, not timed".to_owned(), |m| m.to_string());
        writeln!(
            f,
            "profile ({method}): {} launches of {} kernels, {}",
            self.launches(),
            self.kernels.len(),
            human(self.total())
        )?;
        let width = self
            .kernels
            .iter()
            .map(|k| k.label.len())
            .max()
            .unwrap_or(0)
            .max("kernel".len());
        writeln!(
            f,
            "  {:<width$}  {:>8}  {:>12}  {:>12}",
            "kernel", "launches", "total", "mean"
        )?;
        for k in &self.kernels {
            writeln!(
                f,
                "  {:<width$}  {:>8}  {:>12}  {:>12}",
                k.label,
                k.launches,
                human(k.total),
                human(k.mean())
            )?;
        }
        Ok(())
    }
}
