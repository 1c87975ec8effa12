//! The guest (party B): labels, W̃ (the noisy copy of the host-part weight) and b_A.

use std::collections::VecDeque;

use num_bigint::BigInt;
use rand::rngs::ChaCha20Rng;
use rand::{CryptoRng, SeedableRng};
use zeroize::Zeroize;

// The guest's randomizer stream wipes its state on drop (chacha20's `zeroize` feature,
// enabled through this crate's manifest): checked at compile time.
const _: fn() = assert_zeroize_on_drop::<ChaCha20Rng>;
fn assert_zeroize_on_drop<T: zeroize::ZeroizeOnDrop>() {}

use super::ops::{CtMatrix, forward_product, gradient_product, input_gradient_product};
use super::{RoundLayouts, Session, check_round};
use crate::config::{Bounds, MAX_STEPS, Profile, ProtocolConfig, fate_mask, uniform_mask};
use crate::defences::RowLedger;
use crate::error::{ApiMisuse, Error, PeerMisbehaved};
use crate::fixed::bits;
use crate::matrix::Matrix;
use crate::message::{
    Activations, Hello, Message, Purpose, RoundCiphertexts, RoundIntegers, key_proof_context,
};
use crate::packing::{Axis, Layout};
use crate::scheme::HomomorphicScheme;
use crate::secret::SecretMatrix;

/// What the guest reports to its application.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum GuestEvent {
    /// The host's key and configuration were accepted.
    SessionEstablished,
    /// z_A = a_A·W + b_A for the round's batch. In a training round the application must
    /// next call [`Guest::backward`] with δ = ∂L/∂z.
    Forward {
        /// The round.
        round: u64,
        /// Training or prediction.
        purpose: Purpose,
        /// z_A as floats (decoded from scale S³).
        output: Matrix<f64>,
        /// z_A as the exact integer at scale S³.
        exact: Matrix<BigInt>,
    },
    /// The training step finished on the guest's side (W̃ and b_A updated).
    BackwardDone {
        /// The round.
        round: u64,
        /// The error the guest's own layers (W_B, bottom model) must train on when
        /// gradient perturbation replaced δ (the released, noisy error D/S); `None`
        /// without it (train on δ itself).
        released_error: Option<Matrix<f64>>,
        /// Dη = round(η·δ·S), the scaled error the guest applied to W̃ and b_A (its own
        /// value, for its records and its view, [`crate::attacks::GuestView`]).
        scaled_error: Matrix<BigInt>,
    },
}

/// What a training step starts from: δ, or DP-SGD's per-example inputs.
#[derive(Clone, Copy)]
enum BackwardInput<'a> {
    Delta(&'a Matrix<f64>),
    DpSgd(&'a crate::dp_sgd::DpSgdBatch),
}

impl BackwardInput<'_> {
    fn rows(&self) -> usize {
        match self {
            Self::Delta(d) => d.rows(),
            Self::DpSgd(b) => b.rows(),
        }
    }
}

/// The guest's exportable state (FATE saves W̃ and b_A in the guest's model), from
/// [`Guest::snapshot`]; [`Guest::resume`] continues a session from it. **Secret**
/// (its `Debug` shows only the counters).
#[derive(Clone, PartialEq)]
pub struct GuestSnapshot {
    /// W̃ at scale S².
    pub noisy_weight: Matrix<BigInt>,
    /// b_A at scale S² (1 × m).
    pub bias: Matrix<BigInt>,
    /// Completed training steps.
    pub training_steps: u64,
    /// Completed rounds.
    pub round: u64,
    /// The releases of each example's error so far, per row id: what the release budget
    /// and the privacy report count. [`Guest::snapshot`] always fills it; `None` stands
    /// for a snapshot without it (saved before the ledger was part of the snapshot, or
    /// built by hand), which [`Guest::resume`] refuses under a label defence that counts
    /// releases ([`ApiMisuse::ResumeWithoutLedger`]).
    pub release_ledger: Option<RowLedger>,
    /// The label defence the ledger's releases were made under (their price: C, z, q,
    /// budget). [`Guest::resume`] refuses a configuration with another one, so that the
    /// report cannot price past releases at a different noise or budget.
    pub label_defence: Option<crate::config::LabelDefence>,
    /// DP-SGD with randomised error labels: the randomised label ỹ (1 = true) each row id
    /// has been trained with (**secret**, a release). [`Guest::resume`] refuses a
    /// configuration with randomised error labels when it is `None`, and the resumed
    /// guest refuses a batch whose ỹ for a known row id differs (a re-randomisation,
    /// which would cost ε_RR again).
    pub error_labels: Option<std::collections::BTreeMap<u64, bool>>,
}

impl core::fmt::Debug for GuestSnapshot {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "GuestSnapshot {{ training_steps: {}, round: {}, release_ledger: {}, .. }}",
            self.training_steps,
            self.round,
            if self.release_ledger.is_some() {
                "saved"
            } else {
                "absent"
            }
        )
    }
}

enum State<S: HomomorphicScheme> {
    AwaitHello,
    Idle,
    AwaitForwardReply {
        purpose: Purpose,
        n: usize,
        eps_b: SecretMatrix,
        a_cols: Option<CtMatrix<S>>,
    },
    AwaitBackward {
        n: usize,
        a_cols: CtMatrix<S>,
    },
    AwaitGradientReply {
        n: usize,
        noise_w: SecretMatrix,
        d: SecretMatrix,
        d_eta: SecretMatrix,
    },
    AwaitAcc {
        n: usize,
        d: SecretMatrix,
        d_eta: SecretMatrix,
        g_hat: SecretMatrix,
    },
    Closed,
}

impl<S: HomomorphicScheme> State<S> {
    fn name(&self) -> &'static str {
        match self {
            Self::AwaitHello => "waiting for Hello",
            Self::Idle => "waiting for Activations (1)",
            Self::AwaitForwardReply { .. } => "waiting for ForwardReply (3)",
            Self::AwaitBackward { .. } => "waiting for the application's backward()",
            Self::AwaitGradientReply { .. } => "waiting for GradientReply (5)",
            Self::AwaitAcc { .. } => "waiting for EncryptedAcc (6)",
            Self::Closed => "closed",
        }
    }
}

/// The guest's state machine. See the [module docs](crate::protocol) for the calling
/// contract.
pub struct Guest<S: HomomorphicScheme = crate::Paillier> {
    config: ProtocolConfig,
    bounds: Bounds,
    ek: Option<S::EncryptionKey>,
    /// Precomputed fresh encryptions of zero under the host's key (textbook sⁿ, s uniform
    /// in Z*_n), one per ciphertext the hardened guest returns to the host, whatever the
    /// [`Encryption`] mode: the host owns the key, so a short-exponent (DJN) randomizer
    /// would hide nothing from it (tests/rt_djn_quadratic_character.rs,
    /// tests/rt_djn_short_gamma.rs).
    randomizers: Option<S::RandomizerPool>,
    /// The generator of every randomizer the pool holds (precomputed or on demand), seeded
    /// once from the caller's rng at the host's hello. Its own stream, so that how many
    /// randomizers were precomputed, and when (a transport fills the pool while it waits,
    /// depending on the host's timing), changes neither the caller's rng stream (masks, DP
    /// noise) nor which randomizer each returned ciphertext gets: a seeded run is
    /// reproducible with or without precomputation. Wiped on drop (chacha20's `zeroize`).
    randomizer_rng: Option<ChaCha20Rng>,
    /// Rows of the last Activations handled (the size [`Guest::randomizers_wanted`] plans
    /// the next step for).
    last_batch_rows: Option<usize>,
    /// Ciphertexts re-randomised so far, and how many of them found no precomputed
    /// randomizer in the pool (computed on the spot, on the critical path).
    randomizers_used: u64,
    randomizers_computed_on_demand: u64,
    noisy_weight: SecretMatrix,
    bias: SecretMatrix,
    /// The released error of the step in progress (gradient perturbation).
    released_error: Option<Matrix<f64>>,
    /// Releases of each example's error so far, per row id (for the budget and the
    /// privacy report).
    released: RowLedger,
    /// DP-SGD with randomised error labels: ỹ per row id, as first used.
    error_labels: std::collections::BTreeMap<u64, bool>,
    training_steps: u64,
    round: u64,
    state: State<S>,
    outbox: VecDeque<Message>,
    events: VecDeque<GuestEvent>,
}

impl<S: HomomorphicScheme> core::fmt::Debug for Guest<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "Guest {{ profile: {:?}, round: {}, state: {}, .. }}",
            self.config.profile,
            self.round,
            self.state.name()
        )
    }
}

fn sub(a: &Matrix<BigInt>, b: &Matrix<BigInt>) -> Matrix<BigInt> {
    Matrix::from_fn(a.rows(), a.cols(), |i, j| {
        a.get(i, j).cloned().unwrap_or_default() - b.get(i, j).cloned().unwrap_or_default()
    })
}

fn check_bits(m: &Matrix<BigInt>, bound: u32, what: &'static str) -> Result<(), PeerMisbehaved> {
    if m.as_slice().iter().all(|v| bits(v) <= u64::from(bound)) {
        Ok(())
    } else {
        Err(PeerMisbehaved::ValueOutOfRange { what })
    }
}

impl<S: HomomorphicScheme> Session for Guest<S> {
    fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed)
    }

    fn close(&mut self) {
        self.state = State::Closed;
    }

    fn outbox(&mut self) -> &mut VecDeque<Message> {
        &mut self.outbox
    }

    fn dispatch<R: CryptoRng + ?Sized>(&mut self, msg: Message, rng: &mut R) -> Result<(), Error> {
        self.handle_inner(msg, rng)
    }
}

impl<S: HomomorphicScheme> Guest<S> {
    /// Creates the guest, waiting for the host's hello.
    ///
    /// `initial_bias` is b_A (length m). `initial_weight` (d_A × m) is the guest's part of
    /// the initial weight: in `FateFaithful` W₀ itself (the guest initialises W, FATE's
    /// choice); in `Hardened` its share W̃₀ of the jointly drawn W₀ = W̃₀ + acc₀, drawn
    /// from the agreed initialiser with half its variance ([`crate::nn::weight_share`]),
    /// while the host draws acc₀. Each must be below 2^`weight_bound_bits` in absolute
    /// value.
    ///
    /// A [`crate::config::LabelDefence::RandomizedLabels`] must be the evidence
    /// [`crate::split::SplitConfig::privatize_labels`] returned
    /// ([`crate::config::RandomizedLabels`]); a declaration without it is refused
    /// ([`ApiMisuse::UndefendedLeak`]).
    pub fn new(
        config: ProtocolConfig,
        initial_bias: &[f64],
        initial_weight: &Matrix<f64>,
    ) -> Result<Self, Error> {
        Self::check_config(&config)?;
        let (d_a, m) = (config.host_dim, config.out_dim);
        let fp = config.fixed_point;
        let b = Matrix::from_vec(1, initial_bias.len(), initial_bias.to_vec())?;
        b.check_shape("initial_bias", (1, m))?;
        let bias = fp.encode_matrix(&b, 2, config.weight_bound_bits, "initial_bias")?;
        initial_weight.check_shape("initial_weight", (d_a, m))?;
        let noisy_weight = SecretMatrix::from_matrix(&fp.encode_matrix(
            initial_weight,
            2,
            config.weight_bound_bits,
            "initial_weight",
        )?);
        Ok(Self::from_parts(
            config,
            noisy_weight,
            SecretMatrix::from_matrix(&bias),
            RowLedger::default(),
            0,
            0,
        ))
    }

    /// Continues a session from a [`GuestSnapshot`] (of a guest with the same
    /// `config`): W̃, b_A, the counters and the release ledger are restored, and the
    /// guest waits for the host's hello, as after [`Self::new`]; the host must continue
    /// from the same round (e.g. [`crate::Host::resume`] from its snapshot of the same
    /// moment). The ledger makes the budget
    /// ([`GradientPerturbation::releases_per_row`](crate::config::GradientPerturbation::releases_per_row))
    /// and [`Self::privacy_report`] count the releases before the snapshot too.
    ///
    /// # Errors
    /// Those of [`Self::new`] for the configuration; [`ApiMisuse::ResumeWithoutLedger`]
    /// when the label defence counts releases per row (gradient perturbation, DP-SGD) and
    /// the snapshot has no ledger; [`ApiMisuse::ShapeMismatch`] for a W̃ that is not
    /// d_A × m or a b_A that is not 1 × m. (W̃ and b_A beyond their bounds are refused at
    /// the next round, as for a session that diverged.)
    pub fn resume(config: ProtocolConfig, snapshot: GuestSnapshot) -> Result<Self, Error> {
        Self::check_config(&config)?;
        let (d_a, m) = (config.host_dim, config.out_dim);
        snapshot
            .noisy_weight
            .check_shape("snapshot noisy_weight", (d_a, m))?;
        snapshot.bias.check_shape("snapshot bias", (1, m))?;
        let defence = match config.label_defence {
            Some(crate::config::LabelDefence::GradientPerturbation(_)) => {
                Some("gradient perturbation")
            }
            Some(crate::config::LabelDefence::DpSgd(_)) => Some("DP-SGD"),
            _ => None,
        };
        // A snapshot whose releases are counted keeps its defence: resuming under another
        // one (e.g. labels randomised once) would stop pricing the releases already made.
        let snapshot_counts = matches!(
            snapshot.label_defence,
            Some(
                crate::config::LabelDefence::GradientPerturbation(_)
                    | crate::config::LabelDefence::DpSgd(_)
            )
        );
        if (defence.is_some() || snapshot_counts) && snapshot.label_defence != config.label_defence
        {
            return Err(ApiMisuse::InvalidConfig {
                reason: "resume with a label defence other than the snapshot's: its ledger's releases were made (and must be priced) under the snapshot's noise, sampling rate and budget".into(),
            }
            .into());
        }
        let released = match (snapshot.release_ledger.clone(), defence) {
            (Some(ledger), _) => ledger,
            (None, Some(defence)) => {
                return Err(ApiMisuse::ResumeWithoutLedger { defence }.into());
            }
            // Nothing counts releases: the report claims no per-release guarantee.
            (None, None) => RowLedger::default(),
        };
        let error_labels = match (config.label_defence, snapshot.error_labels) {
            (Some(crate::config::LabelDefence::DpSgd(d)), None) if d.error_labels.is_some() => {
                return Err(ApiMisuse::ResumeWithoutLedger {
                    defence: "DP-SGD with randomised error labels (the snapshot has no record of them)",
                }
                .into());
            }
            (_, labels) => labels.unwrap_or_default(),
        };
        let mut guest = Self::from_parts(
            config,
            SecretMatrix::from_matrix(&snapshot.noisy_weight),
            SecretMatrix::from_matrix(&snapshot.bias),
            released,
            snapshot.training_steps,
            snapshot.round,
        );
        guest.error_labels = error_labels;
        Ok(guest)
    }

    /// The checks [`Self::new`] and [`Self::resume`] make on the configuration.
    fn check_config(config: &ProtocolConfig) -> Result<(), Error> {
        config.validate()?;
        if let Some(crate::config::LabelDefence::RandomizedLabels(r)) = config.label_defence
            && !r.is_evidence()
        {
            return Err(ApiMisuse::UndefendedLeak {
                missing: "label defence",
                leak: "label_defence declares randomized labels without the evidence that SplitConfig::privatize_labels returns, so the labels may be the true ones, which the host recovers exactly",
                remedy: "build the guest's configuration from the TrainingLabels privatize_labels returns (SplitConfig::guest_protocol_config); RandomizedLabels::announced_by_guest is the host's statement",
            }
            .into());
        }
        if let Some(crate::config::LabelDefence::DpSgd(d)) = config.label_defence
            && d.error_labels.is_some_and(|r| !r.is_evidence())
        {
            return Err(ApiMisuse::UndefendedLeak {
                missing: "label defence",
                leak: "DP-SGD's error_labels declares randomised error labels without the evidence that SplitConfig::privatize_labels returns, so the error rows may come from the true labels, outside every noise",
                remedy: "build the guest's configuration from the TrainingLabels privatize_labels returns (SplitConfig::guest_protocol_config); RandomizedLabels::announced_by_guest is the host's statement",
            }
            .into());
        }
        Ok(())
    }

    /// A guest waiting for the host's hello, with the given state.
    fn from_parts(
        config: ProtocolConfig,
        noisy_weight: SecretMatrix,
        bias: SecretMatrix,
        released: RowLedger,
        training_steps: u64,
        round: u64,
    ) -> Self {
        Self {
            bounds: Bounds::new(&config),
            config,
            ek: None,
            randomizers: None,
            randomizer_rng: None,
            last_batch_rows: None,
            randomizers_used: 0,
            randomizers_computed_on_demand: 0,
            noisy_weight,
            bias,
            released_error: None,
            released,
            error_labels: std::collections::BTreeMap::new(),
            training_steps,
            round,
            state: State::AwaitHello,
            outbox: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    /// The session configuration.
    pub fn config(&self) -> &ProtocolConfig {
        &self.config
    }

    /// The current round.
    pub fn round(&self) -> u64 {
        self.round
    }

    /// Completed training steps t.
    pub fn training_steps(&self) -> u64 {
        self.training_steps
    }

    /// Whether an error closed the session.
    pub fn is_closed(&self) -> bool {
        Session::is_closed(self)
    }

    /// Whether the guest waits for the application's [`Guest::backward`].
    pub fn awaits_backward(&self) -> bool {
        matches!(self.state, State::AwaitBackward { .. })
    }

    /// Whether no round is in progress.
    pub fn is_idle(&self) -> bool {
        matches!(self.state, State::Idle)
    }

    /// The guarantee each party got so far ([`crate::defences::PrivacyReport`]): labels
    /// from this guest's label defence and the releases of its most-released example
    /// (counted per row id in [`Self::backward`]); features from the agreed EmbeddingDP
    /// per round (the guest cannot tell the host's rows apart: the composition per row is
    /// the host's report). `delta` is the δ of the label guarantee.
    ///
    /// # Errors
    /// An invalid δ.
    pub fn privacy_report(&self, delta: f64) -> Result<crate::defences::PrivacyReport, Error> {
        crate::defences::privacy_report(&self.config, self.released.most(), None, delta)
    }

    /// The host's validated public key, once the hello has been accepted.
    pub fn encryption_key(&self) -> Option<&S::EncryptionKey> {
        self.ek.as_ref()
    }

    /// Describes the current state (for diagnostics).
    pub fn state_name(&self) -> &'static str {
        self.state.name()
    }

    /// Exports W̃, b_A, the counters and the release ledger (**secret**; for saving the
    /// model, for [`Self::resume`] and for tests). Take it while the guest is idle (no
    /// round in progress): a round in progress is not part of it.
    pub fn snapshot(&self) -> GuestSnapshot {
        GuestSnapshot {
            noisy_weight: self.noisy_weight.expose(),
            bias: self.bias.expose(),
            training_steps: self.training_steps,
            round: self.round,
            release_ledger: Some(self.released.clone()),
            label_defence: self.config.label_defence,
            error_labels: Some(self.error_labels.clone()),
        }
    }

    /// The next message to send, if any.
    #[must_use]
    pub fn poll_message(&mut self) -> Option<Message> {
        self.outbox.pop_front()
    }

    /// The next event for the application, if any.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<GuestEvent> {
        self.events.pop_front()
    }

    fn ek(&self) -> Result<&S::EncryptionKey, Error> {
        self.ek.as_ref().ok_or(Error::SessionClosed)
    }

    /// How many ciphertexts the guest re-randomises in one training step over a batch of
    /// `batch_rows` rows (the masked forward, the masked gradient and the input
    /// gradient; a prediction round needs only the first), or 0 in the FateFaithful
    /// profile, which sends its products as they are. The session must be established.
    ///
    /// # Errors
    /// [`Error::SessionClosed`] before the host's hello; [`ApiMisuse::InvalidConfig`] when
    /// `batch_rows` is 0 or above the configuration's `max_batch_rows` (batches the guest
    /// refuses), the key cannot hold a round of `batch_rows` rows, or the count exceeds
    /// `usize` (possible on 32-bit targets).
    pub fn randomizers_per_step(&self, batch_rows: usize) -> Result<usize, Error> {
        if batch_rows == 0 || batch_rows > self.config.max_batch_rows {
            return Err(ApiMisuse::InvalidConfig {
                reason: format!(
                    "batch_rows = {batch_rows}; the guest accepts batches of 1..={} rows \
                     (max_batch_rows)",
                    self.config.max_batch_rows
                ),
            }
            .into());
        }
        if self.config.profile != Profile::Hardened {
            return Ok(0);
        }
        let l = self.layouts(batch_rows)?;
        let (d_a, m) = (self.config.host_dim, self.config.out_dim);
        // Checked: on a 32-bit target, batch_rows × out_dim can exceed usize.
        let count = |layout: Layout, rows: usize, cols: usize| {
            let (r, c) = layout.ciphertext_shape(rows, cols);
            r.checked_mul(c)
        };
        let gradient = Layout {
            axis: Axis::Rows,
            ..l.gradient
        };
        let acc = Layout {
            axis: Axis::Cols,
            ..l.acc
        };
        let total = [
            count(l.forward, batch_rows, m),
            count(gradient, d_a, m),
            count(acc, batch_rows, d_a),
        ]
        .into_iter()
        .try_fold(0usize, |sum, part| sum.checked_add(part?));
        total.ok_or_else(|| {
            ApiMisuse::InvalidConfig {
                reason: format!(
                    "one step over {batch_rows} rows needs more re-randomizers than this \
                     platform's usize can count"
                ),
            }
            .into()
        })
    }

    /// Precomputes `count` fresh encryptions of zero under the host's key (sⁿ mod n², s
    /// uniform in Z*_n: the expensive part of re-randomisation), so that each ciphertext
    /// the guest later returns costs one multiplication. Call it while the guest waits
    /// (e.g. for the host's next Activations), with [`Guest::randomizers_per_step`] as a
    /// guide; the guest tops the pool up itself when it runs short, so skipping this only
    /// moves the work onto the critical path. The randomizers come from the guest's own
    /// stream, seeded at the host's hello, in the same order whether precomputed or drawn
    /// on demand: precomputing changes no result and draws nothing from the caller's rng.
    ///
    /// # Errors
    /// [`Error::SessionClosed`] before the host's hello or after the session closed;
    /// [`ApiMisuse::InvalidConfig`] when the pool would hold more than one training step's
    /// need at `max_batch_rows` rows without packing (an upper bound of any step's need).
    pub fn precompute_randomizers(&mut self, count: usize) -> Result<(), Error> {
        if self.is_closed() {
            return Err(Error::SessionClosed);
        }
        self.ek()?;
        let (rows, d_a, m) = (
            self.config.max_batch_rows,
            self.config.host_dim,
            self.config.out_dim,
        );
        let capacity = rows
            .saturating_mul(m)
            .saturating_add(d_a.saturating_mul(m))
            .saturating_add(rows.saturating_mul(d_a));
        let room = capacity.saturating_sub(self.randomizers_available());
        if count > room {
            return Err(ApiMisuse::InvalidConfig {
                reason: format!(
                    "count = {count}; the pool holds at most {capacity} randomizers (one step \
                     over max_batch_rows = {rows} rows, unpacked), {room} more now"
                ),
            }
            .into());
        }
        let (pool, rng) = self.randomizer_source()?;
        S::randomizer_pool_fill(pool, count, rng);
        Ok(())
    }

    /// The pool and its own generator (see the `randomizer_rng` field).
    fn randomizer_source(&mut self) -> Result<(&mut S::RandomizerPool, &mut ChaCha20Rng), Error> {
        match (self.randomizers.as_mut(), self.randomizer_rng.as_mut()) {
            (Some(pool), Some(rng)) => Ok((pool, rng)),
            _ => Err(Error::SessionClosed),
        }
    }

    /// The number of precomputed randomizers not yet used.
    pub fn randomizers_available(&self) -> usize {
        self.randomizers
            .as_ref()
            .map_or(0, |p| S::randomizer_pool_len(p))
    }

    /// How many precomputed randomizers a transport should keep in the pool while the guest
    /// waits for the host: one training step's need ([`Guest::randomizers_per_step`]) for
    /// the batch size of the last Activations the guest handled. 0 before the first round,
    /// outside the hardened profile (which re-randomises nothing) and once the session is
    /// closed. Filling the pool up to this while no frame is waiting (as the TCP
    /// transport's `next_guest_event` does, feature `transport`) keeps the sⁿ
    /// exponentiations off the critical path without letting the pool grow beyond one
    /// step.
    pub fn randomizers_wanted(&self) -> usize {
        match self.last_batch_rows {
            Some(rows) if !self.is_closed() => self.randomizers_per_step(rows).unwrap_or(0),
            _ => 0,
        }
    }

    /// The number of ciphertexts the guest has re-randomised so far (hardened profile: each
    /// one it returns to the host).
    pub fn randomizers_used(&self) -> u64 {
        self.randomizers_used
    }

    /// How many of [`Guest::randomizers_used`] found the pool empty, so that their sⁿ was
    /// computed on the spot, on the critical path (the rest were precomputed).
    pub fn randomizers_computed_on_demand(&self) -> u64 {
        self.randomizers_computed_on_demand
    }

    /// Re-randomises a ciphertext matrix the guest returns to the host from its pool,
    /// counting the ciphertexts the pool could not serve from precomputed randomizers.
    fn rerandomize_outgoing(&mut self, z: &mut CtMatrix<S>) -> Result<(), Error> {
        let needed = z.cts.as_slice().len();
        let short = needed.saturating_sub(self.randomizers_available());
        let (pool, rng) = self.randomizer_source()?;
        z.rerandomize(pool, rng)?;
        self.randomizers_used += needed as u64;
        self.randomizers_computed_on_demand += short as u64;
        Ok(())
    }

    fn layouts(&self, n: usize) -> Result<RoundLayouts, Error> {
        RoundLayouts::new(
            &self.config,
            &self.bounds,
            S::plaintext_bits(self.ek()?),
            n,
            self.training_steps,
        )
    }

    /// Decodes a frame from the host and feeds it to [`Self::handle_message`]. A frame that
    /// does not decode closes the session like any other protocol error.
    pub fn handle_frame<R: CryptoRng + ?Sized>(
        &mut self,
        frame: &[u8],
        rng: &mut R,
    ) -> Result<(), Error> {
        self.feed_frame(frame, rng)
    }

    /// Feeds a message from the host.
    pub fn handle_message<R: CryptoRng + ?Sized>(
        &mut self,
        msg: Message,
        rng: &mut R,
    ) -> Result<(), Error> {
        self.feed_message(msg, rng)
    }

    fn handle_inner<R: CryptoRng + ?Sized>(
        &mut self,
        msg: Message,
        rng: &mut R,
    ) -> Result<(), Error> {
        let state = core::mem::replace(&mut self.state, State::Closed);
        match (state, msg) {
            (State::Closed, _) => Err(Error::SessionClosed),
            (_, Message::Abort(code)) => Err(Error::PeerAborted { code }),
            (State::AwaitHello, Message::Hello(h)) => self.on_hello(h, rng),
            (State::Idle, Message::Activations(a)) => self.on_activations(a, rng),
            (
                State::AwaitForwardReply {
                    purpose,
                    n,
                    eps_b,
                    a_cols,
                },
                Message::ForwardReply(r),
            ) => self.on_forward_reply(purpose, n, eps_b, a_cols, r),
            (
                State::AwaitGradientReply {
                    n,
                    noise_w,
                    d,
                    d_eta,
                },
                Message::GradientReply(r),
            ) => self.on_gradient_reply(n, noise_w, d, d_eta, r),
            (State::AwaitAcc { n, d, d_eta, g_hat }, Message::EncryptedAcc(c)) => {
                self.on_encrypted_acc(n, d, d_eta, g_hat, c)
            }
            (state, msg) => Err(Error::UnexpectedMessage {
                expected: state.name(),
                got: msg.kind_name(),
            }),
        }
    }

    fn on_hello<R: CryptoRng + ?Sized>(&mut self, h: Hello, rng: &mut R) -> Result<(), Error> {
        let mine = &self.config;
        let theirs = &h.config;
        let fields: [(&'static str, bool); 16] = [
            ("profile", mine.profile == theirs.profile),
            ("fixed_point", mine.fixed_point == theirs.fixed_point),
            ("host_dim", mine.host_dim == theirs.host_dim),
            ("out_dim", mine.out_dim == theirs.out_dim),
            (
                "learning_rate",
                mine.learning_rate.to_bits() == theirs.learning_rate.to_bits(),
            ),
            (
                "activation_bound_bits",
                mine.activation_bound_bits == theirs.activation_bound_bits,
            ),
            (
                "delta_bound_bits",
                mine.delta_bound_bits == theirs.delta_bound_bits,
            ),
            (
                "weight_bound_bits",
                mine.weight_bound_bits == theirs.weight_bound_bits,
            ),
            (
                "statistical_security_bits",
                mine.statistical_security_bits == theirs.statistical_security_bits,
            ),
            (
                "max_batch_rows",
                mine.max_batch_rows == theirs.max_batch_rows,
            ),
            ("min_key_bits", mine.min_key_bits == theirs.min_key_bits),
            ("packing", mine.packing == theirs.packing),
            ("encryption", mine.encryption == theirs.encryption),
            ("embedding_dp", mine.embedding_dp == theirs.embedding_dp),
            ("label_defence", mine.label_defence == theirs.label_defence),
            (
                "accepted_leaks",
                mine.accepted_leaks == theirs.accepted_leaks,
            ),
        ];
        if let Some((field, _)) = fields.iter().find(|(_, ok)| !ok) {
            return Err(PeerMisbehaved::ConfigMismatch { field }.into());
        }
        let ek = S::key_from_bytes(&h.public_key).map_err(|e| PeerMisbehaved::WeakKey(e.detail))?;
        if S::key_bits(&ek) < self.config.min_key_bits {
            return Err(PeerMisbehaved::WeakKey(format!(
                "{} bits; at least {} required",
                S::key_bits(&ek),
                self.config.min_key_bits
            ))
            .into());
        }
        // Before any use of the key: the host must prove gcd(n, φ(n)) = 1, without which no
        // re-randomisation hides anything from it (fl-paillier's
        // tests/malformed_key_rerandomisation.rs).
        S::verify_key_proof(&ek, &h.key_proof, &key_proof_context(&self.config))
            .map_err(|e| PeerMisbehaved::InvalidKeyProof(e.detail))?;
        // Textbook sⁿ re-randomisation in every encryption mode: a short-exponent
        // randomizer on a group the key owner chose hides nothing from the key owner
        // (the crate README, "Re-randomisation").
        self.randomizers = Some(S::randomizer_pool_new(&ek));
        let mut seed = <ChaCha20Rng as SeedableRng>::Seed::default();
        rng.fill_bytes(&mut seed);
        self.randomizer_rng = Some(ChaCha20Rng::from_seed(seed));
        seed.zeroize();
        self.ek = Some(ek);
        self.events.push_back(GuestEvent::SessionEstablished);
        self.state = State::Idle;
        Ok(())
    }

    fn check_own_parameters(&self) -> Result<(), Error> {
        let t = self.training_steps;
        let diverged = |what| ApiMisuse::ValueOutOfRange {
            what,
            bound_bits: 0,
        };
        if !self
            .noisy_weight
            .expose()
            .as_slice()
            .iter()
            .all(|v| bits(v) <= u64::from(self.bounds.noisy_weight(t)))
        {
            return Err(
                diverged("noisy weight W̃ (training diverged beyond weight_bound_bits)").into(),
            );
        }
        if !self
            .bias
            .expose()
            .as_slice()
            .iter()
            .all(|v| bits(v) <= u64::from(self.bounds.w))
        {
            return Err(diverged("bias b_A (training diverged beyond weight_bound_bits)").into());
        }
        Ok(())
    }

    /// Computes ⟦A·W̃ + b_A·S + ε_B⟧ (re-randomised in the hardened profile unless
    /// `rerandomize` is false, which only unit tests use) and ε_B.
    pub(crate) fn masked_forward<R: CryptoRng + ?Sized>(
        &mut self,
        a_rows: &CtMatrix<S>,
        rerandomize: bool,
        rng: &mut R,
    ) -> Result<(CtMatrix<S>, Matrix<BigInt>), Error> {
        let ek = self.ek()?.clone();
        let t = self.training_steps;
        let (n, m) = (a_rows.rows, self.config.out_dim);
        let f = self.config.fixed_point.frac_bits();
        let eps_b = Matrix::from_fn(n, m, |_, _| match self.config.profile {
            Profile::Hardened => uniform_mask(self.bounds.eps_b(t), rng),
            Profile::FateFaithful => fate_mask(f, 3, rng),
        });
        let bias = self.bias.expose();
        let plain = Matrix::from_fn(n, m, |i, j| {
            (bias.get(0, j).cloned().unwrap_or_default() << f)
                + eps_b.get(i, j).cloned().unwrap_or_default()
        });
        let secret = self.config.profile == Profile::Hardened;
        let mut z = forward_product(
            &ek,
            a_rows,
            &self.noisy_weight.expose(),
            self.bounds.noisy_weight(t),
            secret,
        )?;
        z.add_plain(&ek, &plain)?;
        if rerandomize && self.config.profile == Profile::Hardened {
            self.rerandomize_outgoing(&mut z)?;
        }
        Ok((z, eps_b))
    }

    fn on_activations<R: CryptoRng + ?Sized>(
        &mut self,
        a: Activations,
        rng: &mut R,
    ) -> Result<(), Error> {
        check_round(self.round, a.round)?;
        let n = a.by_rows.rows;
        if n == 0 || n > self.config.max_batch_rows {
            return Err(PeerMisbehaved::TooLarge {
                what: "Activations (batch rows)",
            }
            .into());
        }
        self.check_own_parameters()?;
        self.last_batch_rows = Some(n);
        if self.training_steps >= MAX_STEPS {
            return Err(ApiMisuse::InvalidConfig {
                reason: format!("a session supports at most {MAX_STEPS} training steps"),
            }
            .into());
        }
        let layouts = self.layouts(n)?;
        let d_a = self.config.host_dim;
        let ek = self.ek()?.clone();
        let a_rows = CtMatrix::<S>::from_wire(
            &ek,
            &a.by_rows,
            n,
            d_a,
            layouts.forward,
            "Activations.by_rows",
        )?;
        let a_cols = match (a.purpose, a.by_cols, self.config.packing) {
            (Purpose::Train, Some(c), true) => Some(CtMatrix::<S>::from_wire(
                &ek,
                &c,
                n,
                d_a,
                layouts.gradient,
                "Activations.by_cols",
            )?),
            (Purpose::Train, None, false) => Some(a_rows.clone().unpacked_as(Axis::Cols)),
            (Purpose::Predict, None, _) => None,
            _ => {
                return Err(PeerMisbehaved::LayoutMismatch {
                    what: "Activations.by_cols",
                }
                .into());
            }
        };
        let (z, eps_b) = self.masked_forward(&a_rows, true, rng)?;
        self.outbox
            .push_back(Message::MaskedForward(RoundCiphertexts {
                round: self.round,
                data: z.to_wire(&ek),
            }));
        self.state = State::AwaitForwardReply {
            purpose: a.purpose,
            n,
            eps_b: SecretMatrix::from_matrix(&eps_b),
            a_cols,
        };
        Ok(())
    }

    fn on_forward_reply(
        &mut self,
        purpose: Purpose,
        n: usize,
        eps_b: SecretMatrix,
        a_cols: Option<CtMatrix<S>>,
        r: RoundIntegers,
    ) -> Result<(), Error> {
        check_round(self.round, r.round)?;
        let m = self.config.out_dim;
        let reply = r.data.values("ForwardReply", (n, m))?;
        check_bits(
            &reply,
            self.bounds.forward_reply(self.training_steps),
            "ForwardReply",
        )?;
        let exact = sub(&reply, &eps_b.expose());
        let output = self.config.fixed_point.decode_matrix(&exact, 3);
        self.events.push_back(GuestEvent::Forward {
            round: self.round,
            purpose,
            output,
            exact,
        });
        match (purpose, a_cols) {
            (Purpose::Train, Some(a_cols)) => self.state = State::AwaitBackward { n, a_cols },
            _ => {
                self.round += 1;
                self.state = State::Idle;
            }
        }
        Ok(())
    }

    /// Runs the guest's backward step with δ = ∂L/∂z (n × m) and queues message 4.
    ///
    /// Without a label defence δ must be finite with |δ|, |η·δ| < 2^`delta_bound_bits`.
    /// With gradient perturbation **no check reads δ's values**: a label-dependent check
    /// failing here would close the session (an `Abort` the host sees) depending on a
    /// label, so NaN, ±∞ and out-of-range entries are sanitised and bounded by the clip
    /// instead (`tests/label_abort.rs`); only δ's shape, the row ids and the budget are
    /// checked.
    ///
    /// `row_ids` names the batch's examples, one id per row (no id twice): the record
    /// each row belongs to, the same id every time that record is used (the ids the host
    /// passed to [`crate::Host::start_round`] for the round, e.g. the index in the aligned
    /// data set). The guest counts the releases of each example's error per id; with
    /// gradient perturbation it refuses ([`ApiMisuse::PrivacyBudgetExhausted`], closing
    /// the session) a batch holding an example already released
    /// [`GradientPerturbation::releases_per_row`](crate::config::GradientPerturbation::releases_per_row)
    /// times, before anything derived from δ is computed.
    ///
    /// # Errors
    /// [`ApiMisuse::WrongState`] outside a training round or with DP-SGD configured (the
    /// session stays usable); a δ of the wrong shape, invalid row ids, an exhausted budget
    /// or (without gradient perturbation) an out-of-range δ close the session and send
    /// `Abort` to the host.
    pub fn backward<R: CryptoRng + ?Sized>(
        &mut self,
        delta: &Matrix<f64>,
        row_ids: &[u64],
        rng: &mut R,
    ) -> Result<(), Error> {
        if let Some(crate::config::LabelDefence::DpSgd(_)) = self.config.label_defence {
            return Err(ApiMisuse::WrongState {
                operation: "backward",
                state: "DP-SGD configured: call backward_dp_sgd",
            }
            .into());
        }
        self.backward_step(BackwardInput::Delta(delta), row_ids, rng)
            .map(|_| ())
    }

    /// The DP-SGD training step ([`crate::config::DpSgd`]): from the batch's per-example
    /// predictions, labels and label-independent directions, the guest computes the
    /// release (joint clipping, hidden Poisson inclusion, discrete Gaussian noise;
    /// `crate::dp_sgd`), applies D and Dη to the interactive layer exactly as
    /// [`Self::backward`] does, queues message 4, and returns the released top-model
    /// gradient (mean loss, value units) for the application's top model; the released
    /// error for its other layers comes in [`GuestEvent::BackwardDone`].
    ///
    /// `row_ids` as for [`Self::backward`]; an example that already took part in
    /// [`DpSgd::releases_per_row`](crate::config::DpSgd::releases_per_row) steps is
    /// refused before anything is computed. No check here depends on a label's value.
    ///
    /// # Errors
    /// Without a DP-SGD configuration, [`ApiMisuse::WrongState`] (the session stays
    /// usable); an invalid batch ([`crate::dp_sgd::DpSgdBatch::validate`]), a wrong row id
    /// list or an exhausted budget close the session like [`Self::backward`]'s errors.
    pub fn backward_dp_sgd<R: CryptoRng + ?Sized>(
        &mut self,
        batch: &crate::dp_sgd::DpSgdBatch,
        row_ids: &[u64],
        rng: &mut R,
    ) -> Result<Vec<f64>, Error> {
        if !matches!(
            self.config.label_defence,
            Some(crate::config::LabelDefence::DpSgd(_))
        ) {
            return Err(ApiMisuse::WrongState {
                operation: "backward_dp_sgd",
                state: "no DP-SGD in the configuration",
            }
            .into());
        }
        self.backward_step(BackwardInput::DpSgd(batch), row_ids, rng)
            .map(Option::unwrap_or_default)
    }

    fn backward_step<R: CryptoRng + ?Sized>(
        &mut self,
        input: BackwardInput<'_>,
        row_ids: &[u64],
        rng: &mut R,
    ) -> Result<Option<Vec<f64>>, Error> {
        let state = core::mem::replace(&mut self.state, State::Closed);
        let r = match state {
            State::AwaitBackward { n, a_cols } => {
                self.backward_inner(n, a_cols, input, row_ids, rng)
            }
            State::Closed => return Err(Error::SessionClosed),
            other => {
                let e = ApiMisuse::WrongState {
                    operation: "backward",
                    state: other.name(),
                };
                self.state = other;
                // Calling backward at the wrong time is the caller's bug; the session
                // stays usable.
                return Err(e.into());
            }
        };
        match r {
            Ok(top) => Ok(top),
            Err(e) => self.fail_on_error(Err(e), false).map(|()| None),
        }
    }

    fn backward_inner<R: CryptoRng + ?Sized>(
        &mut self,
        n: usize,
        a_cols: CtMatrix<S>,
        input: BackwardInput<'_>,
        row_ids: &[u64],
        rng: &mut R,
    ) -> Result<Option<Vec<f64>>, Error> {
        let (d_a, m) = (self.config.host_dim, self.config.out_dim);
        match input {
            BackwardInput::Delta(delta) => delta.check_shape("delta", (n, m))?,
            BackwardInput::DpSgd(batch) => batch.validate(m)?,
        }
        if input.rows() != n {
            return Err(ApiMisuse::ShapeMismatch {
                what: "DP-SGD batch",
                expected: (n, m),
                got: (input.rows(), m),
            }
            .into());
        }
        let budget = match self.config.label_defence {
            Some(crate::config::LabelDefence::GradientPerturbation(g)) => Some(g.releases_per_row),
            Some(crate::config::LabelDefence::DpSgd(g)) => Some(g.releases_per_row),
            _ => None,
        };
        self.released.check(row_ids, n, budget)?;
        // Randomised error labels are drawn once per record: a row id trained before with
        // another ỹ is refused (a function of ỹ and the ids, not of a true label).
        let error_labels = match input {
            BackwardInput::DpSgd(batch) => batch.error_labels.as_deref(),
            BackwardInput::Delta(_) => None,
        };
        if let Some(labels) = error_labels {
            for (id, &l) in row_ids.iter().zip(labels) {
                if self
                    .error_labels
                    .get(id)
                    .is_some_and(|&seen| seen != (l == 1.0))
                {
                    return Err(ApiMisuse::InvalidData {
                        reason: format!(
                            "the randomised error label of row id {id} differs from the one this session trained with: randomised labels are drawn once per record (drawing again costs ε_RR again)"
                        ),
                    }
                    .into());
                }
            }
        }
        let fp = self.config.fixed_point;
        // D and Dη: encoded δ, (gradient perturbation) the clipped and noised release, or
        // (DP-SGD) the release computed from the batch's directions.
        let (d, d_eta, released, top) = match (input, self.config.label_defence) {
            (BackwardInput::DpSgd(batch), Some(crate::config::LabelDefence::DpSgd(dp))) => {
                let r = crate::dp_sgd::dp_sgd_release(&self.config, &dp, batch, rng)?;
                (r.d, r.d_eta, Some(r.error), Some(r.guest_gradient))
            }
            (BackwardInput::Delta(delta), _) => {
                let (d, d_eta, released) = crate::defences::guest_errors(&self.config, delta, rng)?;
                (d, d_eta, released, None)
            }
            (BackwardInput::DpSgd(_), _) => {
                return Err(ApiMisuse::WrongState {
                    operation: "backward_dp_sgd",
                    state: "no DP-SGD in the configuration",
                }
                .into());
            }
        };
        self.released_error = released;
        self.released.record(row_ids);
        if let Some(labels) = error_labels {
            for (&id, &l) in row_ids.iter().zip(labels) {
                self.error_labels.insert(id, l == 1.0);
            }
        }
        let ek = self.ek()?.clone();
        let noise_w = Matrix::from_fn(d_a, m, |_, _| match self.config.profile {
            Profile::Hardened => uniform_mask(self.bounds.noise_w(), rng),
            Profile::FateFaithful => fate_mask(fp.frac_bits(), 2, rng),
        });
        let secret = self.config.profile == Profile::Hardened;
        let mut g = gradient_product(&ek, &a_cols, &d_eta, self.bounds.d, secret)?;
        g.add_plain(&ek, &noise_w)?;
        if self.config.profile == Profile::Hardened {
            self.rerandomize_outgoing(&mut g)?;
        }
        self.outbox
            .push_back(Message::MaskedGradient(RoundCiphertexts {
                round: self.round,
                data: g.to_wire(&ek),
            }));
        self.state = State::AwaitGradientReply {
            n,
            noise_w: SecretMatrix::from_matrix(&noise_w),
            d: SecretMatrix::from_matrix(&d),
            d_eta: SecretMatrix::from_matrix(&d_eta),
        };
        Ok(top)
    }

    fn on_gradient_reply(
        &mut self,
        n: usize,
        noise_w: SecretMatrix,
        d: SecretMatrix,
        d_eta: SecretMatrix,
        r: RoundIntegers,
    ) -> Result<(), Error> {
        check_round(self.round, r.round)?;
        let expected = (self.config.host_dim, self.config.out_dim);
        let reply = r.data.values("GradientReply", expected)?;
        check_bits(&reply, self.bounds.gradient_reply(), "GradientReply")?;
        let g_hat = sub(&reply, &noise_w.expose());
        self.state = State::AwaitAcc {
            n,
            d,
            d_eta,
            g_hat: SecretMatrix::from_matrix(&g_hat),
        };
        Ok(())
    }

    fn on_encrypted_acc(
        &mut self,
        n: usize,
        d: SecretMatrix,
        d_eta: SecretMatrix,
        g_hat: SecretMatrix,
        c: RoundCiphertexts,
    ) -> Result<(), Error> {
        check_round(self.round, c.round)?;
        let ek = self.ek()?.clone();
        let layouts = self.layouts(n)?;
        let (d_a, m) = (self.config.host_dim, self.config.out_dim);
        let mut w = CtMatrix::<S>::from_wire(&ek, &c.data, d_a, m, layouts.acc, "EncryptedAcc")?;
        // [[W_t]] = W̃_t ⊕ [[acc_t]] with the pre-update W̃_t (invariant f.5).
        let w_tilde = self.noisy_weight.expose();
        w.add_plain(&ek, &w_tilde)?;
        let secret = self.config.profile == Profile::Hardened;
        let mut da = input_gradient_product(&ek, &w, &d.expose(), self.bounds.d, secret)?;
        if self.config.profile == Profile::Hardened {
            self.rerandomize_outgoing(&mut da)?;
        }
        debug_assert_eq!(
            da.layout,
            Layout {
                axis: Axis::Cols,
                ..layouts.acc
            }
        );
        self.outbox
            .push_back(Message::InputGradient(RoundCiphertexts {
                round: self.round,
                data: da.to_wire(&ek),
            }));
        // Updates: W̃ ← W̃ − (Gη + ε_A); b_A ← b_A − S·Σ_rows Dη.
        let updated = sub(&w_tilde, &g_hat.expose());
        self.noisy_weight = SecretMatrix::from_matrix(&updated);
        let f = self.config.fixed_point.frac_bits();
        let d_eta = d_eta.expose();
        let bias = self.bias.expose();
        let new_bias = Matrix::from_fn(1, m, |_, j| {
            let mut s = BigInt::from(0);
            for i in 0..d_eta.rows() {
                s += d_eta.get(i, j).cloned().unwrap_or_default();
            }
            bias.get(0, j).cloned().unwrap_or_default() - (s << f)
        });
        self.bias = SecretMatrix::from_matrix(&new_bias);
        self.events.push_back(GuestEvent::BackwardDone {
            round: self.round,
            released_error: self.released_error.take(),
            scaled_error: d_eta,
        });
        self.training_steps += 1;
        self.round += 1;
        self.state = State::Idle;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Paillier;
    use crate::config::Encryption;
    use crate::protocol::Host;
    use rand::SeedableRng;
    use rand::rngs::ChaCha20Rng;

    fn key_pair() -> (fl_paillier::DecryptionKey, fl_paillier::DecryptionKey) {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let dk = fl_paillier::keygen(1024, &mut rng).unwrap();
        let (p, q) = dk.expose_primes();
        let copy = fl_paillier::DecryptionKey::from_primes(
            &num_bigint::BigUint::from_bytes_be(&p),
            &num_bigint::BigUint::from_bytes_be(&q),
        )
        .unwrap();
        (dk, copy)
    }

    /// A guest after the key exchange and the host's Activations for a 3 × 2 batch,
    /// decoded into ⟦A⟧ by rows; also the config and a copy of the host's key.
    fn received_activations(
        profile: Profile,
        encryption: Encryption,
    ) -> (
        ProtocolConfig,
        fl_paillier::DecryptionKey,
        Guest<Paillier>,
        CtMatrix<Paillier>,
    ) {
        let (dk, dk2) = key_pair();
        let mut c = ProtocolConfig::new(profile, 2, 2).accepting_exact_error_and_activation_leaks();
        c.min_key_bits = 1024;
        c.encryption = encryption;
        let w = Matrix::from_vec(2, 2, vec![0.1, -0.2, 0.3, 0.05]).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        // Hardened: both parties hold a share (here the same values); FateFaithful: the
        // guest holds W₀.
        let hw = (profile == Profile::Hardened).then_some(&w);
        let gw = &w;
        let mut host = Host::<Paillier>::new(c, dk, hw, &mut rng).unwrap();
        let mut guest = Guest::<Paillier>::new(c, &[0.01, 0.02], gw).unwrap();
        guest
            .handle_message(host.poll_message().unwrap(), &mut rng)
            .unwrap();
        let a = Matrix::from_vec(3, 2, vec![0.5, 1.0, 1.5, 0.25, 0.0, 2.0]).unwrap();
        host.start_round(Purpose::Predict, &a, &[0, 1, 2], &mut rng)
            .unwrap();
        let Some(Message::Activations(act)) = host.poll_message() else {
            panic!("expected Activations")
        };
        let ek = guest.encryption_key().unwrap().clone();
        let layouts = guest.layouts(3).unwrap();
        let a_rows =
            CtMatrix::<Paillier>::from_wire(&ek, &act.by_rows, 3, 2, layouts.forward, "a").unwrap();
        (c, dk2, guest, a_rows)
    }

    /// (5) Re-randomised ciphertexts differ from the deterministic result and decrypt to the
    /// same values; FateFaithful sends the deterministic result (FATE's leak, §e.5).
    #[test]
    fn guest_to_host_ciphertexts_are_rerandomised_in_hardened_only() {
        for (profile, encryption) in [
            (Profile::Hardened, Encryption::KeyOwnerCrt),
            (Profile::Hardened, Encryption::Djn),
            (Profile::FateFaithful, Encryption::Textbook),
        ] {
            let (c, dk2, mut guest, a_rows) = received_activations(profile, encryption);
            let (plain, eps1) = guest
                .masked_forward(&a_rows, false, &mut ChaCha20Rng::seed_from_u64(3))
                .unwrap();
            let (sent, eps2) = guest
                .masked_forward(&a_rows, true, &mut ChaCha20Rng::seed_from_u64(3))
                .unwrap();
            assert_eq!(eps1, eps2, "same masks in both computations");
            let bound = Bounds::new(&c).masked_forward(0);
            let d1 = plain.decrypt(&dk2, bound, "x").unwrap();
            let d2 = sent.decrypt(&dk2, bound, "x").unwrap();
            assert_eq!(d1, d2, "re-randomisation must not change the plaintext");
            let differ = plain
                .cts
                .as_slice()
                .iter()
                .zip(sent.cts.as_slice())
                .all(|(x, y)| x != y);
            let same = plain.cts.as_slice() == sent.cts.as_slice();
            match profile {
                Profile::Hardened => assert!(differ, "every hardened ciphertext must be fresh"),
                _ => assert!(same, "FateFaithful returns the deterministic product"),
            }
        }
    }

    /// The three ciphertext products check the plaintext operand's shape against the
    /// ciphertext matrix and return a typed error instead of indexing out of range.
    #[test]
    fn products_refuse_operands_of_the_wrong_shape() {
        let (_, _, guest, a_rows) =
            received_activations(Profile::Hardened, Encryption::KeyOwnerCrt);
        let ek = guest.encryption_key().unwrap().clone();
        // 5 × 7 matches neither dimension of the (blocks × 2) ciphertext matrix.
        let wrong = Matrix::from_vec(5, 7, vec![BigInt::from(1); 35]).unwrap();
        let is_shape_error = |r: Result<CtMatrix<Paillier>, Error>| {
            matches!(
                r,
                Err(Error::ApiMisuse(ApiMisuse::ShapeMismatch {
                    got: (5, 7),
                    ..
                }))
            )
        };
        assert!(is_shape_error(forward_product::<Paillier>(
            &ek, &a_rows, &wrong, 40, false
        )));
        assert!(is_shape_error(gradient_product::<Paillier>(
            &ek, &a_rows, &wrong, 40, false
        )));
        assert!(is_shape_error(input_gradient_product::<Paillier>(
            &ek, &a_rows, &wrong, 40, false
        )));
    }
}
