//! fl-hetero-nn: message decoding and both state machines fed arbitrary message sequences.
//!
//! The first byte picks the scenario; the rest is split into frames (2-byte length
//! prefixes). Decoding must be total, and Host and Guest must answer every frame with a
//! state change or a typed error, never a panic. Mode bit 6 picks the scheme: the
//! explicitly insecure identity scheme (deep states quickly) or the real Paillier scheme
//! with a 1024-bit fixture key (real ciphertext validation, decryption and — with mode bit 7,
//! packing — packed ciphertext decoding and unpacking). Some frames are taken from a real
//! session and mutated, so that the fuzzer starts past the hello and shape checks.
#![no_main]

use fl_hetero_nn::message::Message;
use fl_hetero_nn::scheme::{HomomorphicScheme, IdentityDecryptionKey, InsecureIdentityScheme};
use fl_hetero_nn::{Encryption, Guest, Host, Matrix, Paillier, Profile, ProtocolConfig, Purpose};
use libfuzzer_sys::fuzz_target;
use rand::{SeedableRng, rngs::ChaCha8Rng};
use std::sync::OnceLock;

/// A fixed 1024-bit test key (the primes of fl-hetero-nn's test fixture), rebuilt for every
/// input because decryption keys are deliberately not `Clone`.
fn paillier_key() -> fl_paillier::DecryptionKey {
    const P: &str = "aa1d5942f37ecf6339ef143c2c61f29d3d3db13546ce3c96d5a63c0795e88705c28ceb56ceaeba0de34e0b8f4f88169b826ddfb0f3efccdaf99c9f3b13bb3a05";
    const Q: &str = "e48f2833eb00b8d1d96034ef2216600d709a431dc6fe918c1f8a9666fec5358143d7fdf87bcde609d0b734469d8a5745bcade313ecfbb741882231d7619ef935";
    static PRIMES: OnceLock<(fl_paillier::BigUint, fl_paillier::BigUint)> = OnceLock::new();
    let (p, q) = PRIMES.get_or_init(|| {
        let parse = |h: &str| fl_paillier::BigUint::parse_bytes(h.as_bytes(), 16);
        match (parse(P), parse(Q)) {
            (Some(p), Some(q)) => (p, q),
            _ => panic!("fixture primes"),
        }
    });
    match fl_paillier::DecryptionKey::from_primes(p, q) {
        Ok(k) => k,
        Err(e) => panic!("fixture key: {e}"),
    }
}

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
    if mode & 64 == 0 {
        let mut rng = ChaCha8Rng::seed_from_u64(u64::from(mode));
        if let Ok(dk) = IdentityDecryptionKey::generate(512, &mut rng) {
            session::<InsecureIdentityScheme>(mode, rest, dk, rng);
        }
    } else {
        let rng = ChaCha8Rng::seed_from_u64(u64::from(mode));
        session::<Paillier>(mode, rest, paillier_key(), rng);
    }
});

/// 2. Both state machines of scheme `S` fed the frames of `rest`.
fn session<S: HomomorphicScheme>(mode: u8, rest: &[u8], dk: S::DecryptionKey, mut rng: ChaCha8Rng) {
    let profile = if mode & 1 == 0 {
        Profile::Hardened
    } else {
        Profile::FateFaithful
    };
    let mut c = ProtocolConfig::new(profile, 2, 2).accepting_exact_error_and_activation_leaks();
    c.min_key_bits = 64;
    c.max_batch_rows = 8;
    // Mode bits 4–5 pick the encryption (the host's; the guest re-randomises with sⁿ in all).
    c.encryption = match (mode >> 4) & 3 {
        0 => Encryption::Textbook,
        1 => Encryption::KeyOwnerCrt,
        _ => Encryption::Djn,
    };
    c.packing = mode & 128 != 0;
    let w = Matrix::filled(2, 2, 0.25);
    // Hardened: each party brings its own share of W₀ (here the same values); FateFaithful:
    // the guest holds W₀.
    let hw = (profile == Profile::Hardened).then_some(&w);
    let gw = &w;
    let Ok(mut host) = Host::<S>::new(c, dk, hw, &mut rng) else {
        return;
    };
    let Ok(mut guest) = Guest::<S>::new(c, &[0.1, 0.2], gw) else {
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
        if host
            .start_round(Purpose::Train, &a, &[0, 1, 2], &mut rng)
            .is_ok()
        {
            while let Some(m) = host.poll_message() {
                let _ = guest.handle_frame(&m.encode(), &mut rng);
            }
        }
    }
    // Arbitrary frames to either party (mode bit 2 picks the first recipient).
    for (i, f) in frames(rest).into_iter().enumerate() {
        if (i + usize::from(mode >> 2)) % 2 == 0 {
            let _ = guest.handle_frame(f, &mut rng);
            let _ = guest.backward(&Matrix::filled(3, 2, 0.01), &[0, 1, 2], &mut rng);
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
}
