#![doc = include_str!("../README.md")]

mod analysis;
pub mod cli;
pub mod engine;
pub mod error;
pub mod external;
pub mod family;
pub mod progress;
pub mod protocol;
pub mod report;
mod schedule;
mod seeds;
pub mod shard;
mod source;
pub mod suite;
mod tally;

/// Generated at build time: the embedded suite files, the compiler version and the build
/// identifier.
mod builtin {
    include!(concat!(env!("OUT_DIR"), "/builtin.rs"));
}

pub use error::{AuditError, EXIT_FAIL, EXIT_PASS, EXIT_USAGE, Result};
