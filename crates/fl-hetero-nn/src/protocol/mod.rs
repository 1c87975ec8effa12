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

use std::collections::VecDeque;

use rand::CryptoRng;

use crate::config::{Bounds, ProtocolConfig};
use crate::error::{ApiMisuse, Error, PeerMisbehaved};
use crate::message::{AbortCode, Message};
use crate::packing::{Axis, Layout};

/// The session plumbing [`Host`] and [`Guest`] share: closing on the first error, the
/// abort notice, frame decoding and the round check. Each party supplies its state
/// transition ([`Session::dispatch`]); the provided methods are the only error path.
pub(crate) trait Session {
    /// Whether an error closed the session.
    fn is_closed(&self) -> bool;
    /// Moves the party to its closed state.
    fn close(&mut self);
    /// The party's queue of outgoing messages.
    fn outbox(&mut self) -> &mut VecDeque<Message>;
    /// One state transition on a message from the peer.
    fn dispatch<R: CryptoRng + ?Sized>(&mut self, msg: Message, rng: &mut R) -> Result<(), Error>;

    /// Closes the session on error; queues an abort notice unless `silent` (the session
    /// was already closed, or the peer itself aborted).
    fn fail_on_error(&mut self, r: Result<(), Error>, silent: bool) -> Result<(), Error> {
        if let Err(e) = &r {
            if !silent {
                let code = match e {
                    Error::PeerMisbehaved(_)
                    | Error::UnexpectedMessage { .. }
                    | Error::Decode(_) => AbortCode::ProtocolViolation,
                    _ => AbortCode::LocalError,
                };
                self.outbox().push_back(Message::Abort(code as u8));
            }
            self.close();
        }
        r
    }

    /// Feeds a message from the peer; any error closes the session.
    fn feed_message<R: CryptoRng + ?Sized>(
        &mut self,
        msg: Message,
        rng: &mut R,
    ) -> Result<(), Error> {
        let silent = matches!(msg, Message::Abort(_)) || self.is_closed();
        let r = self.dispatch(msg, rng);
        self.fail_on_error(r, silent)
    }

    /// Decodes a frame from the peer and feeds it; a frame that does not decode closes the
    /// session like any other protocol error.
    fn feed_frame<R: CryptoRng + ?Sized>(
        &mut self,
        frame: &[u8],
        rng: &mut R,
    ) -> Result<(), Error> {
        match Message::decode(frame) {
            Ok(msg) => self.feed_message(msg, rng),
            Err(e) => {
                let closed = self.is_closed();
                let r = if closed {
                    Err(Error::SessionClosed)
                } else {
                    Err(e.into())
                };
                self.fail_on_error(r, closed)
            }
        }
    }
}

/// A peer message belongs to the round in progress, or the peer misbehaved.
pub(crate) fn check_round(expected: u64, got: u64) -> Result<(), Error> {
    if got == expected {
        Ok(())
    } else {
        Err(PeerMisbehaved::WrongRound { expected, got }.into())
    }
}

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
