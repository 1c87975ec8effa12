//! DP-SGD on the guest's side (issue 29) through the two-party protocol: a split model on
//! breast trains with `Guest::backward_dp_sgd`, both parties report the DP-SGD guarantee
//! counted per row id, the budget is enforced across epochs, and the two step calls refuse
//! the wrong configuration without closing the session.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fl_hetero_nn::config::{DpSgd, LabelDefence, ProtocolConfig, RandomizedLabels};
use fl_hetero_nn::data::{VerticalData, parse_csv};
use fl_hetero_nn::defences::LabelGuarantee;
use fl_hetero_nn::error::ApiMisuse;
use fl_hetero_nn::scheme::{IdentityDecryptionKey, InsecureIdentityScheme};
use fl_hetero_nn::split::{
    GuestModel, HostModel, HostPart, SplitConfig, SplitInit, TrainingLabels, evaluate, train_epoch,
    train_epoch_with_error_labels,
};
use fl_hetero_nn::transport::memory::Pair;
use fl_hetero_nn::{Error, Guest, GuestEvent, Host, Matrix, Profile, Purpose};
use rand::SeedableRng;
use rand::rngs::ChaCha20Rng;

const GUEST: &str = include_str!("../data/breast_hetero_guest.csv");
const HOST: &str = include_str!("../data/breast_hetero_host.csv");

fn pair(cfg: &SplitConfig, init: &SplitInit) -> Pair<InsecureIdentityScheme, ChaCha20Rng> {
    let pc = cfg.protocol_config(Profile::Hardened);
    pair_with(pc, pc, init)
}

/// The test's public settings on a party's configuration.
fn tweak(mut pc: ProtocolConfig) -> ProtocolConfig {
    // This test is about the labels; the host's features are not defended here.
    pc.accepted_leaks.guest_recovers_exact_activations = true;
    pc.min_key_bits = 64;
    pc.activation_bound_bits = 16;
    pc.weight_bound_bits = 16;
    pc.delta_bound_bits = 8;
    pc
}

fn pair_with(
    host_pc: ProtocolConfig,
    guest_pc: ProtocolConfig,
    init: &SplitInit,
) -> Pair<InsecureIdentityScheme, ChaCha20Rng> {
    let (pc, guest_pc) = (tweak(host_pc), tweak(guest_pc));
    let mut host_rng = ChaCha20Rng::seed_from_u64(11);
    let dk = IdentityDecryptionKey::generate(2048, &mut host_rng).unwrap();
    let host = Host::<InsecureIdentityScheme>::new(
        pc,
        dk,
        Some(&init.host_part_host_share),
        &mut host_rng,
    )
    .unwrap();
    establish(host, new_guest(guest_pc, init), host_rng, 12)
}

fn new_guest(pc: ProtocolConfig, init: &SplitInit) -> Guest<InsecureIdentityScheme> {
    Guest::<InsecureIdentityScheme>::new(pc, &init.host_part_bias, &init.host_part_guest_share)
        .unwrap()
}

/// The pair after the hello.
fn establish(
    host: Host<InsecureIdentityScheme>,
    guest: Guest<InsecureIdentityScheme>,
    host_rng: ChaCha20Rng,
    guest_seed: u64,
) -> Pair<InsecureIdentityScheme, ChaCha20Rng> {
    let mut p = Pair::new(
        host,
        guest,
        host_rng,
        ChaCha20Rng::seed_from_u64(guest_seed),
    );
    p.drive().unwrap();
    assert_eq!(p.poll_guest_event(), Some(GuestEvent::SessionEstablished));
    p
}

fn breast() -> VerticalData {
    VerticalData::align(
        parse_csv(GUEST, true).unwrap(),
        parse_csv(HOST, false).unwrap(),
    )
    .unwrap()
}

#[test]
fn dp_sgd_trains_through_the_protocol_and_both_parties_report_it() {
    let data = breast();
    let mut cfg = SplitConfig::hetero_nn_binary_0();
    let epochs = 3;
    cfg.epochs = epochs;
    // Generous ε: the test checks the plumbing, the table measures utility.
    let dp = DpSgd::for_target(0.5, 64.0, 1e-5, 0.5, epochs as u64).unwrap();
    cfg.dp_sgd = Some(dp);
    let init = SplitInit::new(&cfg, 3).unwrap();
    let mut p = pair(&cfg, &init);
    let mut host = HostModel::new(&init);
    let mut guest = GuestModel::new(&init, &cfg);
    for _ in 0..epochs {
        let loss = train_epoch(&cfg, &data, &mut host, &mut guest, &mut p).unwrap();
        assert!(loss.is_finite());
    }
    let (auc, _, _) = evaluate(&cfg, &data, &mut host, &mut guest, &mut p).unwrap();
    assert!(auc.is_finite());
    let want = dp.guarantee(epochs as u64, 1e-5).unwrap().epsilon;
    assert!(want <= 64.0);
    for r in [
        p.guest.privacy_report(1e-5).unwrap(),
        p.host.privacy_report(1e-5).unwrap(),
    ] {
        println!("{r}");
        assert!(
            matches!(r.labels, LabelGuarantee::DpSgd { releases, budget, epsilon, .. }
                if releases == epochs as u64 && budget == epochs as u64 && epsilon == want),
            "{r}"
        );
    }
    // A fourth epoch takes every row past the budget: refused before anything is
    // computed, and the session closes.
    let e = train_epoch(&cfg, &data, &mut host, &mut guest, &mut p).unwrap_err();
    assert!(
        matches!(
            e,
            Error::ApiMisuse(ApiMisuse::PrivacyBudgetExhausted { budget: 3, .. })
        ),
        "{e}"
    );
    assert!(p.guest.is_closed());
}

#[test]
fn the_step_calls_refuse_the_other_configuration_and_keep_the_session() {
    let mut cfg = SplitConfig::hetero_nn_binary_0();
    cfg.dp_sgd = Some(DpSgd::new(1.0, 2.0, 0.5, 10).unwrap());
    let init = SplitInit::new(&cfg, 4).unwrap();
    let mut p = pair(&cfg, &init);
    let n = 4;
    let a = Matrix::from_fn(n, cfg.bottom_width, |i, j| 0.1 * (i + j) as f64);
    p.host
        .start_round(Purpose::Train, &a, &[0, 1, 2, 3], &mut p.host_rng)
        .unwrap();
    p.drive().unwrap();
    let delta = Matrix::zeros(n, cfg.interactive_width);
    let e = p
        .guest
        .backward(&delta, &[0, 1, 2, 3], &mut p.guest_rng)
        .unwrap_err();
    assert!(
        matches!(e, Error::ApiMisuse(ApiMisuse::WrongState { .. })),
        "{e}"
    );
    assert!(!p.guest.is_closed() && p.guest.awaits_backward());
    // Control: the DP-SGD step goes through.
    let batch = fl_hetero_nn::dp_sgd::DpSgdBatch {
        predictions: vec![0.5; n],
        labels: vec![1.0, 0.0, 1.0, 0.0],
        guest_direction: Matrix::from_fn(n, 3, |_, _| 0.1),
        error_direction: Matrix::from_fn(n, cfg.interactive_width, |_, _| 0.1),
        error_labels: None,
    };
    let g = p
        .guest
        .backward_dp_sgd(&batch, &[0, 1, 2, 3], &mut p.guest_rng)
        .unwrap();
    assert_eq!(g.len(), 3);
    // And a guest without DP-SGD refuses the DP-SGD step.
    let mut plain = SplitConfig::hetero_nn_binary_0();
    plain.accepted_leaks =
        fl_hetero_nn::config::AcceptedLeaks::EXACT_ERROR_AND_ACTIVATIONS_RECOVERABLE;
    let init = SplitInit::new(&plain, 5).unwrap();
    let mut p = pair(&plain, &init);
    assert!(!matches!(
        p.guest.config().label_defence,
        Some(LabelDefence::DpSgd(_))
    ));
    p.host
        .start_round(Purpose::Train, &a, &[0, 1, 2, 3], &mut p.host_rng)
        .unwrap();
    p.drive().unwrap();
    let e = p
        .guest
        .backward_dp_sgd(&batch, &[0, 1, 2, 3], &mut p.guest_rng)
        .unwrap_err();
    assert!(
        matches!(e, Error::ApiMisuse(ApiMisuse::WrongState { .. })),
        "{e}"
    );
    assert!(!p.guest.is_closed());
}

/// DP-SGD with randomised error labels through the protocol: the guest's configuration
/// needs the labels' evidence (the host's announcement is refused), training needs the
/// randomised labels, and both parties report the composed guarantee with the labels' ε.
#[test]
fn dp_sgd_with_randomised_error_labels_trains_through_the_protocol() {
    let data = breast();
    let mut cfg = SplitConfig::hetero_nn_binary_0();
    let epochs = 3;
    cfg.epochs = epochs;
    let rr = fl_ldp::Epsilon::new(2.0).unwrap();
    cfg.label_dp = Some(fl_hetero_nn::split::LabelDefence::RandomizedResponse(rr));
    let dp = DpSgd::for_target(0.5, 64.0, 1e-5, 1.0, epochs as u64)
        .unwrap()
        .with_randomized_error_labels(RandomizedLabels::announced_by_guest(rr), 0.25)
        .unwrap();
    cfg.dp_sgd = Some(dp);
    let labels = cfg
        .privatize_labels(&data.labels, &mut ChaCha20Rng::seed_from_u64(5))
        .unwrap();
    let init = SplitInit::new(&cfg, 3).unwrap();
    let host_pc = cfg.protocol_config(Profile::Hardened);
    // The host's announcement is not evidence: a guest refuses it.
    let e = Guest::<InsecureIdentityScheme>::new(
        tweak(host_pc),
        &init.host_part_bias,
        &init.host_part_guest_share,
    )
    .unwrap_err();
    assert!(
        matches!(e, Error::ApiMisuse(ApiMisuse::UndefendedLeak { .. })),
        "{e}"
    );
    // Labels randomised at another ε, or not at all: no guest configuration.
    let mut other = cfg;
    other.label_dp = Some(fl_hetero_nn::split::LabelDefence::RandomizedResponse(
        fl_ldp::Epsilon::new(3.0).unwrap(),
    ));
    let other_labels = other
        .privatize_labels(&data.labels, &mut ChaCha20Rng::seed_from_u64(5))
        .unwrap();
    assert!(
        cfg.guest_protocol_config(Profile::Hardened, &other_labels)
            .is_err()
    );
    let mut unrandomised = cfg;
    unrandomised.label_dp = None;
    let true_labels = unrandomised
        .privatize_labels(&data.labels, &mut ChaCha20Rng::seed_from_u64(5))
        .unwrap();
    assert!(
        cfg.guest_protocol_config(Profile::Hardened, &true_labels)
            .is_err()
    );
    assert!(
        unrandomised
            .guest_protocol_config(Profile::Hardened, &true_labels)
            .is_err()
    );

    let guest_pc = cfg
        .guest_protocol_config(Profile::Hardened, &labels)
        .unwrap();
    let mut p = pair_with(host_pc, guest_pc, &init);
    let mut host = HostModel::new(&init);
    let mut guest = GuestModel::new(&init, &cfg);
    for _ in 0..epochs {
        let loss = train_epoch_with_error_labels(
            &cfg,
            &data,
            Some(&labels),
            &mut host,
            &mut guest,
            &mut p,
        )
        .unwrap();
        assert!(loss.is_finite());
    }
    let (auc, _, _) = evaluate(&cfg, &data, &mut host, &mut guest, &mut p).unwrap();
    assert!(auc.is_finite());
    let gaussian = DpSgd::for_target(0.5, 64.0, 1e-5, 1.0, epochs as u64)
        .unwrap()
        .guarantee(epochs as u64, 1e-5)
        .unwrap()
        .epsilon;
    let want = dp.guarantee(epochs as u64, 1e-5).unwrap().epsilon;
    assert!(
        want > gaussian && want <= gaussian + 2.0 + 1e-9,
        "{want} {gaussian}"
    );
    for r in [
        p.guest.privacy_report(1e-5).unwrap(),
        p.host.privacy_report(1e-5).unwrap(),
    ] {
        println!("{r}");
        assert!(
            matches!(r.labels, LabelGuarantee::DpSgd { releases, epsilon, error_labels_epsilon: Some(e), .. }
                if releases == epochs as u64 && epsilon == want && e == 2.0),
            "{r}"
        );
        assert!(r.to_string().contains("randomised once at ε = 2"), "{r}");
    }
}

/// Training a DP-SGD run with randomised error labels without those labels is a typed
/// error from the loop, before anything leaves the guest; a caller that drives the step
/// itself without them gets a typed error from the guest's step (control: with them, the
/// step runs).
#[test]
fn randomised_error_labels_must_be_passed_to_the_step() {
    let data = breast();
    let mut cfg = SplitConfig::hetero_nn_binary_0();
    cfg.epochs = 1;
    let rr = fl_ldp::Epsilon::new(2.0).unwrap();
    cfg.label_dp = Some(fl_hetero_nn::split::LabelDefence::RandomizedResponse(rr));
    cfg.dp_sgd = Some(
        DpSgd::new(0.5, 2.0, 1.0, 10)
            .unwrap()
            .with_randomized_error_labels(RandomizedLabels::announced_by_guest(rr), 1.0)
            .unwrap(),
    );
    let labels = cfg
        .privatize_labels(&data.labels, &mut ChaCha20Rng::seed_from_u64(6))
        .unwrap();
    let init = SplitInit::new(&cfg, 4).unwrap();
    let guest_pc = cfg
        .guest_protocol_config(Profile::Hardened, &labels)
        .unwrap();
    let mut p = pair_with(cfg.protocol_config(Profile::Hardened), guest_pc, &init);
    let (mut host, mut guest) = (HostModel::new(&init), GuestModel::new(&init, &cfg));
    let sent_before = p.traffic();
    let e = train_epoch(&cfg, &data, &mut host, &mut guest, &mut p).unwrap_err();
    assert!(
        matches!(e, Error::ApiMisuse(ApiMisuse::InvalidConfig { .. })),
        "{e}"
    );
    assert_eq!(p.traffic(), sent_before, "nothing sent before the refusal");
    // The step itself, driven without the labels: the guest refuses the batch.
    let (lo, hi) = cfg.batches(data.len())[0];
    let idx: Vec<usize> = (lo..hi).collect();
    let ids = data.batch_ids(lo, hi).unwrap();
    let a = host.forward(&data.host.select_rows(&idx).unwrap()).unwrap();
    let gp = guest
        .start_forward(&data.guest.select_rows(&idx).unwrap())
        .unwrap();
    let z = p.forward(Purpose::Train, &a, ids).unwrap();
    let pred = guest.finish_forward(&gp, &z).unwrap();
    let batch = guest.dp_sgd_batch(&pred, &data.labels[lo..hi]).unwrap();
    let e = p.backward_dp_sgd(&batch, ids).unwrap_err();
    assert!(
        matches!(e, Error::ApiMisuse(ApiMisuse::InvalidData { .. })),
        "{e}"
    );
    let mut p = pair_with(cfg.protocol_config(Profile::Hardened), guest_pc, &init);
    let (mut host, mut guest) = (HostModel::new(&init), GuestModel::new(&init, &cfg));
    train_epoch_with_error_labels(&cfg, &data, Some(&labels), &mut host, &mut guest, &mut p)
        .unwrap();
}

/// A breast split with DP-SGD and randomised error labels at ε_RR = 2 (generous Gaussian
/// ε: these tests check the bookkeeping), its randomised labels from `seed`.
fn error_labels_setup(seed: u64) -> (VerticalData, SplitConfig, TrainingLabels, SplitInit) {
    let data = breast();
    let mut cfg = SplitConfig::hetero_nn_binary_0();
    cfg.epochs = 2;
    let rr = fl_ldp::Epsilon::new(2.0).unwrap();
    cfg.label_dp = Some(fl_hetero_nn::split::LabelDefence::RandomizedResponse(rr));
    cfg.dp_sgd = Some(
        DpSgd::for_target(0.5, 8.0, 1e-5, 1.0, 4)
            .unwrap()
            .with_randomized_error_labels(RandomizedLabels::announced_by_guest(rr), 0.25)
            .unwrap(),
    );
    let labels = cfg
        .privatize_labels(&data.labels, &mut ChaCha20Rng::seed_from_u64(seed))
        .unwrap();
    let init = SplitInit::new(&cfg, 3).unwrap();
    (data, cfg, labels, init)
}

/// One epoch through the protocol, then the guest's snapshot and a resumed pair under
/// `guest_pc` (the host resumed from its own snapshot); `Err` if the guest refuses to
/// resume.
fn epoch_then_resume(
    data: &VerticalData,
    cfg: &SplitConfig,
    labels: &TrainingLabels,
    init: &SplitInit,
    guest_pc: ProtocolConfig,
) -> Result<Pair<InsecureIdentityScheme, ChaCha20Rng>, Error> {
    let host_pc = tweak(cfg.protocol_config(Profile::Hardened));
    let mut host_rng = ChaCha20Rng::seed_from_u64(11);
    let dk = IdentityDecryptionKey::generate(2048, &mut host_rng).unwrap();
    let host = Host::<InsecureIdentityScheme>::new(
        host_pc,
        dk.clone(),
        Some(&init.host_part_host_share),
        &mut host_rng,
    )
    .unwrap();
    let first_pc = tweak(
        cfg.guest_protocol_config(Profile::Hardened, labels)
            .unwrap(),
    );
    let mut p = establish(host, new_guest(first_pc, init), host_rng, 12);
    let (mut host_model, mut guest_model) = (HostModel::new(init), GuestModel::new(init, cfg));
    train_epoch_with_error_labels(
        cfg,
        data,
        Some(labels),
        &mut host_model,
        &mut guest_model,
        &mut p,
    )
    .unwrap();
    let (hs, gs) = (p.host.snapshot(), p.guest.snapshot());
    let mut host_rng = ChaCha20Rng::seed_from_u64(51);
    let host = Host::<InsecureIdentityScheme>::resume(host_pc, dk, hs, &mut host_rng).unwrap();
    let guest = Guest::<InsecureIdentityScheme>::resume(tweak(guest_pc), gs)?;
    Ok(establish(host, guest, host_rng, 52))
}

/// The randomised error labels are drawn once per record, across a resume too: a resumed
/// guest refuses labels randomised afresh (ε_RR would be paid twice but reported once);
/// control: the same labels go on training.
#[test]
fn a_resumed_guest_refuses_a_fresh_randomisation_of_the_error_labels() {
    let (data, cfg, labels, init) = error_labels_setup(5);
    let pc = cfg
        .guest_protocol_config(Profile::Hardened, &labels)
        .unwrap();
    let mut p = epoch_then_resume(&data, &cfg, &labels, &init, pc).unwrap();
    let (mut host, mut guest) = (HostModel::new(&init), GuestModel::new(&init, &cfg));
    train_epoch_with_error_labels(&cfg, &data, Some(&labels), &mut host, &mut guest, &mut p)
        .unwrap();
    let r = p.guest.privacy_report(1e-5).unwrap();
    assert!(
        matches!(r.labels, LabelGuarantee::DpSgd { releases: 2, .. }),
        "{r}"
    );
    // Fresh coins, the same ε: valid evidence, but other labels for the same records.
    let (_, _, fresh, _) = error_labels_setup(99);
    assert_ne!(fresh.labels(), labels.labels());
    let pc = cfg
        .guest_protocol_config(Profile::Hardened, &fresh)
        .unwrap();
    let mut p = epoch_then_resume(&data, &cfg, &labels, &init, pc).unwrap();
    let (mut host, mut guest) = (HostModel::new(&init), GuestModel::new(&init, &cfg));
    let e = train_epoch_with_error_labels(&cfg, &data, Some(&fresh), &mut host, &mut guest, &mut p)
        .unwrap_err();
    assert!(
        matches!(e, Error::ApiMisuse(ApiMisuse::InvalidData { .. })),
        "{e}"
    );
}

/// A DP-SGD snapshot cannot be resumed under labels randomised once (its Gaussian
/// releases would stop being priced); nor a snapshot without the error labels' record.
#[test]
fn a_dp_sgd_snapshot_keeps_its_defence_and_its_error_labels() {
    let (data, cfg, labels, init) = error_labels_setup(5);
    let mut label_dp_only = cfg;
    label_dp_only.dp_sgd = None;
    let pc = label_dp_only
        .guest_protocol_config(Profile::Hardened, &labels)
        .unwrap();
    assert!(matches!(
        pc.label_defence,
        Some(LabelDefence::RandomizedLabels(_))
    ));
    let e = epoch_then_resume(&data, &cfg, &labels, &init, pc).unwrap_err();
    assert!(
        matches!(e, Error::ApiMisuse(ApiMisuse::InvalidConfig { .. })),
        "{e}"
    );
    // A snapshot without the record of the error labels.
    let pc = tweak(
        cfg.guest_protocol_config(Profile::Hardened, &labels)
            .unwrap(),
    );
    let guest =
        Guest::<InsecureIdentityScheme>::new(pc, &init.host_part_bias, &init.host_part_guest_share)
            .unwrap();
    let mut gs = guest.snapshot();
    assert!(Guest::<InsecureIdentityScheme>::resume(pc, gs.clone()).is_ok());
    gs.error_labels = None;
    let e = Guest::<InsecureIdentityScheme>::resume(pc, gs).unwrap_err();
    assert!(
        matches!(e, Error::ApiMisuse(ApiMisuse::ResumeWithoutLedger { .. })),
        "{e}"
    );
}

/// The split loop hands the step the randomised labels, never the true ones, and refuses
/// labels without the evidence or of the wrong length; the report lists the labels'
/// condition.
#[test]
fn the_split_loop_passes_the_randomised_labels_only() {
    use fl_hetero_nn::split::{DpSgdStep, HostPart, PlainTwin};
    struct Recorder {
        twin: PlainTwin,
        seen: Vec<Vec<f64>>,
    }
    impl HostPart for Recorder {
        fn forward(
            &mut self,
            purpose: Purpose,
            a: &Matrix<f64>,
            ids: &[u64],
        ) -> Result<Matrix<f64>, Error> {
            self.twin.forward(purpose, a, ids)
        }
        fn backward(
            &mut self,
            d: &Matrix<f64>,
            ids: &[u64],
        ) -> Result<(Matrix<f64>, Option<Matrix<f64>>), Error> {
            self.twin.backward(d, ids)
        }
        fn backward_dp_sgd(
            &mut self,
            b: &fl_hetero_nn::dp_sgd::DpSgdBatch,
            ids: &[u64],
        ) -> Result<DpSgdStep, Error> {
            self.seen.push(b.error_labels.clone().unwrap());
            self.twin.backward_dp_sgd(b, ids)
        }
        fn traffic(&self) -> fl_hetero_nn::transport::memory::TrafficStats {
            self.twin.traffic()
        }
    }
    let (data, cfg, labels, init) = error_labels_setup(5);
    let pc = tweak(
        cfg.guest_protocol_config(Profile::Hardened, &labels)
            .unwrap(),
    );
    let mut rec = Recorder {
        twin: PlainTwin {
            layer: fl_hetero_nn::PlainInteractiveLayer::new(
                pc,
                &init.host_part_weight,
                &init.host_part_bias,
            )
            .unwrap(),
            rng: ChaCha20Rng::seed_from_u64(1),
        },
        seen: Vec::new(),
    };
    let (mut host, mut guest) = (HostModel::new(&init), GuestModel::new(&init, &cfg));
    train_epoch_with_error_labels(&cfg, &data, Some(&labels), &mut host, &mut guest, &mut rec)
        .unwrap();
    assert_eq!(rec.seen.concat(), labels.labels());
    assert_ne!(labels.labels(), &data.labels[..]);
    // Labels without the evidence (here the true ones), or of the wrong length.
    let mut plain = cfg;
    plain.label_dp = None;
    let true_labels = plain
        .privatize_labels(&data.labels, &mut ChaCha20Rng::seed_from_u64(5))
        .unwrap();
    let e = train_epoch_with_error_labels(
        &cfg,
        &data,
        Some(&true_labels),
        &mut host,
        &mut guest,
        &mut rec,
    )
    .unwrap_err();
    assert!(
        matches!(e, Error::ApiMisuse(ApiMisuse::InvalidConfig { .. })),
        "{e}"
    );
    let mut longer = data.labels.clone();
    longer.extend_from_slice(&data.labels);
    let longer = cfg
        .privatize_labels(&longer, &mut ChaCha20Rng::seed_from_u64(7))
        .unwrap();
    let e =
        train_epoch_with_error_labels(&cfg, &data, Some(&longer), &mut host, &mut guest, &mut rec)
            .unwrap_err();
    assert!(
        matches!(e, Error::ApiMisuse(ApiMisuse::ShapeMismatch { .. })),
        "{e}"
    );
    // The report's conditions include the labels' randomisation.
    let g =
        Guest::<InsecureIdentityScheme>::new(pc, &init.host_part_bias, &init.host_part_guest_share)
            .unwrap();
    let r = g.privacy_report(1e-5).unwrap();
    assert!(
        r.labels
            .conditions()
            .contains(&fl_hetero_nn::defences::Condition::LabelsRandomisedOnce),
        "{r}"
    );
}

/// The result of one run of the TCP party loops with randomised error labels: the guest's
/// (its last checkpoint and model) and the host's.
type TcpOutcome = (
    Result<(Option<fl_hetero_nn::split::tcp::Checkpoint>, GuestModel), Error>,
    Result<(), Error>,
);

/// Runs the TCP party loops (`split::tcp::run_host` in a thread, `run_guest_with_error_labels`
/// here) over loopback with the identity scheme and the seeds of `pair_with`, a checkpoint
/// after the last epoch.
fn tcp_error_labels_run(
    cfg: &SplitConfig,
    data: &VerticalData,
    init: &SplitInit,
    host_pc: ProtocolConfig,
    guest_pc: ProtocolConfig,
    error_labels: Option<&TrainingLabels>,
) -> TcpOutcome {
    use fl_hetero_nn::split::tcp::{run_guest_with_error_labels, run_host};
    use fl_hetero_nn::transport::tcp::{FramedStream, TcpConfig};
    use std::net::{TcpListener, TcpStream};

    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (cfg2, host_x, row_ids, init2) =
        (*cfg, data.host.clone(), data.row_ids.clone(), init.clone());
    let epochs = cfg.epochs;
    let host_thread = std::thread::spawn(move || -> Result<(), Error> {
        let mut host_rng = ChaCha20Rng::seed_from_u64(11);
        let dk = IdentityDecryptionKey::generate(2048, &mut host_rng).unwrap();
        let mut host = Host::<InsecureIdentityScheme>::new(
            tweak(host_pc),
            dk,
            Some(&init2.host_part_host_share),
            &mut host_rng,
        )
        .unwrap();
        let (sock, _) = listener.accept().unwrap();
        let mut stream = FramedStream::new(sock, TcpConfig::default(), true)?;
        run_host(
            &cfg2,
            &host_x,
            &row_ids,
            &mut HostModel::new(&init2),
            &mut host,
            &mut stream,
            &[epochs],
            &mut host_rng,
        )
    });
    let guest_result = (|| {
        let mut guest = new_guest(tweak(guest_pc), init);
        let sock = TcpStream::connect(addr).unwrap();
        let mut stream = FramedStream::new(sock, TcpConfig::default(), false)?;
        let mut last = None;
        let mut model = GuestModel::new(init, cfg);
        run_guest_with_error_labels(
            cfg,
            &data.guest,
            &data.labels,
            error_labels,
            &data.row_ids,
            &mut model,
            &mut guest,
            &mut stream,
            &[epochs],
            &mut ChaCha20Rng::seed_from_u64(12),
            &mut |_, _, cp| last = cp.or(last),
        )?;
        Ok((last, model))
    })();
    // The guest's stream is dropped: the host's loop ends.
    (guest_result, host_thread.join().unwrap())
}

/// When the guest's step fails in the TCP loop (here: the release budget is spent, a
/// label-independent refusal), the guest sends its abort notice before returning, so the
/// host's loop ends with `PeerAborted` rather than at a read timeout or a closed socket.
/// Control: within the budget both loops succeed.
#[test]
fn a_failed_guest_step_over_tcp_sends_the_abort_notice() {
    let (data, mut cfg, labels, init) = error_labels_setup(21);
    let guest_pc = cfg
        .guest_protocol_config(Profile::Hardened, &labels)
        .unwrap();
    let host_pc = cfg.protocol_config(Profile::Hardened);
    let (guest_ok, host_ok) =
        tcp_error_labels_run(&cfg, &data, &init, host_pc, guest_pc, Some(&labels));
    assert!(guest_ok.is_ok() && host_ok.is_ok());
    // The configuration's DP-SGD allows 4 releases per row; a fifth epoch is refused.
    cfg.epochs = 5;
    let (guest_err, host_err) =
        tcp_error_labels_run(&cfg, &data, &init, host_pc, guest_pc, Some(&labels));
    let e = guest_err.err().unwrap();
    assert!(matches!(e, Error::ApiMisuse(_)), "{e}");
    let e = host_err.unwrap_err();
    assert!(matches!(e, Error::PeerAborted { .. }), "{e}");
}

/// The party loops over TCP (`split::tcp`) run DP-SGD with randomised error labels, and
/// reproduce the in-memory loop bit for bit (same seeds): the same AUC and loss after the
/// last epoch. Controls: the same TCP run given the true labels (no randomisation, no
/// evidence), labels randomised by RR-with-prior at the same ε, and no error labels
/// (`run_guest`) are each refused before anything is sent.
#[test]
fn the_tcp_loops_run_randomised_error_labels_as_the_in_memory_loop() {
    use fl_hetero_nn::split::tcp::Checkpoint;

    let (data, cfg, labels, init) = error_labels_setup(21);
    let guest_pc = cfg
        .guest_protocol_config(Profile::Hardened, &labels)
        .unwrap();
    let host_pc = cfg.protocol_config(Profile::Hardened);
    // In memory.
    let mut p = pair_with(host_pc, guest_pc, &init);
    let (mut host, mut guest) = (HostModel::new(&init), GuestModel::new(&init, &cfg));
    for _ in 0..cfg.epochs {
        train_epoch_with_error_labels(&cfg, &data, Some(&labels), &mut host, &mut guest, &mut p)
            .unwrap();
    }
    let (auc, loss, _) = evaluate(&cfg, &data, &mut host, &mut guest, &mut p).unwrap();

    // Over TCP, with the same keys, shares and seeds; `error_labels` as given. The
    // host's outcome matters only when the guest's run succeeded.
    let tcp_run =
        |error_labels: Option<&TrainingLabels>| -> Result<(Checkpoint, GuestModel), Error> {
            let (guest_result, host_result) =
                tcp_error_labels_run(&cfg, &data, &init, host_pc, guest_pc, error_labels);
            let (last, model) = guest_result?;
            host_result?;
            Ok((last.unwrap(), model))
        };
    let (cp, tcp_model) = tcp_run(Some(&labels)).unwrap();
    assert!(auc.is_finite() && loss.is_finite());
    assert_eq!((cp.auc, cp.loss), (auc, loss));
    // Every parameter of the guest's model, bit for bit (Debug prints each f64 exactly).
    assert_eq!(format!("{tcp_model:?}"), format!("{guest:?}"));

    // Control: labels that are not this configuration's randomisation.
    let mut unrandomised = cfg;
    unrandomised.label_dp = None;
    let true_labels = unrandomised
        .privatize_labels(&data.labels, &mut ChaCha20Rng::seed_from_u64(5))
        .unwrap();
    let e = tcp_run(Some(&true_labels)).unwrap_err();
    assert!(
        matches!(e, Error::ApiMisuse(ApiMisuse::InvalidConfig { .. })),
        "{e}"
    );
    // Control: labels randomised at the same ε by RR-with-prior (ε-DP, but not the
    // symmetric flip the error rows de-bias).
    let mut with_prior = cfg;
    with_prior.label_dp = Some(fl_hetero_nn::split::LabelDefence::RrWithPrior {
        epsilon: fl_ldp::Epsilon::new(2.0).unwrap(),
        prior: [0.37, 0.63],
    });
    let prior_labels = with_prior
        .privatize_labels(&data.labels, &mut ChaCha20Rng::seed_from_u64(5))
        .unwrap();
    let e = tcp_run(Some(&prior_labels)).unwrap_err();
    assert!(
        matches!(e, Error::ApiMisuse(ApiMisuse::InvalidConfig { .. })),
        "{e}"
    );
    // Control: no error labels, refused before anything is sent.
    let e = tcp_run(None).unwrap_err();
    assert!(
        matches!(e, Error::ApiMisuse(ApiMisuse::InvalidConfig { .. })),
        "{e}"
    );
}
