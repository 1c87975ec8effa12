//! An in-memory pair: both parties in one process, every message passed through the codec,
//! with a hook that can drop, duplicate, reorder or tamper with frames.

use std::collections::VecDeque;

use rand::CryptoRng;

use crate::error::Error;
use crate::protocol::{Guest, GuestEvent, Host, HostEvent};
use crate::scheme::HomomorphicScheme;

/// Direction of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Host → guest.
    HostToGuest,
    /// Guest → host.
    GuestToHost,
}

/// Which party raised an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The host.
    Host,
    /// The guest.
    Guest,
}

/// An error raised while driving the pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairError {
    /// The party whose state machine (or decoder) failed.
    pub side: Side,
    /// What went wrong.
    pub error: Error,
}

impl core::fmt::Display for PairError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:?}: {}", self.side, self.error)
    }
}

impl std::error::Error for PairError {}

/// Message and byte counters per direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrafficStats {
    /// Frames host → guest.
    pub host_to_guest_messages: u64,
    /// Bytes host → guest.
    pub host_to_guest_bytes: u64,
    /// Frames guest → host.
    pub guest_to_host_messages: u64,
    /// Bytes guest → host.
    pub guest_to_host_bytes: u64,
}

impl TrafficStats {
    /// Total frames.
    pub fn messages(&self) -> u64 {
        self.host_to_guest_messages + self.guest_to_host_messages
    }

    /// Total bytes.
    pub fn bytes(&self) -> u64 {
        self.host_to_guest_bytes + self.guest_to_host_bytes
    }
}

/// A frame hook: gets each encoded frame and returns the frames to deliver instead (empty
/// to drop, several to duplicate or to release frames held back earlier).
pub type FrameHook = Box<dyn FnMut(Direction, Vec<u8>) -> Vec<Vec<u8>>>;

/// Host and guest wired together in memory.
pub struct Pair<S: HomomorphicScheme, R: CryptoRng> {
    /// The host.
    pub host: Host<S>,
    /// The guest.
    pub guest: Guest<S>,
    /// The host's randomness.
    pub host_rng: R,
    /// The guest's randomness.
    pub guest_rng: R,
    /// Traffic so far.
    pub stats: TrafficStats,
    hook: Option<FrameHook>,
    to_guest: VecDeque<Vec<u8>>,
    to_host: VecDeque<Vec<u8>>,
    host_events: VecDeque<HostEvent>,
    guest_events: VecDeque<GuestEvent>,
}

impl<S: HomomorphicScheme, R: CryptoRng> core::fmt::Debug for Pair<S, R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "Pair {{ host: {:?}, guest: {:?}, stats: {:?} }}",
            self.host, self.guest, self.stats
        )
    }
}

/// The most frames [`Pair::drive`] moves before giving up (no hangs).
pub const DRIVE_LIMIT: usize = 1000;

impl<S: HomomorphicScheme, R: CryptoRng> Pair<S, R> {
    /// Wires `host` and `guest` together.
    pub fn new(host: Host<S>, guest: Guest<S>, host_rng: R, guest_rng: R) -> Self {
        Self {
            host,
            guest,
            host_rng,
            guest_rng,
            stats: TrafficStats::default(),
            hook: None,
            to_guest: VecDeque::new(),
            to_host: VecDeque::new(),
            host_events: VecDeque::new(),
            guest_events: VecDeque::new(),
        }
    }

    /// Installs a frame hook (see [`FrameHook`]).
    pub fn set_hook(&mut self, hook: FrameHook) {
        self.hook = Some(hook);
    }

    /// Removes the frame hook.
    pub fn clear_hook(&mut self) {
        self.hook = None;
    }

    fn collect_outgoing(&mut self) {
        while let Some(m) = self.host.poll_message() {
            let frame = m.encode();
            let frames = match &mut self.hook {
                Some(h) => h(Direction::HostToGuest, frame),
                None => vec![frame],
            };
            self.to_guest.extend(frames);
        }
        while let Some(m) = self.guest.poll_message() {
            let frame = m.encode();
            let frames = match &mut self.hook {
                Some(h) => h(Direction::GuestToHost, frame),
                None => vec![frame],
            };
            self.to_host.extend(frames);
        }
        while let Some(e) = self.host.poll_event() {
            self.host_events.push_back(e);
        }
        while let Some(e) = self.guest.poll_event() {
            self.guest_events.push_back(e);
        }
    }

    /// Delivers at most one pending frame in each direction. Returns whether anything moved.
    pub fn step(&mut self) -> Result<bool, PairError> {
        self.collect_outgoing();
        let mut moved = false;
        if let Some(frame) = self.to_guest.pop_front() {
            moved = true;
            self.stats.host_to_guest_messages += 1;
            self.stats.host_to_guest_bytes += frame.len() as u64;
            let r = self.guest.handle_frame(&frame, &mut self.guest_rng);
            r.map_err(|error| PairError {
                side: Side::Guest,
                error,
            })?;
        }
        if let Some(frame) = self.to_host.pop_front() {
            moved = true;
            self.stats.guest_to_host_messages += 1;
            self.stats.guest_to_host_bytes += frame.len() as u64;
            let r = self.host.handle_frame(&frame, &mut self.host_rng);
            r.map_err(|error| PairError {
                side: Side::Host,
                error,
            })?;
        }
        self.collect_outgoing();
        Ok(moved)
    }

    /// Delivers frames until both queues are empty (at most [`DRIVE_LIMIT`] steps).
    pub fn drive(&mut self) -> Result<(), PairError> {
        for _ in 0..DRIVE_LIMIT {
            if !self.step()? {
                return Ok(());
            }
        }
        Err(PairError {
            side: Side::Host,
            error: Error::Transport(crate::error::TransportError::TooManyMessages),
        })
    }

    /// The next host event.
    pub fn poll_host_event(&mut self) -> Option<HostEvent> {
        self.collect_outgoing();
        self.host_events.pop_front()
    }

    /// The next guest event.
    pub fn poll_guest_event(&mut self) -> Option<GuestEvent> {
        self.collect_outgoing();
        self.guest_events.pop_front()
    }
}
