#![doc = include_str!("../README.md")]

pub mod attacks;
pub mod config;
pub mod data;
pub mod defences;
pub mod dp_sgd;
pub mod error;
pub mod feature_selection;
pub mod fixed;
pub mod host_features;
pub mod lp2st;
pub mod matrix;
pub mod message;
pub mod nn;
pub mod packing;
pub mod paillier;
pub mod protocol;
pub mod reference;
pub mod scheme;
mod secret;
pub mod split;
pub mod transport;

pub use config::{Encryption, Profile, ProtocolConfig};
pub use error::Error;
pub use fixed::FixedPoint;
pub use matrix::Matrix;
pub use message::{Message, Purpose};
pub use paillier::Paillier;
pub use protocol::{Guest, GuestEvent, Host, HostEvent};
pub use reference::PlainInteractiveLayer;
pub use scheme::HomomorphicScheme;
