#![doc = include_str!("../README.md")]

pub mod accountant;
pub mod binary;
pub mod categorical;
pub mod coin;
pub mod embedding;
pub mod epsilon;
pub mod error;
mod exact;
pub mod exponential;
pub mod frequency;
pub mod gaussian;
pub mod kary;
pub mod label;
pub mod label_value;
pub mod laplace;
pub mod mechanism;
mod numeric;
pub mod prior;
pub mod rng;

pub use accountant::{PrivacyLoss, RdpAccountant};
pub use binary::{BinaryRandomizedResponse, CountEstimate};
pub use categorical::Categorical;
pub use coin::Bernoulli;
pub use embedding::EmbeddingDp;
pub use epsilon::{Epsilon, Probability, logistic, logistic_complement};
pub use error::{Error, Result};
pub use exponential::{ExponentialForm, ExponentialMechanism};
pub use frequency::{
    FrequencyOracle, FrequencyProtocol, OlhReport, OptimizedLocalHashing, OptimizedUnaryEncoding,
    Report, SupportCounter,
};
pub use gaussian::DiscreteGaussian;
pub use kary::KaryRandomizedResponse;
pub use label::{LabelDp, LabelKind};
pub use label_value::LabelValue;
pub use laplace::{
    DiscreteLaplace, LaplaceCalibration, LaplaceOptions, LatticeLaw, ProbabilityVectorLaplace,
    TimingMode,
};
pub use mechanism::{
    BitProduct, CoordinateCdf, FiniteInputs, FiniteOutputs, MAX_LAW_OUTPUTS, Mechanism,
    Neighbouring, PrivacyClaim, law_epsilon,
};
pub use prior::RrWithPrior;
pub use rng::system_rng;
