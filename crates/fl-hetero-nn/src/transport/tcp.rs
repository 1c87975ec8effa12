//! TCP transport: each frame is a 4-byte big-endian length followed by the message encoding.
//! Frames above [`TcpConfig::max_frame_bytes`] are refused before anything is allocated (and
//! a frame's buffer grows with the bytes that arrive, not with the length it announces), and
//! each whole frame must arrive or leave within its timeout, so a silent, trickling or
//! hostile peer cannot hang a party.
//!
//! While the guest waits for the host's next frame, [`next_guest_event`] fills the guest's
//! pool of re-randomizers (hardened profile) up to [`Guest::randomizers_wanted`], one chunk
//! ([`prefill_chunk`]) at a time, as long as no byte from the host is waiting
//! ([`TcpConfig::prefill_randomizers`]).

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use rand::CryptoRng;

use super::memory::TrafficStats;
use crate::error::{ApiMisuse, Error, TransportError};
use crate::message::Message;
use crate::protocol::{Guest, GuestEvent, Host, HostEvent};
use crate::scheme::HomomorphicScheme;

/// Transport limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TcpConfig {
    /// Largest accepted frame in bytes.
    pub max_frame_bytes: u32,
    /// Deadline for receiving one whole frame (its length prefix and body), counted from
    /// the start of [`FramedStream::recv`]: a peer that sends a byte now and then cannot
    /// hold the reader longer than this (each socket read waits at most the time left).
    /// Must be in (0, [`MAX_TIMEOUT`]].
    pub read_timeout: Duration,
    /// Deadline for sending one whole frame, counted from the start of
    /// [`FramedStream::send`]: a peer that reads slowly cannot hold the writer longer.
    /// Must be in (0, [`MAX_TIMEOUT`]].
    pub write_timeout: Duration,
    /// Most frames received while waiting for one event.
    pub max_messages_per_event: usize,
    /// Whether [`next_guest_event`] precomputes the guest's re-randomizers (hardened
    /// profile: a textbook sⁿ mod n² per ciphertext the guest returns) while it waits for
    /// the host. Before each blocking read it checks, without blocking, whether a byte from
    /// the host is waiting; while none is and the pool holds fewer than
    /// [`Guest::randomizers_wanted`] (one step's need for the last batch size; 0 before the
    /// first round and in the FateFaithful profile), it computes one chunk more
    /// ([`prefill_chunk`]) and checks again. So the pool never exceeds one step's need for
    /// the largest batch seen in the session (it is not trimmed when batches shrink; the
    /// guest's own `max_batch_rows` and dimensions bound it), and a frame that arrives
    /// during the filling waits for at most one chunk. Filling does not count against
    /// [`Self::read_timeout`], which starts with the blocking read. Off, the guest computes
    /// every randomizer on the critical path when it re-randomises (as it does for any
    /// shortfall anyway). The results are the same either way, and a seeded run is
    /// reproducible whatever the host's timing: the guest draws its randomizers from its
    /// own stream (seeded once at the host's hello), in the same order whether they are
    /// precomputed or not, and the rng passed to [`next_guest_event`] (masks, DP noise) is
    /// not touched by the filling. Default: on.
    pub prefill_randomizers: bool,
}

impl Default for TcpConfig {
    fn default() -> Self {
        Self {
            max_frame_bytes: 256 << 20,
            read_timeout: Duration::from_secs(300),
            write_timeout: Duration::from_secs(300),
            max_messages_per_event: 16,
            prefill_randomizers: true,
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
    /// Set when a send or receive failed after it started moving a frame.
    broken: bool,
}

/// The longest [`TcpConfig::read_timeout`] or [`TcpConfig::write_timeout`] accepted: 30
/// days (a deadline must be representable; "no timeout" is not offered).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(30 * 24 * 3600);

impl FramedStream {
    /// Wraps a connected stream, setting timeouts and `TCP_NODELAY`.
    ///
    /// # Errors
    /// [`ApiMisuse::InvalidConfig`] when a timeout is zero or above [`MAX_TIMEOUT`];
    /// [`Error::Transport`] when the socket options cannot be set.
    pub fn new(stream: TcpStream, config: TcpConfig, is_host: bool) -> Result<Self, Error> {
        for (name, timeout) in [
            ("read_timeout", config.read_timeout),
            ("write_timeout", config.write_timeout),
        ] {
            if timeout.is_zero() || timeout > MAX_TIMEOUT {
                return Err(ApiMisuse::InvalidConfig {
                    reason: format!(
                        "{name} = {timeout:?}; must be above zero and at most {MAX_TIMEOUT:?} \
                         (30 days)"
                    ),
                }
                .into());
            }
        }
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
            broken: false,
        })
    }

    /// Sends one message: the whole frame within [`TcpConfig::write_timeout`].
    ///
    /// # Errors
    /// [`TransportError::FrameTooLarge`] (nothing is sent), or a transport error once the
    /// frame has started to leave; after the latter every later call fails with
    /// [`TransportError::Broken`].
    pub fn send(&mut self, msg: &Message) -> Result<(), Error> {
        if self.broken {
            return Err(TransportError::Broken.into());
        }
        let body = msg.encode();
        let len = u32::try_from(body.len())
            .ok()
            .filter(|&l| l <= self.config.max_frame_bytes)
            .ok_or(TransportError::FrameTooLarge {
                len: body.len() as u64,
                max: u64::from(self.config.max_frame_bytes),
            })?;
        let mut socket = BeforeDeadline {
            stream: &mut self.stream,
            deadline: Instant::now() + self.config.write_timeout,
        };
        let sent = socket
            .write_all(&len.to_be_bytes())
            .and_then(|()| socket.write_all(&body))
            .and_then(|()| socket.flush());
        if let Err(e) = sent {
            self.broken = true;
            return Err(TransportError::from(e).into());
        }
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

    /// Runs `work` while no byte from the peer is waiting to be read, until `work` returns
    /// false: before each call a non-blocking peek at the socket. Stops without error when
    /// a byte is waiting or the peer closed the connection (the next [`Self::recv`]
    /// reports either); other socket errors are returned. The socket is back in blocking
    /// mode with its read timeout afterwards, whatever happened.
    fn while_peer_silent(&mut self, work: impl FnMut() -> bool) -> Result<(), Error> {
        self.stream
            .set_nonblocking(true)
            .map_err(TransportError::from)?;
        let result = Self::peek_loop(&self.stream, work);
        let restored = self
            .stream
            .set_nonblocking(false)
            .and_then(|()| self.stream.set_read_timeout(Some(self.config.read_timeout)));
        result?;
        restored.map_err(TransportError::from)?;
        Ok(())
    }

    fn peek_loop(stream: &TcpStream, mut work: impl FnMut() -> bool) -> Result<(), Error> {
        let mut byte = [0u8; 1];
        loop {
            match stream.peek(&mut byte) {
                // A byte is waiting (n = 1) or the peer closed (n = 0): recv takes over.
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if !work() {
                        return Ok(());
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(TransportError::from(e).into()),
            }
        }
    }

    /// Receives one message: at most [`TcpConfig::max_frame_bytes`], the whole frame within
    /// [`TcpConfig::read_timeout`].
    ///
    /// # Errors
    /// A transport error (timeout, closed peer, frame too large), after which every later
    /// call fails with [`TransportError::Broken`] (the frame may be partly read); or a
    /// decoding error for a complete frame that is not a message (the stream stays usable).
    pub fn recv(&mut self) -> Result<Message, Error> {
        if self.broken {
            return Err(TransportError::Broken.into());
        }
        let body = self.recv_frame().inspect_err(|_| self.broken = true)?;
        Ok(Message::decode(&body)?)
    }

    /// One frame's body, read before the deadline.
    fn recv_frame(&mut self) -> Result<Vec<u8>, TransportError> {
        let mut socket = BeforeDeadline {
            stream: &mut self.stream,
            deadline: Instant::now() + self.config.read_timeout,
        };
        let mut len = [0u8; 4];
        socket.read_exact(&mut len)?;
        let len = u32::from_be_bytes(len);
        if len > self.config.max_frame_bytes {
            return Err(TransportError::FrameTooLarge {
                len: u64::from(len),
                max: u64::from(self.config.max_frame_bytes),
            });
        }
        // The buffer grows with the bytes that arrive (read_to_end doubles its capacity
        // from a small probe), not with the length the peer announced.
        let mut body = Vec::new();
        socket.take(u64::from(len)).read_to_end(&mut body)?;
        if body.len() != len as usize {
            return Err(TransportError::Closed);
        }
        let bytes = 4 + u64::from(len);
        if self.is_host {
            self.stats.guest_to_host_messages += 1;
            self.stats.guest_to_host_bytes += bytes;
        } else {
            self.stats.host_to_guest_messages += 1;
            self.stats.host_to_guest_bytes += bytes;
        }
        Ok(body)
    }
}

/// The socket with a deadline: each read or write waits at most the time left before it
/// (and fails with `TimedOut` once none is), so std's `read_exact`, `read_to_end` and
/// `write_all` bound a whole frame, however the peer paces its bytes.
struct BeforeDeadline<'a> {
    stream: &'a mut TcpStream,
    deadline: Instant,
}

impl BeforeDeadline<'_> {
    fn time_left(&self) -> std::io::Result<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            Err(ErrorKind::TimedOut.into())
        } else {
            Ok(left)
        }
    }
}

impl Read for BeforeDeadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.stream.set_read_timeout(Some(self.time_left()?))?;
        self.stream.read(buf)
    }
}

impl Write for BeforeDeadline<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.stream.set_write_timeout(Some(self.time_left()?))?;
        self.stream.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.stream.flush()
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

/// Randomizers per batch of fl-paillier's exponentiation kernel (eight per AVX-512 IFMA
/// instruction stream): the unit of [`prefill_chunk`].
pub const PREFILL_CHUNK: usize = 8;

/// Randomizers the guest precomputes per check of the socket while it waits
/// ([`TcpConfig::prefill_randomizers`]): one kernel batch ([`PREFILL_CHUNK`]) per worker
/// thread (rayon's pool with feature `parallel`, else one), computed in parallel, so a frame
/// that arrives meanwhile waits for about one batch of eight exponentiations mod n²
/// whatever the number of cores, while the filling uses every core.
pub fn prefill_chunk() -> usize {
    #[cfg(feature = "parallel")]
    let workers = rayon::current_num_threads().max(1);
    #[cfg(not(feature = "parallel"))]
    let workers = 1;
    PREFILL_CHUNK.saturating_mul(workers)
}

/// Fills the guest's pool towards [`Guest::randomizers_wanted`] while no frame from the host
/// is waiting ([`TcpConfig::prefill_randomizers`]).
fn prefill_while_waiting<S: HomomorphicScheme>(
    guest: &mut Guest<S>,
    stream: &mut FramedStream,
) -> Result<(), Error> {
    // The target depends only on the last batch size, which waiting does not change.
    let want = guest.randomizers_wanted();
    if !stream.config.prefill_randomizers || guest.randomizers_available() >= want {
        return Ok(());
    }
    stream.while_peer_silent(|| {
        let have = guest.randomizers_available();
        if have >= want {
            return false;
        }
        // Stop if the pool did not grow (a scheme without a pool), rather than spin.
        guest
            .precompute_randomizers(prefill_chunk().min(want - have))
            .is_ok()
            && guest.randomizers_available() > have
    })
}

/// Runs the guest until it reports an event (see [`next_host_event`]). Before each blocking
/// read it precomputes the guest's re-randomizers while the host is silent
/// ([`TcpConfig::prefill_randomizers`]).
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
        prefill_while_waiting(guest, stream)?;
        let msg = stream.recv()?;
        if let Err(e) = guest.handle_message(msg, rng) {
            let _ = flush_guest(guest, stream);
            return Err(e);
        }
    }
    Err(TransportError::TooManyMessages.into())
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    fn pair(config: TcpConfig) -> (FramedStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let peer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (ours, _) = listener.accept().unwrap();
        (FramedStream::new(ours, config, false).unwrap(), peer)
    }

    #[test]
    fn work_runs_while_the_peer_is_silent_and_stops_when_it_says_so() {
        let (mut s, _peer) = pair(TcpConfig::default());
        let mut calls = 0;
        s.while_peer_silent(|| {
            calls += 1;
            calls < 5
        })
        .unwrap();
        assert_eq!(calls, 5);
    }

    #[test]
    fn a_waiting_byte_or_a_closed_peer_stops_the_work_before_it_starts() {
        let (mut s, mut peer) = pair(TcpConfig::default());
        peer.write_all(&[0]).unwrap();
        // A blocking peek: the byte has arrived (and stays unread).
        assert_eq!(s.stream.peek(&mut [9u8; 1]).unwrap(), 1);
        let mut calls = 0;
        s.while_peer_silent(|| {
            calls += 1;
            calls < 1000
        })
        .unwrap();
        assert_eq!(calls, 0, "a byte was waiting: no work");
        // peek consumed nothing: the byte is still there for recv.
        let mut b = [9u8; 1];
        s.stream.read_exact(&mut b).unwrap();
        assert_eq!(b, [0]);

        drop(peer);
        // A blocking peek returns 0 once the peer's FIN has arrived.
        assert_eq!(s.stream.peek(&mut [9u8; 1]).unwrap(), 0);
        s.while_peer_silent(|| {
            calls += 1;
            calls < 1000
        })
        .unwrap();
        assert_eq!(calls, 0, "the peer closed: no work");
        assert_eq!(
            s.recv().unwrap_err(),
            Error::Transport(TransportError::Closed)
        );
    }

    /// Writes `frame` to `peer` one byte every `gap`.
    fn trickle(mut peer: TcpStream, frame: Vec<u8>, gap: Duration) -> TcpStream {
        for b in frame {
            std::thread::sleep(gap);
            if peer.write_all(&[b]).is_err() {
                break;
            }
        }
        peer
    }

    fn frame_of(msg: &Message) -> Vec<u8> {
        let body = msg.encode();
        let mut frame = (body.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        frame
    }

    #[test]
    fn a_peer_trickling_bytes_cannot_stretch_a_frame_past_the_read_timeout() {
        let frame = frame_of(&Message::Abort(7));
        let gap = Duration::from_millis(150);
        // Every single read gets a byte well within 300 ms, but the whole frame takes
        // about len × 150 ms (> 0.9 s): the per-frame deadline ends it.
        let config = TcpConfig {
            read_timeout: Duration::from_millis(300),
            ..TcpConfig::default()
        };
        let (mut s, peer) = pair(config);
        let writer = std::thread::spawn({
            let frame = frame.clone();
            move || trickle(peer, frame, gap)
        });
        let started = Instant::now();
        assert_eq!(
            s.recv().unwrap_err(),
            Error::Transport(TransportError::Timeout)
        );
        assert!(started.elapsed() < Duration::from_millis(300) + gap * 2);
        // The frame is half read: the stream refuses further use instead of reading body
        // bytes as the next length.
        for _ in 0..2 {
            assert_eq!(
                s.recv().unwrap_err(),
                Error::Transport(TransportError::Broken)
            );
        }
        assert_eq!(
            s.send(&Message::Abort(1)).unwrap_err(),
            Error::Transport(TransportError::Broken)
        );
        drop(s);
        drop(writer.join().unwrap());

        // Control: the same trickle within a deadline long enough for the whole frame.
        let config = TcpConfig {
            read_timeout: Duration::from_secs(30),
            ..TcpConfig::default()
        };
        let (mut s, peer) = pair(config);
        let writer = std::thread::spawn(move || trickle(peer, frame, gap));
        assert_eq!(s.recv().unwrap(), Message::Abort(7));
        drop(writer.join().unwrap());
    }

    #[test]
    fn a_slow_reader_cannot_stretch_a_frame_past_the_write_timeout() {
        // 16 MiB, far more than the socket buffers, to a peer that reads 1 KiB every 10 ms
        // (about 100 KiB/s: every write makes progress, but the whole takes minutes).
        let frame = vec![0x5au8; 16 << 20];
        let (mut s, mut peer) = pair(TcpConfig::default());
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = std::thread::spawn({
            let stop = stop.clone();
            move || {
                let mut buf = vec![0u8; 1024];
                let mut total = 0usize;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(10));
                    match peer.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => total += n,
                    }
                }
                total
            }
        });
        let started = Instant::now();
        let mut socket = BeforeDeadline {
            stream: &mut s.stream,
            deadline: started + Duration::from_millis(500),
        };
        assert_eq!(
            TransportError::from(socket.write_all(&frame).unwrap_err()),
            TransportError::Timeout
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(reader.join().unwrap() < frame.len());
        drop(s);

        // Control: a reader that keeps up receives the whole buffer within the deadline.
        let (mut s, mut peer) = pair(TcpConfig::default());
        let reader = std::thread::spawn(move || {
            let mut all = Vec::new();
            peer.read_to_end(&mut all).map(|_| all.len())
        });
        BeforeDeadline {
            stream: &mut s.stream,
            deadline: Instant::now() + Duration::from_secs(60),
        }
        .write_all(&frame)
        .unwrap();
        drop(s);
        assert_eq!(reader.join().unwrap().unwrap(), frame.len());
    }

    #[test]
    fn timeouts_must_be_positive_and_representable_as_deadlines() {
        for (read, write) in [
            (Duration::ZERO, Duration::from_secs(1)),
            (Duration::from_secs(1), Duration::ZERO),
            (Duration::MAX, Duration::from_secs(1)),
            (Duration::from_secs(1), Duration::from_secs(u64::MAX / 2)),
            (
                MAX_TIMEOUT + Duration::from_nanos(1),
                Duration::from_secs(1),
            ),
        ] {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let _peer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (ours, _) = listener.accept().unwrap();
            let config = TcpConfig {
                read_timeout: read,
                write_timeout: write,
                ..TcpConfig::default()
            };
            assert!(matches!(
                FramedStream::new(ours, config, false),
                Err(Error::ApiMisuse(ApiMisuse::InvalidConfig { .. }))
            ));
        }
        // The longest accepted timeouts work end to end (a deadline 30 days out).
        let (mut s, mut peer) = pair(TcpConfig {
            read_timeout: MAX_TIMEOUT,
            write_timeout: MAX_TIMEOUT,
            ..TcpConfig::default()
        });
        s.send(&Message::Abort(3)).unwrap();
        let mut frame = [0u8; 64];
        let n = peer.read(&mut frame).unwrap();
        peer.write_all(&frame[..n]).unwrap();
        assert_eq!(s.recv().unwrap(), Message::Abort(3));
    }

    #[test]
    fn the_socket_blocks_with_its_read_timeout_afterwards() {
        let config = TcpConfig {
            read_timeout: Duration::from_secs(10),
            ..TcpConfig::default()
        };
        let (mut s, mut peer) = pair(config);
        s.while_peer_silent(|| false).unwrap();
        assert_eq!(
            s.stream.read_timeout().unwrap(),
            Some(Duration::from_secs(10))
        );
        // A frame that arrives later is waited for (a non-blocking socket would fail at
        // once with WouldBlock).
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            let msg = Message::Abort(7);
            let body = msg.encode();
            peer.write_all(&(body.len() as u32).to_be_bytes()).unwrap();
            peer.write_all(&body).unwrap();
            peer
        });
        assert_eq!(s.recv().unwrap(), Message::Abort(7));
        drop(writer.join().unwrap());
    }
}
