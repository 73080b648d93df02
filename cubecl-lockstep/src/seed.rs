//! The simulator's seed: `LOCKSTEP_SEED`, or a fixed default; never the clock, so a run is
//! reproducible from its seed. The seed is printed once, when the first device opens.

use std::io::Write;

use thiserror::Error;

/// The environment variable that seeds the simulated devices.
pub const SEED_ENV: &str = "LOCKSTEP_SEED";

/// The seed when `LOCKSTEP_SEED` is not set.
pub const DEFAULT_SEED: u64 = 0;

/// A `LOCKSTEP_SEED` that is not a seed.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("LOCKSTEP_SEED={0:?} is not a u64 (decimal, or hexadecimal after 0x)")]
pub struct SeedError(pub String);

/// The seed `value` (the variable's value, if set) names.
///
/// # Errors
/// [`SeedError`] for a value that is not a decimal or `0x` hexadecimal `u64`.
pub fn parse_seed(value: Option<&str>) -> Result<u64, SeedError> {
    let Some(text) = value.map(str::trim) else {
        return Ok(DEFAULT_SEED);
    };
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| SeedError(text.to_owned()))
}

/// The seed of simulated device `index`: the run's seed plus the index, so devices differ.
pub fn device_seed(seed: u64, index: u16) -> u64 {
    seed.wrapping_add(u64::from(index))
}

/// The seed of simulated device `index` for this process, printed to standard error (past
/// any test harness's capture) the first time.
///
/// # Panics
/// If `LOCKSTEP_SEED` is set to something that is not a seed: set it to a `u64`.
pub fn for_device(index: u16) -> u64 {
    static PRINTED: std::sync::Once = std::sync::Once::new();
    let value = std::env::var(SEED_ENV).ok();
    let seed = parse_seed(value.as_deref()).unwrap_or_else(|error| panic!("{error}"));
    PRINTED.call_once(|| {
        let line = format!(
            "lockstep-cubecl: simulator seed {seed} ({SEED_ENV}; device i uses seed + i)\n"
        );
        let _ = std::io::stderr().write_all(line.as_bytes());
    });
    device_seed(seed, index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unset_seed_is_the_fixed_default() {
        assert_eq!(parse_seed(None), Ok(DEFAULT_SEED));
    }

    #[test]
    fn seeds_are_decimal_or_hexadecimal() {
        assert_eq!(parse_seed(Some("42")), Ok(42));
        assert_eq!(parse_seed(Some(" 0xff ")), Ok(255));
        assert_eq!(parse_seed(Some("18446744073709551615")), Ok(u64::MAX));
    }

    #[test]
    fn anything_else_is_refused_by_name() {
        assert_eq!(
            parse_seed(Some("clock")),
            Err(SeedError("clock".to_owned()))
        );
        assert_eq!(parse_seed(Some("-1")), Err(SeedError("-1".to_owned())));
    }

    #[test]
    fn devices_of_one_run_get_distinct_seeds() {
        assert_eq!(device_seed(7, 0), 7);
        assert_eq!(device_seed(7, 1), 8);
        assert_eq!(device_seed(u64::MAX, 1), 0);
    }
}
