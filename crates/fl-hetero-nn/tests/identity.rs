//! Fast protocol tests on the insecure identity scheme: the algebra of both profiles, with
//! and without packing, over many steps.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use fl_hetero_nn::scheme::{IdentityDecryptionKey, InsecureIdentityScheme};
use fl_hetero_nn::{PlainInteractiveLayer, Profile, ProtocolConfig};
use rand::SeedableRng;
use rand::rngs::ChaCha20Rng;

fn run(profile: Profile, packing: bool, d_a: usize, m: usize, n: usize) {
    let mut config =
        ProtocolConfig::new(profile, d_a, m).accepting_exact_error_and_activation_leaks();
    config.packing = packing;
    config.min_key_bits = 64;
    config.learning_rate = 0.15;
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let dk = IdentityDecryptionKey::generate(2048, &mut rng).unwrap();
    let init = init(&config, 1);
    let mut pair = make_pair::<InsecureIdentityScheme>(config, dk, &init, 2);
    let mut reference = PlainInteractiveLayer::new(config, &init.weight, &init.bias).unwrap();
    check_against_reference(&mut pair, &mut reference, 6, n, 3);
}

#[test]
fn invariants_hold_exactly_fate_faithful() {
    run(Profile::FateFaithful, false, 3, 2, 5);
}

#[test]
fn invariants_hold_exactly_hardened_unpacked() {
    run(Profile::Hardened, false, 3, 2, 5);
}

#[test]
fn invariants_hold_exactly_hardened_packed() {
    run(Profile::Hardened, true, 7, 3, 11);
    run(Profile::Hardened, true, 2, 2, 40);
}
