//! The host (party A): features, the key pair, the accumulated noise acc.

use std::collections::VecDeque;

use num_bigint::BigInt;
use rand::CryptoRng;

use super::ops::{CtMatrix, Encryptor};
use super::{RoundLayouts, Session, check_round};
use crate::config::{Bounds, Encryption, Profile, ProtocolConfig, fate_mask, uniform_mask};
use crate::defences::RowLedger;
use crate::error::{ApiMisuse, Error};
use crate::fixed::int_matmul;
use crate::matrix::Matrix;
use crate::message::{
    Activations, Hello, IntegerMatrix, Message, Purpose, RoundCiphertexts, RoundIntegers,
    key_proof_context,
};
use crate::packing::{Axis, Layout};
use crate::scheme::HomomorphicScheme;
use crate::secret::SecretMatrix;

/// What the host reports to its application.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum HostEvent {
    /// The guest has its forward output for `round` (prediction rounds end here).
    ForwardServed {
        /// The round.
        round: u64,
        /// Training or prediction.
        purpose: Purpose,
        /// A as encrypted in message 1: the bottom output at scale S (after EmbeddingDP
        /// when configured). The host's own value, for its records and its view
        /// ([`crate::attacks::HostView`]).
        activations: Matrix<BigInt>,
    },
    /// δ_A = δ·W_tᵀ, the gradient for the host's bottom model (training rounds end here).
    InputGradient {
        /// The round.
        round: u64,
        /// δ_A as floats (decoded from scale S³).
        gradient: Matrix<f64>,
        /// δ_A as the exact integer at scale S³.
        exact: Matrix<BigInt>,
    },
}

/// The host's exportable state (FATE saves acc in the host's model). **Secret**: with the
/// guest's W̃ it gives the effective weight.
#[derive(Clone, PartialEq, Eq)]
pub struct HostSnapshot {
    /// acc at scale S².
    pub accumulated_noise: Matrix<BigInt>,
    /// Completed training steps.
    pub training_steps: u64,
    /// Completed rounds (training and prediction).
    pub round: u64,
    /// Training rounds per row id (the host's count of the guest's releases, for its
    /// report). [`Host::snapshot`] always fills it; `None` stands for a snapshot without
    /// it (older or hand-built), which [`Host::resume`] refuses under a label defence that
    /// counts releases.
    pub rows_trained: Option<RowLedger>,
    /// Rounds per row id (training and prediction: each sends the row once; the
    /// EmbeddingDP composition per row). `None` as for `rows_trained`; refused by
    /// [`Host::resume`] with EmbeddingDP configured.
    pub rows_sent: Option<RowLedger>,
}

impl core::fmt::Debug for HostSnapshot {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "HostSnapshot {{ training_steps: {}, round: {}, .. }}",
            self.training_steps, self.round
        )
    }
}

enum State {
    Idle,
    AwaitMaskedForward {
        purpose: Purpose,
        a: SecretMatrix,
        layouts: RoundLayouts,
    },
    AwaitMaskedGradient {
        n: usize,
        layouts: RoundLayouts,
    },
    AwaitInputGradient {
        n: usize,
        layouts: RoundLayouts,
    },
    Closed,
}

impl State {
    fn name(&self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::AwaitMaskedForward { .. } => "waiting for MaskedForward (2)",
            Self::AwaitMaskedGradient { .. } => "waiting for MaskedGradient (4)",
            Self::AwaitInputGradient { .. } => "waiting for InputGradient (7)",
            Self::Closed => "closed",
        }
    }
}

/// The host's state machine. See the [module docs](crate::protocol) for the calling
/// contract.
pub struct Host<S: HomomorphicScheme = crate::Paillier> {
    config: ProtocolConfig,
    bounds: Bounds,
    dk: S::DecryptionKey,
    ek: S::EncryptionKey,
    /// The DJN encryptor (exponents of 2κ bits) when the encryption is `Djn`.
    fixed_base: Option<S::FixedBase>,
    acc: SecretMatrix,
    /// Training rounds per row id (each is one release of that row's error by the guest).
    rows_trained: RowLedger,
    /// Rounds per row id (training and prediction: each sends the row once).
    rows_sent: RowLedger,
    /// The host's features randomised once before training (host-local evidence).
    features_once: Option<crate::host_features::FeaturesRandomizedOnce>,
    training_steps: u64,
    round: u64,
    state: State,
    outbox: VecDeque<Message>,
    events: VecDeque<HostEvent>,
}

impl<S: HomomorphicScheme> core::fmt::Debug for Host<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "Host {{ profile: {:?}, round: {}, state: {}, .. }}",
            self.config.profile,
            self.round,
            self.state.name()
        )
    }
}

impl<S: HomomorphicScheme> Session for Host<S> {
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

impl<S: HomomorphicScheme> Host<S> {
    /// Creates the host and queues its [`Message::Hello`].
    ///
    /// * `Hardened`: `initial_share` is required: acc₀ (d_A × m), the host's share of the
    ///   jointly drawn initial weight W₀ = W̃₀ + acc₀, drawn by the host from the agreed
    ///   initialiser with half its variance ([`crate::nn::weight_share`]); the guest draws
    ///   W̃₀ the same way. Neither share is ever sent (a host that knew W₀ would solve
    ///   δ_A = D·W₀ᵀ for the guest's error D). At step 0 the host's estimate of D from
    ///   acc₀ fails only at d_A = m: for d_A > m the rows of δ_A span W₀'s columns and
    ///   the estimate reaches R² 0.94–0.99 (`tests/view_attacks.rs`). From the second
    ///   step on the exact outputs and the public update give W_t and D_t back to the
    ///   host ([`crate::attacks::host_multi_step`]); only the DP defences protect D
    ///   (crate README, "Privacy").
    /// * `FateFaithful`: `initial_share` must be `None`: acc₀ = 0 and the guest holds W₀.
    ///
    /// Each share must be below 2^`weight_bound_bits` in absolute value.
    pub fn new<R: CryptoRng + ?Sized>(
        config: ProtocolConfig,
        dk: S::DecryptionKey,
        initial_share: Option<&Matrix<f64>>,
        rng: &mut R,
    ) -> Result<Self, Error> {
        config.validate()?;
        let (d_a, m) = (config.host_dim, config.out_dim);
        let acc = match (config.profile, initial_share) {
            (Profile::Hardened, Some(w)) => {
                w.check_shape("initial_share", (d_a, m))?;
                SecretMatrix::from_matrix(&config.fixed_point.encode_matrix(
                    w,
                    2,
                    config.weight_bound_bits,
                    "initial_share",
                )?)
            }
            (Profile::Hardened, None) => {
                return Err(ApiMisuse::InvalidConfig {
                    reason: "the hardened host draws its share acc₀ of W₀: pass `initial_share`"
                        .into(),
                }
                .into());
            }
            (Profile::FateFaithful, None) => SecretMatrix::zeros(d_a, m),
            (Profile::FateFaithful, Some(_)) => {
                return Err(ApiMisuse::InvalidConfig {
                    reason: "in FateFaithful the guest initialises W; pass `initial_share = None`"
                        .into(),
                }
                .into());
            }
        };
        Self::start(
            config,
            dk,
            acc,
            (RowLedger::default(), RowLedger::default()),
            (0, 0),
            rng,
        )
    }

    /// Continues a session from a [`HostSnapshot`] (of a host with the same `config`):
    /// acc, the counters and the per-row ledgers are restored and a fresh
    /// [`Message::Hello`] is queued, for a guest resumed from its snapshot of the same
    /// moment ([`crate::Guest::resume`]).
    ///
    /// # Errors
    /// Those of [`Self::new`] for the configuration and the key;
    /// [`ApiMisuse::ShapeMismatch`] for an acc that is not d_A × m;
    /// [`ApiMisuse::ResumeWithoutLedger`] when a ledger the host's report needs is absent
    /// (`rows_sent` with EmbeddingDP; `rows_trained` with gradient perturbation or
    /// DP-SGD).
    pub fn resume<R: CryptoRng + ?Sized>(
        config: ProtocolConfig,
        dk: S::DecryptionKey,
        snapshot: HostSnapshot,
        rng: &mut R,
    ) -> Result<Self, Error> {
        config.validate()?;
        snapshot.accumulated_noise.check_shape(
            "snapshot accumulated_noise",
            (config.host_dim, config.out_dim),
        )?;
        let counts_releases = matches!(
            config.label_defence,
            Some(crate::config::LabelDefence::GradientPerturbation(_))
                | Some(crate::config::LabelDefence::DpSgd(_))
        );
        let rows_trained = match snapshot.rows_trained {
            Some(l) => l,
            None if counts_releases => {
                return Err(ApiMisuse::ResumeWithoutLedger {
                    defence: "the label defence (host's count of releases)",
                }
                .into());
            }
            None => RowLedger::default(),
        };
        let rows_sent = match snapshot.rows_sent {
            Some(l) => l,
            None if config.embedding_dp.is_some() => {
                return Err(ApiMisuse::ResumeWithoutLedger {
                    defence: "EmbeddingDP (host's count of rounds per row)",
                }
                .into());
            }
            None => RowLedger::default(),
        };
        Self::start(
            config,
            dk,
            SecretMatrix::from_matrix(&snapshot.accumulated_noise),
            (rows_trained, rows_sent),
            (snapshot.training_steps, snapshot.round),
            rng,
        )
    }

    /// The key checks, the DJN base and the hello of [`Self::new`] and [`Self::resume`]:
    /// a host with share `acc`, ledgers (trained, sent) and counters (training steps,
    /// round).
    fn start<R: CryptoRng + ?Sized>(
        config: ProtocolConfig,
        dk: S::DecryptionKey,
        acc: SecretMatrix,
        (rows_trained, rows_sent): (RowLedger, RowLedger),
        (training_steps, round): (u64, u64),
        rng: &mut R,
    ) -> Result<Self, Error> {
        let ek = S::encryption_key(&dk);
        if S::key_bits(&ek) < config.min_key_bits {
            return Err(ApiMisuse::InvalidConfig {
                reason: format!(
                    "own key has {} bits; the configuration requires ≥ {}",
                    S::key_bits(&ek),
                    config.min_key_bits
                ),
            }
            .into());
        }
        let bounds = Bounds::new(&config);
        // DJN: the host draws its base h_s itself, for its own encryptions only (it
        // protects the host's values, and the host is the party that chose the group).
        // The guest never needs it: it re-randomises with textbook sⁿ.
        let fixed_base = match config.encryption {
            Encryption::Djn => {
                let public = S::fixed_base_generate(&ek, rng);
                Some(S::fixed_base_new(
                    &ek,
                    &public,
                    S::fixed_base_default_bits(&ek),
                )?)
            }
            _ => None,
        };
        // The proof that the key is well formed (gcd(n, φ(n)) = 1), bound to this
        // protocol and configuration: the guest verifies it before any use of the key.
        let key_proof = S::key_proof(&dk, &key_proof_context(&config))?;
        let hello = Message::Hello(Hello {
            config,
            public_key: S::key_to_bytes(&ek),
            key_proof,
        });
        Ok(Self {
            config,
            bounds,
            dk,
            ek,
            fixed_base,
            acc,
            rows_trained,
            rows_sent,
            features_once: None,
            training_steps,
            round,
            state: State::Idle,
            outbox: VecDeque::from([hello]),
            events: VecDeque::new(),
        })
    }

    /// The session configuration.
    pub fn config(&self) -> &ProtocolConfig {
        &self.config
    }

    /// The current round (forward passes started so far, counting the current one).
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

    /// Whether the host waits for a local command (no round in progress).
    pub fn is_idle(&self) -> bool {
        matches!(self.state, State::Idle)
    }

    /// The guarantee each party got so far ([`crate::defences::PrivacyReport`]), counted
    /// per row id: features from this host's EmbeddingDP and the rounds the most-sent row
    /// was sent in; labels from the agreed label defence and the training rounds of the
    /// most-trained row (each is one release by the guest; the guest's own report counts
    /// the releases it made). `delta` is the δ of the label guarantee.
    ///
    /// # Errors
    /// An invalid δ.
    pub fn privacy_report(&self, delta: f64) -> Result<crate::defences::PrivacyReport, Error> {
        let report = crate::defences::privacy_report(
            &self.config,
            self.rows_trained.most(),
            Some(self.rows_sent.most()),
            delta,
        )?;
        Ok(crate::defences::with_features_once(
            report,
            self.features_once,
        ))
    }

    /// Declares that the feature matrix this host trains and predicts on was randomised
    /// once before training ([`crate::host_features::HostFeatureDefence::privatize_host_features`]
    /// made `evidence`); [`Self::privacy_report`] then states its whole-run ε per row,
    /// independent of the rounds. Host-local: nothing is sent to the guest. A later
    /// declaration replaces an earlier one.
    ///
    /// # Errors
    /// [`crate::error::ApiMisuse::InvalidConfig`] when the evidence's ε is not finite or
    /// negative (it cannot be, when made by `privatize_host_features`).
    pub fn declare_features_randomized_once(
        &mut self,
        evidence: crate::host_features::FeaturesRandomizedOnce,
    ) -> Result<(), Error> {
        let eps = evidence.epsilon_per_row();
        if !(eps.is_finite() && eps >= 0.0) {
            return Err(ApiMisuse::InvalidConfig {
                reason: format!("features randomised once: ε per row {eps} is not a valid ε"),
            }
            .into());
        }
        self.features_once = Some(evidence);
        Ok(())
    }

    /// The public key.
    pub fn encryption_key(&self) -> &S::EncryptionKey {
        &self.ek
    }

    /// Exports acc, the counters and the per-row ledgers (**secret**; for saving the
    /// model, for [`Self::resume`] and for tests). Take it while the host is idle.
    pub fn snapshot(&self) -> HostSnapshot {
        HostSnapshot {
            accumulated_noise: self.acc.expose(),
            training_steps: self.training_steps,
            round: self.round,
            rows_trained: Some(self.rows_trained.clone()),
            rows_sent: Some(self.rows_sent.clone()),
        }
    }

    /// Where this host's ciphertexts get their randomness.
    fn encryptor(&self) -> Encryptor<'_, S> {
        match (self.config.encryption, &self.fixed_base) {
            (Encryption::Djn, Some(fb)) => Encryptor::FixedBase(fb),
            (Encryption::KeyOwnerCrt, _) => Encryptor::Owner(&self.dk),
            _ => Encryptor::Public(&self.ek),
        }
    }

    /// The next message to send, if any.
    #[must_use]
    pub fn poll_message(&mut self) -> Option<Message> {
        self.outbox.pop_front()
    }

    /// The next event for the application, if any.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<HostEvent> {
        self.events.pop_front()
    }

    /// Starts a round with the bottom-model output a_A (n × d_A, |a_A| < 2^bound):
    /// encrypts it and queues message 1.
    ///
    /// `row_ids` names the batch's rows, one id per row (no id twice): the record each row
    /// belongs to, the same id every time that record is used (e.g. its index in the
    /// aligned data set). The host counts per id how often each row was sent (for
    /// EmbeddingDP's composition) and trained on, for [`Self::privacy_report`].
    pub fn start_round<R: CryptoRng + ?Sized>(
        &mut self,
        purpose: Purpose,
        activations: &Matrix<f64>,
        row_ids: &[u64],
        rng: &mut R,
    ) -> Result<(), Error> {
        let closed = self.is_closed();
        let r = self.start_round_inner(purpose, activations, row_ids, rng);
        self.fail_on_error(r, closed)
    }

    fn start_round_inner<R: CryptoRng + ?Sized>(
        &mut self,
        purpose: Purpose,
        activations: &Matrix<f64>,
        row_ids: &[u64],
        rng: &mut R,
    ) -> Result<(), Error> {
        match self.state {
            State::Idle => {}
            State::Closed => return Err(Error::SessionClosed),
            _ => {
                return Err(ApiMisuse::WrongState {
                    operation: "start_round",
                    state: self.state.name(),
                }
                .into());
            }
        }
        let n = activations.rows();
        if n == 0 || n > self.config.max_batch_rows {
            return Err(ApiMisuse::InvalidConfig {
                reason: format!(
                    "batch of {n} rows; allowed 1..={}",
                    self.config.max_batch_rows
                ),
            }
            .into());
        }
        activations.check_shape("activations", (n, self.config.host_dim))?;
        self.rows_sent.check(row_ids, n, None)?;
        let privatized = match self.config.embedding_dp {
            Some(eps) => Some(crate::defences::embedding_dp_rows(
                &fl_ldp::EmbeddingDp::new(Some(eps)),
                activations,
                rng,
            )?),
            None => None,
        };
        let a = self.config.fixed_point.encode_matrix(
            privatized.as_ref().unwrap_or(activations),
            1,
            self.config.activation_bound_bits,
            "activations",
        )?;
        let layouts = RoundLayouts::new(
            &self.config,
            &self.bounds,
            S::plaintext_bits(&self.ek),
            n,
            self.training_steps,
        )?;
        let encryptor = self.encryptor();
        let by_rows = CtMatrix::<S>::encrypt(&encryptor, &a, layouts.forward, rng)?;
        let by_cols = if purpose == Purpose::Train && self.config.packing {
            Some(CtMatrix::<S>::encrypt(&encryptor, &a, layouts.gradient, rng)?.to_wire(&self.ek))
        } else {
            None
        };
        self.rows_sent.record(row_ids);
        if purpose == Purpose::Train {
            self.rows_trained.record(row_ids);
        }
        self.outbox.push_back(Message::Activations(Activations {
            round: self.round,
            purpose,
            by_rows: by_rows.to_wire(&self.ek),
            by_cols,
        }));
        self.state = State::AwaitMaskedForward {
            purpose,
            a: SecretMatrix::from_matrix(&a),
            layouts,
        };
        Ok(())
    }

    /// Decodes a frame from the guest and feeds it to [`Self::handle_message`]. A frame that
    /// does not decode closes the session like any other protocol error.
    pub fn handle_frame<R: CryptoRng + ?Sized>(
        &mut self,
        frame: &[u8],
        rng: &mut R,
    ) -> Result<(), Error> {
        self.feed_frame(frame, rng)
    }

    /// Feeds a message from the guest.
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
            (
                State::AwaitMaskedForward {
                    purpose,
                    a,
                    layouts,
                },
                Message::MaskedForward(m),
            ) => self.on_masked_forward(purpose, a, layouts, m),
            (State::AwaitMaskedGradient { n, layouts }, Message::MaskedGradient(m)) => {
                self.on_masked_gradient(n, layouts, m, rng)
            }
            (State::AwaitInputGradient { n, layouts }, Message::InputGradient(m)) => {
                self.on_input_gradient(n, layouts, m)
            }
            (state, msg) => Err(Error::UnexpectedMessage {
                expected: state.name(),
                got: msg.kind_name(),
            }),
        }
    }

    fn on_masked_forward(
        &mut self,
        purpose: Purpose,
        a: SecretMatrix,
        layouts: RoundLayouts,
        m: RoundCiphertexts,
    ) -> Result<(), Error> {
        check_round(self.round, m.round)?;
        let t = self.training_steps;
        let (n, out) = (a.shape().0, self.config.out_dim);
        let cts =
            CtMatrix::<S>::from_wire(&self.ek, &m.data, n, out, layouts.forward, "MaskedForward")?;
        let u = cts.decrypt(&self.dk, self.bounds.masked_forward(t), "MaskedForward")?;
        let a_acc = int_matmul(&a.expose(), &self.acc.expose());
        let reply = Matrix::from_fn(n, out, |i, j| {
            u.get(i, j).cloned().unwrap_or_default() + a_acc.get(i, j).cloned().unwrap_or_default()
        });
        let width = IntegerMatrix::width_for_bits(self.bounds.forward_reply(t));
        self.outbox.push_back(Message::ForwardReply(RoundIntegers {
            round: self.round,
            data: IntegerMatrix::new(&reply, width)?,
        }));
        self.events.push_back(HostEvent::ForwardServed {
            round: self.round,
            purpose,
            activations: a.expose(),
        });
        match purpose {
            Purpose::Train => self.state = State::AwaitMaskedGradient { n, layouts },
            Purpose::Predict => {
                self.round += 1;
                self.state = State::Idle;
            }
        }
        Ok(())
    }

    fn on_masked_gradient<R: CryptoRng + ?Sized>(
        &mut self,
        n: usize,
        layouts: RoundLayouts,
        m: RoundCiphertexts,
        rng: &mut R,
    ) -> Result<(), Error> {
        check_round(self.round, m.round)?;
        let (d_a, out) = (self.config.host_dim, self.config.out_dim);
        let grad_layout = Layout {
            axis: Axis::Rows,
            ..layouts.gradient
        };
        let cts =
            CtMatrix::<S>::from_wire(&self.ek, &m.data, d_a, out, grad_layout, "MaskedGradient")?;
        let g = cts.decrypt(&self.dk, self.bounds.masked_gradient(), "MaskedGradient")?;
        let f = self.config.fixed_point.frac_bits();
        let eps_a = Matrix::from_fn(d_a, out, |_, _| match self.config.profile {
            Profile::Hardened => uniform_mask(self.bounds.eps_a(), rng),
            Profile::FateFaithful => fate_mask(f, 2, rng),
        });
        let reply = Matrix::from_fn(d_a, out, |i, j| {
            g.get(i, j).cloned().unwrap_or_default() + eps_a.get(i, j).cloned().unwrap_or_default()
        });
        let width = IntegerMatrix::width_for_bits(self.bounds.gradient_reply());
        self.outbox.push_back(Message::GradientReply(RoundIntegers {
            round: self.round,
            data: IntegerMatrix::new(&reply, width)?,
        }));
        // [[acc_t]] is sent before acc is updated (FATE's order, invariant f.2).
        let acc_t = self.acc.expose();
        let enc_acc = CtMatrix::<S>::encrypt(&self.encryptor(), &acc_t, layouts.acc, rng)?;
        self.outbox
            .push_back(Message::EncryptedAcc(RoundCiphertexts {
                round: self.round,
                data: enc_acc.to_wire(&self.ek),
            }));
        let next = Matrix::from_fn(d_a, out, |i, j| {
            acc_t.get(i, j).cloned().unwrap_or_default()
                + eps_a.get(i, j).cloned().unwrap_or_default()
        });
        self.acc = SecretMatrix::from_matrix(&next);
        self.state = State::AwaitInputGradient { n, layouts };
        Ok(())
    }

    fn on_input_gradient(
        &mut self,
        n: usize,
        layouts: RoundLayouts,
        m: RoundCiphertexts,
    ) -> Result<(), Error> {
        check_round(self.round, m.round)?;
        let d_a = self.config.host_dim;
        let layout = Layout {
            axis: Axis::Cols,
            ..layouts.acc
        };
        let cts = CtMatrix::<S>::from_wire(&self.ek, &m.data, n, d_a, layout, "InputGradient")?;
        // The bound uses t (the step whose acc_t and W̃_t produced δ_A).
        let exact = cts.decrypt(
            &self.dk,
            self.bounds.input_gradient(self.training_steps),
            "InputGradient",
        )?;
        let gradient = self.config.fixed_point.decode_matrix(&exact, 3);
        self.events.push_back(HostEvent::InputGradient {
            round: self.round,
            gradient,
            exact,
        });
        self.training_steps += 1;
        self.round += 1;
        self.state = State::Idle;
        Ok(())
    }

    /// Describes the current state (for diagnostics).
    pub fn state_name(&self) -> &'static str {
        self.state.name()
    }
}
