//! Issue 29, "claims that match the code": the release ledger is part of the guest's
//! snapshot, so a resumed session goes on counting each row's releases (the budget and the
//! report cover the whole run), and a session with a label defence is not resumed from a
//! snapshot without it.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use fl_hetero_nn::config::{GradientPerturbation, LabelDefence};
use fl_hetero_nn::defences::{Condition, FeatureGuarantee, LabelGuarantee, RowLedger};
use fl_hetero_nn::error::ApiMisuse;
use fl_hetero_nn::scheme::{IdentityDecryptionKey, InsecureIdentityScheme};
use fl_hetero_nn::transport::memory::Pair;
use fl_hetero_nn::{Error, Guest, GuestEvent, Host, Matrix, Profile, ProtocolConfig, Purpose};
use rand::SeedableRng;
use rand::rngs::ChaCha20Rng;

const N: usize = 4;
const D_A: usize = 4;
const M: usize = 2;
const BUDGET: u64 = 2;

type IdPair = Pair<InsecureIdentityScheme, ChaCha20Rng>;

fn config(defended: bool) -> ProtocolConfig {
    let mut c = ProtocolConfig::new(Profile::Hardened, D_A, M);
    c.accepted_leaks.guest_recovers_exact_activations = true;
    if defended {
        let g = GradientPerturbation::new(1.0, 2.0, BUDGET).unwrap();
        c.label_defence = Some(LabelDefence::GradientPerturbation(g));
    } else {
        c.accepted_leaks.host_recovers_exact_error_and_labels = true;
    }
    c.min_key_bits = 64;
    c.max_batch_rows = N;
    c
}

/// One training step over the records `ids`; the guest's result of `backward`.
fn step(pair: &mut IdPair, ids: &[u64]) -> Result<(), Error> {
    let a = Matrix::from_fn(N, D_A, |i, j| ((i + j) % 3) as f64 * 0.5);
    let delta = Matrix::from_fn(N, M, |i, _| if i % 2 == 0 { 0.01 } else { -0.01 });
    pair.host
        .start_round(Purpose::Train, &a, ids, &mut pair.host_rng)
        .unwrap();
    pair.drive().unwrap();
    let r = pair.guest.backward(&delta, ids, &mut pair.guest_rng);
    if r.is_ok() {
        pair.drive().unwrap();
    }
    while pair.poll_guest_event().is_some() {}
    while pair.poll_host_event().is_some() {}
    r
}

/// A session that released records 0..4 twice (the budget) and 4..8 once, then both
/// parties' snapshots, the key and the configuration.
fn first_session(
    defended: bool,
) -> (
    ProtocolConfig,
    IdentityDecryptionKey,
    fl_hetero_nn::protocol::HostSnapshot,
    fl_hetero_nn::protocol::GuestSnapshot,
) {
    let config = config(defended);
    let mut rng = ChaCha20Rng::seed_from_u64(41);
    let dk = IdentityDecryptionKey::generate(2048, &mut rng).unwrap();
    let init = init(&config, 42);
    let mut pair = make_pair::<InsecureIdentityScheme>(config, dk.clone(), &init, 43);
    step(&mut pair, &[0, 1, 2, 3]).unwrap();
    step(&mut pair, &[4, 5, 6, 7]).unwrap();
    step(&mut pair, &[3, 2, 1, 0]).unwrap();
    assert!(pair.guest.is_idle() && pair.host.is_idle());
    (config, dk, pair.host.snapshot(), pair.guest.snapshot())
}

/// Both parties resumed from their snapshots, with the hello exchanged.
fn resumed(
    config: ProtocolConfig,
    dk: IdentityDecryptionKey,
    host: fl_hetero_nn::protocol::HostSnapshot,
    guest: fl_hetero_nn::protocol::GuestSnapshot,
) -> IdPair {
    let mut host_rng = ChaCha20Rng::seed_from_u64(51);
    let host = Host::<InsecureIdentityScheme>::resume(config, dk, host, &mut host_rng).unwrap();
    let guest = Guest::<InsecureIdentityScheme>::resume(config, guest).unwrap();
    let mut pair = Pair::new(host, guest, host_rng, ChaCha20Rng::seed_from_u64(52));
    pair.drive().unwrap();
    assert_eq!(
        pair.poll_guest_event(),
        Some(GuestEvent::SessionEstablished)
    );
    pair
}

fn refused_row_2(e: &Error) -> bool {
    matches!(
        e,
        Error::ApiMisuse(ApiMisuse::PrivacyBudgetExhausted {
            row_id: 2,
            releases: BUDGET,
            budget: BUDGET,
        })
    )
}

/// The ledger round-trips: after a resume, the releases before the snapshot still count
/// (the report says 2, not 0), new releases add to them, and the (budget + 1)-th release
/// of a row is refused across the resume. Control: a snapshot whose ledger was emptied
/// (what a resume without the ledger amounted to) lets that release through, so the
/// refusal comes from the saved ledger.
#[test]
fn the_release_ledger_survives_a_resume_and_the_budget_holds_across_it() {
    let (config, dk, host_snap, guest_snap) = first_session(true);
    let ledger = guest_snap.release_ledger.clone().unwrap();
    assert_eq!(ledger.count(2), 2);
    assert_eq!(ledger.count(5), 1);
    assert_eq!(ledger.most(), 2);
    assert_eq!(ledger.rows(), 8);
    // The ledger rebuilds from its counts (what an application saves).
    assert_eq!(RowLedger::from_counts(ledger.counts()), ledger);
    // Redacted Debug: the counters only.
    let shown = format!("{guest_snap:?}");
    assert!(
        shown.contains("release_ledger: saved") && !shown.contains("noisy_weight"),
        "{shown}"
    );

    let mut pair = resumed(config, dk.clone(), host_snap.clone(), guest_snap.clone());
    assert_eq!(pair.guest.round(), guest_snap.round);
    assert_eq!(pair.guest.training_steps(), 3);
    for r in [
        pair.guest.privacy_report(1e-5).unwrap(),
        pair.host.privacy_report(1e-5).unwrap(),
    ] {
        println!("after the resume: {r}");
        assert!(
            matches!(r.labels, LabelGuarantee::LabelDp { releases: 2, .. }),
            "{r}"
        );
        assert!(
            r.conditions()
                .contains(&Condition::OneSessionOrLedgerResume)
        );
    }
    // Fresh records still train, and are counted on top of the saved ledger.
    step(&mut pair, &[8, 9, 10, 11]).unwrap();
    let after = pair.guest.snapshot().release_ledger.unwrap();
    assert_eq!((after.count(8), after.count(2), after.rows()), (1, 2, 12));
    // A third release of record 2 is refused across the resume.
    let e = step(&mut pair, &[8, 9, 2, 12]).unwrap_err();
    println!("refused after the resume: {e}");
    assert!(refused_row_2(&e), "{e}");
    assert!(pair.guest.is_closed());

    // Control: the same resume with the ledger emptied releases record 2 a third time.
    let mut emptied = guest_snap;
    emptied.release_ledger = Some(RowLedger::default());
    let mut pair = resumed(config, dk, host_snap, emptied);
    step(&mut pair, &[8, 9, 10, 11]).unwrap();
    step(&mut pair, &[8, 9, 2, 12]).unwrap();
}

/// A snapshot without the ledger (older, or built by hand) is refused under gradient
/// perturbation, by the guest and by the host, with a typed error; without a label
/// defence that counts releases it resumes.
#[test]
fn a_snapshot_without_the_ledger_is_refused_under_a_label_defence() {
    let (config, dk, host_snap, guest_snap) = first_session(true);
    let mut without = guest_snap.clone();
    without.release_ledger = None;
    assert!(format!("{without:?}").contains("release_ledger: absent"));
    let e = Guest::<InsecureIdentityScheme>::resume(config, without).unwrap_err();
    println!("guest: {e}");
    assert!(
        matches!(e, Error::ApiMisuse(ApiMisuse::ResumeWithoutLedger { .. })),
        "{e}"
    );
    let mut host_without = host_snap;
    host_without.rows_trained = None;
    let e = Host::<InsecureIdentityScheme>::resume(
        config,
        dk,
        host_without,
        &mut ChaCha20Rng::seed_from_u64(1),
    )
    .unwrap_err();
    println!("host: {e}");
    assert!(
        matches!(e, Error::ApiMisuse(ApiMisuse::ResumeWithoutLedger { .. })),
        "{e}"
    );
    // A snapshot resumed under another label defence (here: ten times less noise, a
    // larger budget) is refused: its releases were made under the snapshot's noise.
    let mut cheaper = config;
    cheaper.label_defence = Some(LabelDefence::GradientPerturbation(
        GradientPerturbation::new(1.0, 20.0, 10 * BUDGET).unwrap(),
    ));
    let e = Guest::<InsecureIdentityScheme>::resume(cheaper, guest_snap.clone()).unwrap_err();
    assert!(
        matches!(e, Error::ApiMisuse(ApiMisuse::InvalidConfig { .. })),
        "{e}"
    );
    // Control: the same configuration resumes.
    assert!(Guest::<InsecureIdentityScheme>::resume(config, guest_snap.clone()).is_ok());
    // A snapshot of the wrong shape is a typed error too.
    let mut wrong = guest_snap;
    wrong.bias = Matrix::from_fn(1, M + 1, |_, _| num_bigint::BigInt::from(0));
    assert!(matches!(
        Guest::<InsecureIdentityScheme>::resume(config, wrong),
        Err(Error::ApiMisuse(ApiMisuse::ShapeMismatch { .. }))
    ));

    // Control: the undefended session resumes without a ledger (nothing counts releases).
    let (config, dk, mut host_snap, mut guest_snap) = first_session(false);
    guest_snap.release_ledger = None;
    host_snap.rows_trained = None;
    host_snap.rows_sent = None;
    let mut pair = resumed(config, dk, host_snap, guest_snap);
    step(&mut pair, &[0, 1, 2, 3]).unwrap();
}

/// The host's ledgers resume too: with EmbeddingDP its report goes on counting each
/// row's rounds after a resume (3 rounds before, 1 after: 4), and a snapshot without
/// `rows_sent` is refused.
#[test]
fn the_hosts_round_count_survives_a_resume_under_embedding_dp() {
    let mut config = config(true);
    config.embedding_dp = Some(fl_ldp::Epsilon::new(1.0).unwrap());
    let mut rng = ChaCha20Rng::seed_from_u64(61);
    let dk = IdentityDecryptionKey::generate(2048, &mut rng).unwrap();
    let init = init(&config, 62);
    let mut pair = make_pair::<InsecureIdentityScheme>(config, dk.clone(), &init, 63);
    step(&mut pair, &[0, 1, 2, 3]).unwrap();
    step(&mut pair, &[4, 5, 6, 7]).unwrap();
    step(&mut pair, &[3, 2, 1, 0]).unwrap();
    let (host_snap, guest_snap) = (pair.host.snapshot(), pair.guest.snapshot());
    let rounds = |pair: &IdPair| match pair.host.privacy_report(1e-5).unwrap().features {
        FeatureGuarantee::LocalDp { rounds, .. } => rounds,
        other => panic!("{other:?}"),
    };
    assert_eq!(rounds(&pair), 2);
    let mut without = host_snap.clone();
    without.rows_sent = None;
    let e =
        Host::<InsecureIdentityScheme>::resume(config, dk.clone(), without, &mut rng).unwrap_err();
    assert!(
        matches!(e, Error::ApiMisuse(ApiMisuse::ResumeWithoutLedger { .. })),
        "{e}"
    );
    let mut pair = resumed(config, dk, host_snap, guest_snap);
    assert_eq!(rounds(&pair), 2);
    step(&mut pair, &[0, 8, 9, 10]).unwrap_err();
    // The guest refused record 0's third release; the host had sent the row: 3 rounds.
    assert_eq!(rounds(&pair), 3);
}
