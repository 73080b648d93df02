//! The variables torchrun (and `lockstep launch`) set for each process of a world.

use thiserror::Error;

/// Where this process stands in its world, read from `RANK`, `WORLD_SIZE`, `LOCAL_RANK`,
/// `MASTER_ADDR` and `MASTER_PORT`.
///
/// Invariant: `rank < world_size`, and `world_size >= 1`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorldEnv {
    /// This process's global rank: rank 0 serves the rendezvous.
    pub rank: u32,
    /// How many processes the world has, on every host together: its ranks are
    /// `0..world_size`.
    pub world_size: u32,
    /// The GPU of this host the process drives.
    pub local_rank: u32,
    /// Rank 0's host, as the other ranks reach it.
    pub master_addr: String,
    /// The port rank 0 listens on, on every IPv4 interface of its host and on IPv4 only:
    /// `MASTER_ADDR` must reach that host over IPv4 (a name with IPv6 addresses too works, its
    /// IPv4 ones answering).
    pub master_port: u16,
}

/// A variable of [`WorldEnv`] that is missing or does not parse.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum EnvError {
    /// The variable is not set: the process was not started by `lockstep launch` or torchrun.
    #[error(
        "environment variable {name} is not set: start the processes with `lockstep launch` or torchrun, which set RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT"
    )]
    Missing {
        /// The variable, e.g. `"RANK"`.
        name: &'static str,
    },
    /// The variable is set but is not a number in range (a `RANK` not below `WORLD_SIZE`, a
    /// `WORLD_SIZE` of 0, a port above 65535, an empty `MASTER_ADDR`).
    #[error("environment variable {name}={value:?} is invalid: {reason}")]
    Invalid {
        /// The variable, e.g. `"MASTER_PORT"`.
        name: &'static str,
        /// Its value, trimmed.
        value: String,
        /// Why it is refused, for a person to read.
        reason: String,
    },
}

/// The variables a world is read from.
const VARIABLES: [&str; 5] = [
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
];

impl WorldEnv {
    /// Reads the process's environment.
    ///
    /// # Errors
    /// [`EnvError`] naming the first variable that is missing or invalid.
    pub fn from_env() -> Result<Self, EnvError> {
        for name in VARIABLES {
            if let Err(std::env::VarError::NotUnicode(value)) = std::env::var(name) {
                return Err(invalid(name, &value.to_string_lossy(), "not UTF-8"));
            }
        }
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the variables through `lookup` (the environment, or a test's table).
    ///
    /// # Errors
    /// [`EnvError`] naming the first variable that is missing or invalid.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, EnvError> {
        let var = |name: &'static str| {
            lookup(name)
                .map(|value| value.trim().to_owned())
                .ok_or(EnvError::Missing { name })
        };
        let world_size: u32 = parse("WORLD_SIZE", &var("WORLD_SIZE")?)?;
        if world_size == 0 {
            return Err(invalid("WORLD_SIZE", "0", "a world has at least one rank"));
        }
        let rank_text = var("RANK")?;
        let rank: u32 = parse("RANK", &rank_text)?;
        if rank >= world_size {
            let reason = format!("not below WORLD_SIZE={world_size}");
            return Err(invalid("RANK", &rank_text, &reason));
        }
        let local_rank = parse("LOCAL_RANK", &var("LOCAL_RANK")?)?;
        let master_addr = var("MASTER_ADDR")?;
        if master_addr.is_empty() {
            return Err(invalid("MASTER_ADDR", "", "empty"));
        }
        let port_text = var("MASTER_PORT")?;
        let master_port = parse("MASTER_PORT", &port_text)?;
        if master_port == 0 && world_size > 1 {
            let reason = "port 0 lets rank 0 listen on any port, which the other ranks cannot know";
            return Err(invalid("MASTER_PORT", &port_text, reason));
        }
        Ok(Self {
            rank,
            world_size,
            local_rank,
            master_addr,
            master_port,
        })
    }
}

fn invalid(name: &'static str, value: &str, reason: &str) -> EnvError {
    EnvError::Invalid {
        name,
        value: value.to_owned(),
        reason: reason.to_owned(),
    }
}

fn parse<T: std::str::FromStr<Err = std::num::ParseIntError>>(
    name: &'static str,
    value: &str,
) -> Result<T, EnvError> {
    value
        .parse()
        .map_err(|err: std::num::ParseIntError| invalid(name, value, &err.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(vars: &[(&str, &str)]) -> Result<WorldEnv, EnvError> {
        WorldEnv::from_lookup(|name| {
            vars.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        })
    }

    const TORCHRUN: [(&str, &str); 5] = [
        ("RANK", "1"),
        ("WORLD_SIZE", "2"),
        ("LOCAL_RANK", "1"),
        ("MASTER_ADDR", "node0"),
        ("MASTER_PORT", "29500"),
    ];

    fn with(name: &str, value: &str) -> Vec<(&'static str, String)> {
        TORCHRUN
            .iter()
            .map(|&(key, old)| (key, if key == name { value } else { old }.to_owned()))
            .collect()
    }

    fn message(vars: Vec<(&'static str, String)>) -> String {
        let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
        read(&vars).unwrap_err().to_string()
    }

    #[test]
    fn torchrun_variables_are_read() {
        assert_eq!(
            read(&TORCHRUN),
            Ok(WorldEnv {
                rank: 1,
                world_size: 2,
                local_rank: 1,
                master_addr: "node0".to_owned(),
                master_port: 29500,
            })
        );
    }

    #[test]
    fn missing_and_invalid_variables_are_named() {
        let missing = read(&TORCHRUN[1..]).unwrap_err();
        assert_eq!(missing, EnvError::Missing { name: "RANK" });
        insta::assert_snapshot!(missing, @"environment variable RANK is not set: start the processes with `lockstep launch` or torchrun, which set RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT");
        insta::assert_snapshot!(message(with("RANK", "2")), @r#"environment variable RANK="2" is invalid: not below WORLD_SIZE=2"#);
        insta::assert_snapshot!(message(with("WORLD_SIZE", "0")), @r#"environment variable WORLD_SIZE="0" is invalid: a world has at least one rank"#);
        insta::assert_snapshot!(message(with("LOCAL_RANK", "-1")), @r#"environment variable LOCAL_RANK="-1" is invalid: invalid digit found in string"#);
        insta::assert_snapshot!(message(with("MASTER_PORT", "70000")), @r#"environment variable MASTER_PORT="70000" is invalid: number too large to fit in target type"#);
        insta::assert_snapshot!(message(with("MASTER_ADDR", " ")), @r#"environment variable MASTER_ADDR="" is invalid: empty"#);
        insta::assert_snapshot!(message(with("MASTER_PORT", "0")), @r#"environment variable MASTER_PORT="0" is invalid: port 0 lets rank 0 listen on any port, which the other ranks cannot know"#);
    }

    #[test]
    fn a_world_of_one_may_listen_on_any_port() {
        let alone: Vec<(&str, String)> = with("WORLD_SIZE", "1")
            .into_iter()
            .map(|(k, v)| match k {
                "RANK" => (k, "0".to_owned()),
                "MASTER_PORT" => (k, "0".to_owned()),
                _ => (k, v),
            })
            .collect();
        let vars: Vec<(&str, &str)> = alone.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(read(&vars).map(|env| env.master_port), Ok(0));
    }
}
