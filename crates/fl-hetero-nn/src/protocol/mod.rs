//! The sans-IO protocol core: [`Host`] and [`Guest`] state machines.
//!
//! Neither party touches sockets, threads of its own, or clocks. Each exposes, in
//! quinn-proto's order:
//! - getters on `&self` (`round`, `training_steps`, `is_closed`, ...);
//! - `handle_message(msg, rng)`: input from the peer;
//! - local commands from the application (`Host::start_round`, `Guest::backward`);
//! - `poll_message()` / `poll_event()`: output, drained by the caller.
//!
//! Randomness is always an argument. Any error closes the session: the party queues an
//! [`Message::Abort`] for the peer and refuses all further input with
//! [`Error::SessionClosed`].

mod guest;
mod host;
pub(crate) mod ops;

pub use guest::{Guest, GuestEvent, GuestSnapshot};
pub use host::{Host, HostEvent, HostSnapshot};

use crate::config::{Bounds, ProtocolConfig};
use crate::error::{ApiMisuse, Error};
use crate::packing::{Axis, Layout};

#[cfg(doc)]
use crate::message::Message;

/// The layouts of one round, a deterministic function of public values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RoundLayouts {
    /// ⟦A⟧ for the forward product and the masked forward result (along rows).
    pub(crate) forward: Layout,
    /// ⟦A⟧ for the weight gradient (along columns); the gradient is along rows with
    /// the same slots.
    pub(crate) gradient: Layout,
    /// ⟦acc⟧ (along rows); δ_A is along columns with the same slots.
    pub(crate) acc: Layout,
}

impl RoundLayouts {
    pub(crate) fn new(
        config: &ProtocolConfig,
        bounds: &Bounds,
        plaintext_bits: u64,
        n: usize,
        t: u64,
    ) -> Result<Self, Error> {
        let fits = |bits: u32, what: &str| {
            if u64::from(bits) + 1 < plaintext_bits {
                Ok(())
            } else {
                Err(Error::ApiMisuse(ApiMisuse::InvalidConfig {
                    reason: format!(
                        "{what} needs {bits} bits but the key's plaintext space has {plaintext_bits}; use a larger key or smaller bounds"
                    ),
                }))
            }
        };
        fits(bounds.masked_forward(t), "the masked forward")?;
        fits(bounds.masked_gradient(), "the masked gradient")?;
        fits(bounds.backward_slot(t), "the input gradient")?;
        if config.packing {
            Ok(Self {
                forward: Layout::packed(Axis::Rows, bounds.masked_forward(t), plaintext_bits, n)?,
                gradient: Layout::packed(
                    Axis::Cols,
                    bounds.masked_gradient(),
                    plaintext_bits,
                    config.host_dim,
                )?,
                acc: Layout::packed(
                    Axis::Rows,
                    bounds.backward_slot(t),
                    plaintext_bits,
                    config.host_dim,
                )?,
            })
        } else {
            Ok(Self {
                forward: Layout::unpacked(Axis::Rows),
                gradient: Layout::unpacked(Axis::Cols),
                acc: Layout::unpacked(Axis::Rows),
            })
        }
    }
}
