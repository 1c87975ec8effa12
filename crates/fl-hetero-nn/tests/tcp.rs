//! The TCP transport over loopback: a full session, bounded frames, timeouts.
#![cfg(feature = "transport")]
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use common::*;
use fl_hetero_nn::error::{Error, TransportError};
use fl_hetero_nn::scheme::{IdentityDecryptionKey, InsecureIdentityScheme};
use fl_hetero_nn::transport::tcp::{FramedStream, TcpConfig, next_guest_event};
use fl_hetero_nn::{Guest, GuestEvent, Host, PlainInteractiveLayer, Profile, ProtocolConfig};
use rand::SeedableRng;
use rand::rngs::ChaCha20Rng;

fn loopback(config: TcpConfig) -> (FramedStream, FramedStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let client = TcpStream::connect(addr).unwrap();
    let (server, _) = listener.accept().unwrap();
    (
        FramedStream::new(server, config, true).unwrap(),
        FramedStream::new(client, config, false).unwrap(),
    )
}

#[test]
fn a_session_over_tcp_matches_the_reference() {
    let mut c =
        ProtocolConfig::new(Profile::Hardened, 3, 2).accepting_exact_error_and_activation_leaks();
    c.min_key_bits = 64;
    let init = init(&c, 1);
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    let dk = IdentityDecryptionKey::generate(1024, &mut rng).unwrap();
    let mut host =
        Host::<InsecureIdentityScheme>::new(c, dk, Some(&init.host_share), &mut rng).unwrap();
    let mut guest = Guest::<InsecureIdentityScheme>::new(c, &init.bias, &init.guest_share).unwrap();
    let mut reference = PlainInteractiveLayer::new(c, &init.weight, &init.bias).unwrap();
    let (mut hs, mut gs) = loopback(TcpConfig::default());
    let mut data_rng = ChaCha20Rng::seed_from_u64(3);
    let batches: Vec<_> = (0..3)
        .map(|_| {
            (
                random_matrix(&mut data_rng, 4, 3, 0.0, 2.0),
                random_matrix(&mut data_rng, 4, 2, -0.1, 0.1),
            )
        })
        .collect();
    let host_batches = batches.clone();
    let host_thread = std::thread::spawn(move || {
        let mut rng = ChaCha20Rng::seed_from_u64(4);
        let mut grads = Vec::new();
        fl_hetero_nn::transport::tcp::flush_host(&mut host, &mut hs).unwrap();
        for (a, _) in &host_batches {
            grads.push(host_train_round_over_tcp(&mut host, &mut hs, a, &mut rng));
        }
        (grads, hs.stats)
    });
    let mut grng = ChaCha20Rng::seed_from_u64(5);
    assert_eq!(
        next_guest_event(&mut guest, &mut gs, &mut grng).unwrap(),
        GuestEvent::SessionEstablished
    );
    let mut expected_grads = Vec::new();
    for (a, delta) in &batches {
        let GuestEvent::Forward { exact, .. } =
            next_guest_event(&mut guest, &mut gs, &mut grng).unwrap()
        else {
            panic!("expected the forward output")
        };
        assert_eq!(exact, reference.forward(a).unwrap().1);
        guest.backward(delta, &ids(4), &mut grng).unwrap();
        assert!(matches!(
            next_guest_event(&mut guest, &mut gs, &mut grng).unwrap(),
            GuestEvent::BackwardDone { .. }
        ));
        expected_grads.push(reference.backward(delta).unwrap().1);
    }
    let (grads, stats) = host_thread.join().unwrap();
    assert_eq!(grads, expected_grads);
    assert_eq!(stats.messages(), 1 + 3 * 7, "hello + 7 messages per step");
    assert_eq!(stats, gs.stats, "both ends count the same traffic");
}

#[test]
fn oversized_frames_are_refused_before_allocation() {
    let mut config = TcpConfig::default();
    config.max_frame_bytes = 1024;
    let (mut a, b) = loopback(config);
    drop(b);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut raw = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    let mut framed = FramedStream::new(server, config, true).unwrap();
    raw.write_all(&u32::MAX.to_be_bytes()).unwrap();
    assert_eq!(
        framed.recv().unwrap_err(),
        Error::Transport(TransportError::FrameTooLarge {
            len: u64::from(u32::MAX),
            max: 1024
        })
    );
    // Sending a frame above the limit is refused too.
    let big = fl_hetero_nn::Message::Hello(fl_hetero_nn::message::Hello {
        config: ProtocolConfig::new(Profile::Hardened, 1, 1)
            .accepting_exact_error_and_activation_leaks(),
        public_key: vec![7; 4096],
        key_proof: Vec::new(),
    });
    assert!(matches!(
        a.send(&big),
        Err(Error::Transport(TransportError::FrameTooLarge { .. }))
    ));
    // A closed peer is reported as such.
    assert!(matches!(
        a.recv(),
        Err(Error::Transport(TransportError::Closed))
    ));
}

#[test]
fn a_silent_peer_times_out() {
    let mut config = TcpConfig::default();
    config.read_timeout = Duration::from_millis(200);
    let (mut a, _b) = loopback(config);
    assert_eq!(
        a.recv().unwrap_err(),
        Error::Transport(TransportError::Timeout)
    );
    // A truncated frame (header, then silence) times out as well instead of hanging.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut raw = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    let mut framed = FramedStream::new(server, config, true).unwrap();
    raw.write_all(&100u32.to_be_bytes()).unwrap();
    raw.write_all(b"FLHN").unwrap();
    assert_eq!(
        framed.recv().unwrap_err(),
        Error::Transport(TransportError::Timeout)
    );
}
