//! fl-hetero-nn: message decoding and both state machines fed arbitrary message sequences.
//!
//! The first byte picks the scenario; the rest is split into frames (2-byte length
//! prefixes). Decoding must be total, and Host and Guest (on the explicitly insecure
//! identity scheme, so that deep states are reachable quickly) must answer every frame with
//! a state change or a typed error, never a panic. Some frames are taken from a real session
//! and mutated, so that the fuzzer starts past the hello and shape checks.
#![no_main]

use fl_hetero_nn::message::Message;
use fl_hetero_nn::scheme::{IdentityDecryptionKey, InsecureIdentityScheme};
use fl_hetero_nn::{Encryption, Guest, Host, Matrix, Profile, ProtocolConfig, Purpose};
use libfuzzer_sys::fuzz_target;
use rand::{SeedableRng, rngs::ChaCha8Rng};

fn frames(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    while rest.len() >= 2 && out.len() < 16 {
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]])).min(rest.len() - 2);
        out.push(&rest[2..2 + len]);
        rest = &rest[2 + len..];
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    // 1. Decoding is total and round-trips.
    if let Ok(m) = Message::decode(rest) {
        assert_eq!(Message::decode(&m.encode()).ok(), Some(m));
    }
    let profile = if mode & 1 == 0 {
        Profile::Hardened
    } else {
        Profile::FateFaithful
    };
    let mut c = ProtocolConfig::new(profile, 2, 2);
    c.min_key_bits = 64;
    c.max_batch_rows = 8;
    // Mode bits 4–5 pick the encryption (DJN adds the fixed base to the hello).
    c.encryption = match (mode >> 4) & 3 {
        0 => Encryption::Textbook,
        1 => Encryption::KeyOwnerCrt,
        _ => Encryption::Djn,
    };
    let mut rng = ChaCha8Rng::seed_from_u64(u64::from(mode));
    let Ok(dk) = IdentityDecryptionKey::generate(512, &mut rng) else {
        return;
    };
    let w = Matrix::filled(2, 2, 0.25);
    // Hardened: each party brings its own share of W₀ (here the same values); FateFaithful:
    // the guest holds W₀.
    let hw = (profile == Profile::Hardened).then_some(&w);
    let gw = &w;
    let Ok(mut host) = Host::<InsecureIdentityScheme>::new(c, dk, hw, &mut rng) else {
        return;
    };
    let Ok(mut guest) = Guest::<InsecureIdentityScheme>::new(c, &[0.1, 0.2], gw) else {
        return;
    };
    // A genuine prefix: hello, and (mode bit 1) a genuine first Activations message.
    let mut host_out: Vec<Vec<u8>> = Vec::new();
    while let Some(m) = host.poll_message() {
        host_out.push(m.encode());
    }
    if mode & 2 != 0 {
        for f in &host_out {
            let _ = guest.handle_frame(f, &mut rng);
        }
        let a = Matrix::filled(3, 2, 0.5);
        if host.start_round(Purpose::Train, &a, &mut rng).is_ok() {
            while let Some(m) = host.poll_message() {
                let _ = guest.handle_frame(&m.encode(), &mut rng);
            }
        }
    }
    // 2. Arbitrary frames to either party (mode bit 2 picks the first recipient).
    for (i, f) in frames(rest).into_iter().enumerate() {
        if (i + usize::from(mode >> 2)) % 2 == 0 {
            let _ = guest.handle_frame(f, &mut rng);
            let _ = guest.backward(&Matrix::filled(3, 2, 0.01), &mut rng);
        } else {
            let _ = host.handle_frame(f, &mut rng);
        }
        while let Some(m) = guest.poll_message() {
            let _ = host.handle_frame(&m.encode(), &mut rng);
        }
        while let Some(m) = host.poll_message() {
            let _ = guest.handle_frame(&m.encode(), &mut rng);
        }
    }
});
