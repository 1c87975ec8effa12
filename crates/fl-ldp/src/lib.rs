#![doc = include_str!("../README.md")]

pub mod coin;
pub mod epsilon;
pub mod error;

pub use coin::Bernoulli;
pub use epsilon::{Epsilon, Probability, logistic, logistic_complement};
pub use error::{Error, Result};
