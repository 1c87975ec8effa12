//! Transports: thin layers that move [`crate::message::Message`] frames between the state
//! machines. The in-memory [`memory::Pair`] needs no I/O; [`tcp`] (feature `transport`) uses
//! std's TCP sockets with length-prefixed frames, a bounded frame size and timeouts.

pub mod memory;
#[cfg(feature = "transport")]
pub mod tcp;
