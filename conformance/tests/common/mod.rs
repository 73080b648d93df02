//! What more than one self-test needs.

pub mod misbehaving;
