//! Running the suite: every property on one device.

use crate::factory::{DeviceFactory, SimFactory};
use crate::properties::{self, Failure, RunConfig};

/// How one property fared.
#[derive(Debug)]
pub struct PropertyResult {
    /// The property's name.
    pub name: &'static str,
    /// What it claims, in one line.
    pub summary: &'static str,
    /// Cases run: none where the property is not applicable.
    pub cases: u32,
    /// The verdict.
    pub outcome: Outcome,
}

/// A property's verdict on one device.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every case held.
    Passed,
    /// A case failed; shrunk.
    Failed(Failure),
    /// The device cannot run the property (e.g. it cannot inject faults): nothing was checked.
    NotApplicable,
}

impl Outcome {
    /// The failure, when the property failed.
    pub fn failure(&self) -> Option<&Failure> {
        match self {
            Outcome::Failed(failure) => Some(failure),
            _ => None,
        }
    }

    /// The word the report's table shows.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Passed => "ok",
            Outcome::Failed(_) => "FAILED",
            Outcome::NotApplicable => "n/a",
        }
    }
}

/// Runs every property (or only `only`) on `factory`'s device, those it cannot run reported
/// [`Outcome::NotApplicable`]. `on_start` is called with each property's name before it runs.
pub fn check<F: DeviceFactory>(
    factory: &F,
    config: RunConfig,
    only: Option<&str>,
    mut on_start: impl FnMut(&str),
) -> Vec<PropertyResult> {
    properties::all::<F>()
        .into_iter()
        .filter(|p| only.is_none_or(|name| name == p.name))
        .map(|p| {
            on_start(p.name);
            let outcome = if !(p.applies)(factory) {
                Outcome::NotApplicable
            } else {
                match (p.check)(factory, config) {
                    Ok(()) => Outcome::Passed,
                    Err(failure) => Outcome::Failed(failure),
                }
            };
            PropertyResult {
                name: p.name,
                summary: p.summary,
                cases: if outcome == Outcome::NotApplicable {
                    0
                } else {
                    config.cases
                },
                outcome,
            }
        })
        .collect()
}

/// Names of every property, in suite order.
pub fn property_names() -> Vec<&'static str> {
    properties::all::<SimFactory>()
        .into_iter()
        .map(|p| p.name)
        .collect()
}

/// The command that runs `property` with `config`'s seed and cases.
pub fn replay_command(device: &str, property: &str, config: RunConfig) -> String {
    format!(
        "lockstep check --device {device} --property {property} --seed {} --cases {}",
        config.seed, config.cases
    )
}
