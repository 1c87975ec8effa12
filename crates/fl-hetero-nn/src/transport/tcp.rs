//! TCP transport: each frame is a 4-byte big-endian length followed by the message encoding.
//! Frames above [`TcpConfig::max_frame_bytes`] are refused before anything is allocated, and
//! every read and write has a timeout, so a silent or hostile peer cannot hang a party.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use rand::CryptoRng;

use super::memory::TrafficStats;
use crate::error::{Error, TransportError};
use crate::message::Message;
use crate::protocol::{Guest, GuestEvent, Host, HostEvent};
use crate::scheme::HomomorphicScheme;

/// Transport limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TcpConfig {
    /// Largest accepted frame in bytes.
    pub max_frame_bytes: u32,
    /// Read timeout per frame read.
    pub read_timeout: Duration,
    /// Write timeout per frame write.
    pub write_timeout: Duration,
    /// Most frames received while waiting for one event.
    pub max_messages_per_event: usize,
}

impl Default for TcpConfig {
    fn default() -> Self {
        Self {
            max_frame_bytes: 256 << 20,
            read_timeout: Duration::from_secs(300),
            write_timeout: Duration::from_secs(300),
            max_messages_per_event: 16,
        }
    }
}

/// A TCP stream carrying length-prefixed frames.
#[derive(Debug)]
pub struct FramedStream {
    stream: TcpStream,
    config: TcpConfig,
    /// Traffic counters (host → guest is "sent" for the host, and so on).
    pub stats: TrafficStats,
    /// Whether this end is the host (for the counters' direction).
    is_host: bool,
}

impl FramedStream {
    /// Wraps a connected stream, setting timeouts and `TCP_NODELAY`.
    pub fn new(stream: TcpStream, config: TcpConfig, is_host: bool) -> Result<Self, Error> {
        stream
            .set_read_timeout(Some(config.read_timeout))
            .map_err(TransportError::from)?;
        stream
            .set_write_timeout(Some(config.write_timeout))
            .map_err(TransportError::from)?;
        stream.set_nodelay(true).map_err(TransportError::from)?;
        Ok(Self {
            stream,
            config,
            stats: TrafficStats::default(),
            is_host,
        })
    }

    /// Sends one message.
    pub fn send(&mut self, msg: &Message) -> Result<(), Error> {
        let body = msg.encode();
        let len = u32::try_from(body.len())
            .ok()
            .filter(|&l| l <= self.config.max_frame_bytes)
            .ok_or(TransportError::FrameTooLarge {
                len: body.len() as u64,
                max: u64::from(self.config.max_frame_bytes),
            })?;
        self.stream
            .write_all(&len.to_be_bytes())
            .map_err(TransportError::from)?;
        self.stream.write_all(&body).map_err(TransportError::from)?;
        self.stream.flush().map_err(TransportError::from)?;
        let bytes = 4 + body.len() as u64;
        if self.is_host {
            self.stats.host_to_guest_messages += 1;
            self.stats.host_to_guest_bytes += bytes;
        } else {
            self.stats.guest_to_host_messages += 1;
            self.stats.guest_to_host_bytes += bytes;
        }
        Ok(())
    }

    /// Receives one message (bounded size, with timeout).
    pub fn recv(&mut self) -> Result<Message, Error> {
        let mut len = [0u8; 4];
        self.stream
            .read_exact(&mut len)
            .map_err(TransportError::from)?;
        let len = u32::from_be_bytes(len);
        if len > self.config.max_frame_bytes {
            return Err(TransportError::FrameTooLarge {
                len: u64::from(len),
                max: u64::from(self.config.max_frame_bytes),
            }
            .into());
        }
        let mut body = vec![0u8; len as usize];
        self.stream
            .read_exact(&mut body)
            .map_err(TransportError::from)?;
        let bytes = 4 + u64::from(len);
        if self.is_host {
            self.stats.guest_to_host_messages += 1;
            self.stats.guest_to_host_bytes += bytes;
        } else {
            self.stats.host_to_guest_messages += 1;
            self.stats.host_to_guest_bytes += bytes;
        }
        Ok(Message::decode(&body)?)
    }
}

/// Sends every message the host has queued.
pub fn flush_host<S: HomomorphicScheme>(
    host: &mut Host<S>,
    stream: &mut FramedStream,
) -> Result<(), Error> {
    while let Some(m) = host.poll_message() {
        stream.send(&m)?;
    }
    Ok(())
}

/// Sends every message the guest has queued.
pub fn flush_guest<S: HomomorphicScheme>(
    guest: &mut Guest<S>,
    stream: &mut FramedStream,
) -> Result<(), Error> {
    while let Some(m) = guest.poll_message() {
        stream.send(&m)?;
    }
    Ok(())
}

/// Runs the host until it reports an event: sends queued messages, receives and handles
/// frames. On a protocol error the host's abort notice is sent before returning.
pub fn next_host_event<S: HomomorphicScheme, R: CryptoRng + ?Sized>(
    host: &mut Host<S>,
    stream: &mut FramedStream,
    rng: &mut R,
) -> Result<HostEvent, Error> {
    for _ in 0..stream.config.max_messages_per_event {
        flush_host(host, stream)?;
        if let Some(e) = host.poll_event() {
            return Ok(e);
        }
        let msg = stream.recv()?;
        if let Err(e) = host.handle_message(msg, rng) {
            let _ = flush_host(host, stream);
            return Err(e);
        }
    }
    Err(TransportError::TooManyMessages.into())
}

/// Runs the guest until it reports an event (see [`next_host_event`]).
pub fn next_guest_event<S: HomomorphicScheme, R: CryptoRng + ?Sized>(
    guest: &mut Guest<S>,
    stream: &mut FramedStream,
    rng: &mut R,
) -> Result<GuestEvent, Error> {
    for _ in 0..stream.config.max_messages_per_event {
        flush_guest(guest, stream)?;
        if let Some(e) = guest.poll_event() {
            return Ok(e);
        }
        let msg = stream.recv()?;
        if let Err(e) = guest.handle_message(msg, rng) {
            let _ = flush_guest(guest, stream);
            return Err(e);
        }
    }
    Err(TransportError::TooManyMessages.into())
}
