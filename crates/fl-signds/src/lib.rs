#![doc = include_str!("../README.md")]

pub mod client;
pub mod error;
pub mod law;
pub mod params;
pub mod report;
pub mod selection;
pub mod server;
pub mod topk;

pub use client::{Client, ClientOutput, Feedback, PrivacySpent};
pub use error::{Error, Result};
pub use law::SelectionLaw;
pub use params::{Params, Profile, Warning};
pub use report::{Report, Sign};
pub use server::{
    Broadcast, DEFAULT_SERVER_LEARNING_RATE, Phase, Round, RoundSummary, Server, StepRule,
    StepSizeEstimator, Transition,
};
