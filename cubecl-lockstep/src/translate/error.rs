//! What the translator refuses: every construct it cannot translate exactly is a typed
//! refusal naming the construct, never an approximation.

use thiserror::Error;

/// A WGSL construct the translator refuses, by family. The name inside is naga's (a statement,
/// an expression, a math function, a type, a builtin), so a refusal says what to add.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Construct {
    /// A statement (`loop`, `switch`, an early `return`, a barrier, ...).
    Statement(String),
    /// An expression (a call result, an image access, ...).
    Expression(String),
    /// A built-in math function (`Tan`, `CountOneBits`, ...).
    Math(String),
    /// A reinterpretation of bits between two types (`bitcast<u32>(f32)`).
    Bitcast {
        /// The type reinterpreted.
        from: String,
        /// The type it becomes.
        to: String,
    },
    /// A value or storage type Lockstep's IR has no counterpart for (`u64`, `f16`, a local
    /// array, ...).
    Type(String),
    /// An entry-point input other than the invocation and workgroup ids.
    Builtin(String),
    /// A global variable's address space or shape (`private`, a texture, ...).
    Global(String),
    /// An operation whose WGSL result differs from Lockstep's IR (float `%`, ...).
    Semantics(String),
}

impl std::fmt::Display for Construct {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Construct::Statement(s) => write!(f, "statement `{s}`"),
            Construct::Expression(e) => write!(f, "expression `{e}`"),
            Construct::Math(m) => write!(f, "math function `{m}`"),
            Construct::Bitcast { from, to } => write!(f, "bitcast {from} -> {to}"),
            Construct::Type(t) => write!(f, "type `{t}`"),
            Construct::Builtin(b) => write!(f, "builtin `{b}`"),
            Construct::Global(g) => write!(f, "global `{g}`"),
            Construct::Semantics(s) => write!(f, "operation `{s}`"),
        }
    }
}

/// A kernel the translator cannot run on Lockstep: the construct, the kernel it is in, and
/// what about it (`detail`) stands in the way.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("lockstep cannot run {construct} in kernel `{kernel}`: {detail}")]
pub struct Unsupported {
    /// The kernel's entry-point name.
    pub kernel: String,
    /// The construct refused.
    pub construct: Construct,
    /// Why, or what Lockstep's IR would need.
    pub detail: String,
}

/// The translator's result type.
pub type Translation<T> = Result<T, Unsupported>;
