#![doc = include_str!("../README.md")]

pub mod binary;
pub mod categorical;
pub mod coin;
pub mod embedding;
pub mod epsilon;
pub mod error;
mod exact;
pub mod kary;
pub mod label;
pub mod mechanism;
mod numeric;

pub use binary::{BinaryRandomizedResponse, CountEstimate};
pub use categorical::Categorical;
pub use coin::Bernoulli;
pub use embedding::EmbeddingDp;
pub use epsilon::{Epsilon, Probability, logistic, logistic_complement};
pub use error::{Error, Result};
pub use kary::KaryRandomizedResponse;
pub use label::{LabelDp, LabelKind, LabelValue};
pub use mechanism::{
    BitProduct, CoordinateCdf, FiniteInputs, FiniteOutputs, Mechanism, Neighbouring, PrivacyClaim,
    law_epsilon,
};
