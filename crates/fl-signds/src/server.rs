//! The server: report validation, aggregation and the r_est state machine.
//!
//! A sans-IO state machine. [`Server::begin_round`] opens a [`Round`]; every upload goes
//! through [`Round::ingest`] (or [`Round::ingest_bytes`]), which validates the report
//! completely before it touches the round's aggregate, so a rejected report changes
//! nothing; [`Server::finish_round`] applies
//!
//! w_j' = w_j + g · Σ_i n_i·s_i·1[j ∈ J_i] / Σ_i n_i
//!
//! with g = η·r_est ([`StepRule::Mean`], the default of the `Exact` profile, η the server
//! learning rate), g = 3·N_exp·r_est (upstream's code, [`StepRule::Code`], the default of
//! the `MindSporeCompatible` profile) or the docs' g = 2·r_est·N_exp ([`StepRule::Docs`]),
//! and moves the r_est state machine ([`StepSizeEstimator`]) with the round's MagRR bits.
//! Everything here is post-processing of the reports: no rule changes a client's privacy.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::law::SelectionLaw;
use crate::params::{Params, Profile};
use crate::report::{Report, Sign};

/// Initial r_est (upstream constant and client default).
pub const INITIAL_STEP_ESTIMATE: f64 = 1e-5;
/// Growth-phase factor: r_est × 5 when the majority says r ≥ 2·r_est.
pub const GROWTH_FACTOR: f64 = 5.0;
/// Shrink-phase divisor: r_est ÷ 1.5 when the majority says r < r_est/2.
pub const SHRINK_DIVISOR: f64 = 1.5;
/// The switch to the shrink phase happens on growth round number `REACH_THRESHOLD + 1`
/// with majority B = 1 (cumulative, not necessarily consecutive).
pub const REACH_THRESHOLD: u32 = 10;
/// Fewer MagRR bits than this fraction of the expected clients is a round with too few
/// votes: upstream's rules ([`StepRule::Code`], [`StepRule::Docs`]) then set r_est so that
/// the next step equals the global learning rate; [`StepRule::Mean`] leaves r_est as it is.
pub const FALLBACK_FRACTION: f64 = 0.05;
/// The default server learning rate η of [`StepRule::Mean`] (g = η·r_est), chosen by the
/// digits ablation (crate README, `examples/digits.rs`).
pub const DEFAULT_SERVER_LEARNING_RATE: f64 = 4.0;

/// The phase of the r_est state machine, sent to clients with r_est.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// "Fast growth": b = 1[r < 2·r_est]; majority 0 multiplies r_est by 5.
    Growth,
    /// "Shrink" (upstream `is_reached` = 1): b = 1[r < r_est/2]; majority 1 divides r_est
    /// by 1.5. There is no way back to growth.
    Shrink,
}

/// What the server sends each selected client before a round (upstream's startFLJob
/// reply fields `signds_r_est`, `signds_is_reached`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Broadcast {
    /// The current step-size estimate r_est.
    pub r_est: f64,
    /// The current phase.
    pub phase: Phase,
}

impl Default for Broadcast {
    /// Upstream's client default before any server value: r_est = 1e−5, growth.
    fn default() -> Self {
        Self {
            r_est: INITIAL_STEP_ESTIMATE,
            phase: Phase::Growth,
        }
    }
}

/// How the global step g is derived from r_est.
///
/// Upstream's rules scale with N_exp: a coordinate that every client selects with the same
/// sign moves by c·N_exp·r_est, N_exp times what one client's update moved it (measured on
/// digits with 50 clients: test loss 2.30 → 15–24 in the first rounds at ε = 100, where
/// clients agree most). [`StepRule::Mean`] moves it by η·r_est whatever N_exp is: the mean
/// of the clients' reports, each read as r_est on its selected indices, times a server
/// learning rate η, as FedAvg with a server learning rate does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StepRule {
    /// Upstream's code: g = 3·N_exp·r_est in both phases; a round with fewer than 5 % of
    /// the expected MagRR bits sets r_est so that the next step is the global learning rate.
    Code,
    /// Upstream's docs: g = 2·r_est·N, with N the expected number of clients N_exp; the
    /// same fallback as [`StepRule::Code`].
    Docs,
    /// g = η·r_est (η: [`Server::with_server_learning_rate`], default
    /// [`DEFAULT_SERVER_LEARNING_RATE`]). A round with too few MagRR bits leaves r_est
    /// unchanged ([`Transition::TooFewBits`]); an empty round changes nothing. The default
    /// rule of the `Exact` profile.
    #[default]
    Mean,
}

impl StepRule {
    /// The factor c in g = c·N_exp·r_est of upstream's rules; `None` for [`StepRule::Mean`].
    #[must_use]
    pub fn factor(self) -> Option<f64> {
        match self {
            Self::Code => Some(3.0),
            Self::Docs => Some(2.0),
            Self::Mean => None,
        }
    }

    /// The rule a server of `profile` uses unless told otherwise: [`StepRule::Mean`] for
    /// `Exact`, upstream's [`StepRule::Code`] for `MindSporeCompatible`.
    #[must_use]
    pub fn for_profile(profile: Profile) -> Self {
        match profile {
            Profile::Exact => Self::Mean,
            Profile::MindSporeCompatible => Self::Code,
        }
    }
}

/// What the state machine did at the end of a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Fewer than 5 % of the expected clients sent a bit: r_est := global_lr/(c·N_exp), so
    /// the next step g equals the global learning rate.
    Fallback,
    /// Growth phase, majority 0: r_est × 5.
    Grow,
    /// Growth phase, majority 1, fewer than 11 such rounds so far: r_est unchanged.
    Hold,
    /// Growth phase, majority 1 for the 11th time: switch to the shrink phase.
    Switch,
    /// Shrink phase, majority 1: r_est ÷ 1.5.
    Shrink,
    /// Shrink phase, majority 0: unchanged.
    Keep,
    /// [`StepRule::Mean`]: fewer than 5 % of the expected clients sent a bit (an empty or
    /// failed round among them); r_est, the phase and the count are unchanged.
    TooFewBits,
}

/// The r_est state machine (upstream `SummarizeSignDS`).
///
/// Majority B = 1 iff strictly more than half of the received bits are 1 (upstream
/// de-biases the count first, n̂₁ = (c₁ + N(P − 1))/(2P − 1), which cannot change a
/// majority vote; its f32 rounding makes some exact ties count as 1, which we do not
/// reproduce: a tie is B = 0).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepSizeEstimator {
    r_est: f64,
    phase: Phase,
    reach_count: u32,
    profile: Profile,
}

impl StepSizeEstimator {
    /// The initial state: r_est = 1e−5, growth phase, count 0.
    #[must_use]
    pub fn new(profile: Profile) -> Self {
        Self {
            r_est: INITIAL_STEP_ESTIMATE,
            phase: Phase::Growth,
            reach_count: 0,
            profile,
        }
    }

    /// A saved state (to resume a server).
    ///
    /// # Errors
    /// [`Error::InvalidEstimate`] when `r_est` is NaN, infinite or negative.
    pub fn from_state(
        r_est: f64,
        phase: Phase,
        reach_count: u32,
        profile: Profile,
    ) -> Result<Self> {
        if !(r_est.is_finite() && r_est >= 0.0) {
            return Err(Error::InvalidEstimate { value: r_est });
        }
        Ok(Self {
            r_est,
            phase,
            reach_count,
            profile,
        })
    }

    /// r_est.
    #[must_use]
    pub fn r_est(&self) -> f64 {
        self.r_est
    }

    /// The phase.
    #[must_use]
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// How many growth rounds had majority 1.
    #[must_use]
    pub fn reach_count(&self) -> u32 {
        self.reach_count
    }

    /// What clients receive.
    #[must_use]
    pub fn broadcast(&self) -> Broadcast {
        Broadcast {
            r_est: self.r_est,
            phase: self.phase,
        }
    }

    /// The end-of-round update from `ones` bits equal to 1 and `zeros` equal to 0.
    ///
    /// `expected_clients` is N_exp (> 0, validated by the [`Server`]), `global_lr` the
    /// fallback learning rate and `factor` the c of g = c·N_exp·r_est, or `None`
    /// ([`StepRule::Mean`]): then a round with too few bits changes nothing
    /// ([`Transition::TooFewBits`]) instead of upstream's fallback. The compatible
    /// profile truncates N_exp to an integer here (upstream does in this place only),
    /// computes in f32 and stores r_est with six decimals (so shrinking sticks at 1e−6 and
    /// a fallback value below 5e−7 becomes 0 for good, as upstream's).
    pub fn update(
        &mut self,
        ones: u64,
        zeros: u64,
        expected_clients: f64,
        global_lr: f64,
        factor: Option<f64>,
    ) -> Transition {
        let received = ones.saturating_add(zeros) as f64;
        let compat = self.profile == Profile::MindSporeCompatible;
        let n_exp = if compat {
            expected_clients.trunc()
        } else {
            expected_clients
        };
        if n_exp > 0.0 && received < FALLBACK_FRACTION * n_exp {
            let Some(factor) = factor else {
                return Transition::TooFewBits;
            };
            self.r_est = if compat {
                f64::from(global_lr as f32 / factor as f32 / n_exp as f32)
            } else {
                global_lr / factor / n_exp
            };
            self.store();
            return Transition::Fallback;
        }
        let majority = ones > zeros;
        let transition = match (self.phase, majority) {
            (Phase::Growth, false) => {
                self.r_est = if compat {
                    f64::from(self.r_est as f32 * GROWTH_FACTOR as f32)
                } else {
                    self.r_est * GROWTH_FACTOR
                };
                Transition::Grow
            }
            (Phase::Growth, true) => {
                let seen = self.reach_count;
                self.reach_count = self.reach_count.saturating_add(1);
                if seen >= REACH_THRESHOLD {
                    self.phase = Phase::Shrink;
                    Transition::Switch
                } else {
                    Transition::Hold
                }
            }
            (Phase::Shrink, true) => {
                self.r_est = if compat {
                    f64::from(self.r_est as f32 / SHRINK_DIVISOR as f32)
                } else {
                    self.r_est / SHRINK_DIVISOR
                };
                Transition::Shrink
            }
            (Phase::Shrink, false) => Transition::Keep,
        };
        self.store();
        transition
    }

    /// Compatible profile: upstream keeps r_est as the text of `std::to_string(float)`
    /// ("%f", six decimals) and parses it back as f32.
    fn store(&mut self) {
        if self.profile == Profile::MindSporeCompatible {
            let text = format!("{:.6}", self.r_est as f32);
            self.r_est = text.parse::<f32>().map_or(self.r_est, f64::from);
        }
    }
}

/// One aggregation round: the validated reports received so far.
#[derive(Debug, Clone)]
pub struct Round {
    id: u64,
    dimension: u32,
    output_dimension: usize,
    sums: HashMap<u32, i128>,
    total_weight: u64,
    ones: u64,
    zeros: u64,
    accepted: usize,
}

impl Round {
    /// Validates `report` against the round (d, count = h) and `weight` n_i (≥ 1, total
    /// fits in u64), then adds it. On any error the round is unchanged.
    ///
    /// # Errors
    /// [`Error::DimensionMismatch`], [`Error::WrongIndexCount`],
    /// [`Error::InvalidClientWeight`]. (Index order, range, sign and bit are guaranteed by
    /// [`Report`]'s constructors.)
    pub fn ingest(&mut self, report: &Report, weight: u64) -> Result<()> {
        if report.dimension() != self.dimension {
            return Err(Error::DimensionMismatch {
                report: u64::from(report.dimension()),
                expected: u64::from(self.dimension),
            });
        }
        if report.indices().len() != self.output_dimension {
            return Err(Error::WrongIndexCount {
                count: report.indices().len(),
                expected: self.output_dimension,
            });
        }
        let total = self
            .total_weight
            .checked_add(weight)
            .filter(|_| weight > 0)
            .ok_or(Error::InvalidClientWeight { weight })?;
        // Validation is complete; from here on nothing can fail.
        let signed = match report.sign() {
            Sign::Positive => i128::from(weight),
            Sign::Negative => -i128::from(weight),
        };
        for &j in report.indices() {
            *self.sums.entry(j).or_insert(0) += signed;
        }
        self.total_weight = total;
        if report.magrr_bit() {
            self.ones += 1;
        } else {
            self.zeros += 1;
        }
        self.accepted += 1;
        Ok(())
    }

    /// Decodes `bytes` ([`Report::decode`]) and ingests the report.
    ///
    /// # Errors
    /// The errors of [`Report::decode`] and [`Round::ingest`]; the round is unchanged.
    pub fn ingest_bytes(&mut self, bytes: &[u8], weight: u64) -> Result<()> {
        self.ingest(&Report::decode(bytes)?, weight)
    }

    /// Number of accepted reports.
    #[must_use]
    pub fn accepted(&self) -> usize {
        self.accepted
    }

    /// Σ n_i over accepted reports.
    #[must_use]
    pub fn total_weight(&self) -> u64 {
        self.total_weight
    }

    /// Numbers of accepted MagRR bits equal to 1 and to 0.
    #[must_use]
    pub fn magrr_counts(&self) -> (u64, u64) {
        (self.ones, self.zeros)
    }

    /// The aggregate update for step `g`: (j, g·Σ_i n_i·s_i·1[j ∈ J_i]/Σ_i n_i) for every
    /// index some report selected, sorted by j. Empty when nothing was accepted.
    #[must_use]
    pub fn update(&self, step: f64) -> Vec<(u32, f64)> {
        if self.total_weight == 0 {
            return Vec::new();
        }
        let total = self.total_weight as f64;
        let mut out: Vec<(u32, f64)> = self
            .sums
            .iter()
            .map(|(&j, &s)| (j, step * (s as f64 / total)))
            .collect();
        out.sort_unstable_by_key(|&(j, _)| j);
        out
    }
}

/// What [`Server::finish_round`] did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RoundSummary {
    /// Accepted reports.
    pub accepted: usize,
    /// Σ n_i.
    pub total_weight: u64,
    /// The step g applied.
    pub step: f64,
    /// MagRR bits equal to 1.
    pub ones: u64,
    /// MagRR bits equal to 0.
    pub zeros: u64,
    /// What the r_est state machine did.
    pub transition: Transition,
    /// What the next round's clients receive.
    pub next: Broadcast,
}

/// The SignDS server for one model of dimension d.
#[derive(Debug, Clone)]
pub struct Server {
    params: Params,
    law: SelectionLaw,
    expected_clients: f64,
    rule: StepRule,
    server_lr: f64,
    estimator: StepSizeEstimator,
    round: u64,
}

impl Server {
    /// A server for updates of dimension `dimension` with `expected_clients` = N_exp
    /// reports per round (upstream: update_model_ratio × start_fl_job_threshold). It derives
    /// h from the same law as the clients, and uses the profile's step rule
    /// ([`StepRule::for_profile`]).
    ///
    /// # Errors
    /// [`Error::InvalidExpectedClients`] unless N_exp is finite and > 0; the errors of
    /// [`SelectionLaw::for_params`].
    pub fn new(params: Params, dimension: usize, expected_clients: f64) -> Result<Self> {
        if !(expected_clients.is_finite() && expected_clients > 0.0) {
            return Err(Error::InvalidExpectedClients {
                value: expected_clients,
            });
        }
        let law = SelectionLaw::for_params(&params, dimension)?;
        Ok(Self {
            params,
            law,
            expected_clients,
            rule: StepRule::for_profile(params.profile()),
            server_lr: DEFAULT_SERVER_LEARNING_RATE,
            estimator: StepSizeEstimator::new(params.profile()),
            round: 0,
        })
    }

    /// Chooses how g is derived from r_est.
    #[must_use]
    pub fn with_step_rule(mut self, rule: StepRule) -> Self {
        self.rule = rule;
        self
    }

    /// Sets the server learning rate η of [`StepRule::Mean`] (g = η·r_est; unused by the
    /// other rules).
    ///
    /// # Errors
    /// [`Error::InvalidServerLearningRate`] unless η is finite and > 0.
    pub fn with_server_learning_rate(mut self, eta: f64) -> Result<Self> {
        if !(eta.is_finite() && eta > 0.0) {
            return Err(Error::InvalidServerLearningRate { value: eta });
        }
        self.server_lr = eta;
        Ok(self)
    }

    /// The step rule.
    #[must_use]
    pub fn step_rule(&self) -> StepRule {
        self.rule
    }

    /// The server learning rate η of [`StepRule::Mean`].
    #[must_use]
    pub fn server_learning_rate(&self) -> f64 {
        self.server_lr
    }

    /// Replaces the r_est state (to resume).
    #[must_use]
    pub fn with_estimator(mut self, estimator: StepSizeEstimator) -> Self {
        self.estimator = estimator;
        self
    }

    /// The law every client's selection follows (h, ν_th, P(ν)).
    #[must_use]
    pub fn law(&self) -> &SelectionLaw {
        &self.law
    }

    /// The r_est state machine.
    #[must_use]
    pub fn estimator(&self) -> &StepSizeEstimator {
        &self.estimator
    }

    /// What the next round's clients receive.
    #[must_use]
    pub fn broadcast(&self) -> Broadcast {
        self.estimator.broadcast()
    }

    /// The step g of the current round: η·r_est ([`StepRule::Mean`]) or c·N_exp·r_est
    /// (f32 arithmetic in the compatible profile, as upstream's server).
    #[must_use]
    pub fn step(&self) -> f64 {
        let Some(c) = self.rule.factor() else {
            return self.server_lr * self.estimator.r_est();
        };
        match self.params.profile() {
            Profile::Exact => c * self.expected_clients * self.estimator.r_est(),
            Profile::MindSporeCompatible => {
                f64::from(c as f32 * self.expected_clients as f32 * self.estimator.r_est() as f32)
            }
        }
    }

    /// Opens the current round.
    #[must_use]
    pub fn begin_round(&self) -> Round {
        Round {
            id: self.round,
            dimension: self.law.dimension() as u32,
            output_dimension: self.law.output_dimension(),
            sums: HashMap::new(),
            total_weight: 0,
            ones: 0,
            zeros: 0,
            accepted: 0,
        }
    }

    /// Applies the round's aggregate to `weights` with the current step, then updates
    /// r_est from the round's MagRR bits and advances to the next round.
    ///
    /// # Errors
    /// [`Error::StaleRound`] for a round whose number is not this server's current round
    /// (already finished, or opened before an earlier round was finished) or whose d differs;
    /// [`Error::LengthMismatch`] unless `weights.len()` = d. On error nothing changes.
    pub fn finish_round(&mut self, round: Round, weights: &mut [f32]) -> Result<RoundSummary> {
        if round.id != self.round || u64::from(round.dimension) != self.law.dimension() as u64 {
            return Err(Error::StaleRound {
                round: round.id,
                current: self.round,
            });
        }
        if weights.len() != self.law.dimension() {
            return Err(Error::LengthMismatch {
                got: weights.len(),
                expected: self.law.dimension(),
            });
        }
        let step = self.step();
        for (j, delta) in round.update(step) {
            let w = &mut weights[j as usize];
            *w = (f64::from(*w) + delta) as f32;
        }
        let transition = self.estimator.update(
            round.ones,
            round.zeros,
            self.expected_clients,
            self.params.global_learning_rate(),
            self.rule.factor(),
        );
        self.round += 1;
        Ok(RoundSummary {
            accepted: round.accepted,
            total_weight: round.total_weight,
            step,
            ones: round.ones,
            zeros: round.zeros,
            transition,
            next: self.estimator.broadcast(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d8_params(profile: Profile) -> Params {
        Params::default()
            .with_top_k_fraction(0.25)
            .unwrap()
            .with_epsilon(5.0)
            .unwrap()
            .with_profile(profile)
    }

    fn report(indices: &[u64], sign: i64, bit: u64) -> Report {
        Report::new(8, indices, sign, bit).unwrap()
    }

    /// The docs' 3-client d = 8 example (reference §1.9): J_1 = {0,4,7} s=+1,
    /// J_2 = {1,2,3} s=−1, J_3 = {2,5,6} s=+1, with g = 1, under both step rules.
    #[test]
    fn docs_aggregation_example() {
        for (rule, n_exp) in [
            (StepRule::Code, 1.0 / (3.0 * INITIAL_STEP_ESTIMATE)),
            (StepRule::Docs, 1.0 / (2.0 * INITIAL_STEP_ESTIMATE)),
        ] {
            for (weights, want) in [
                (
                    [1u64, 1, 1],
                    [
                        1.0 / 3.0,
                        -1.0 / 3.0,
                        0.0,
                        -1.0 / 3.0,
                        1.0 / 3.0,
                        1.0 / 3.0,
                        1.0 / 3.0,
                        1.0 / 3.0,
                    ],
                ),
                ([1, 2, 1], [0.25, -0.5, -0.25, -0.5, 0.25, 0.25, 0.25, 0.25]),
            ] {
                let mut server = Server::new(d8_params(Profile::Exact), 8, n_exp)
                    .unwrap()
                    .with_step_rule(rule);
                assert!((server.step() - 1.0).abs() < 1e-12);
                assert_eq!(server.law().output_dimension(), 3);
                let mut round = server.begin_round();
                round.ingest(&report(&[0, 4, 7], 1, 0), weights[0]).unwrap();
                round
                    .ingest(&report(&[1, 2, 3], -1, 0), weights[1])
                    .unwrap();
                round.ingest(&report(&[2, 5, 6], 1, 0), weights[2]).unwrap();
                let mut w = [0.0f32; 8];
                let summary = server.finish_round(round, &mut w).unwrap();
                assert_eq!(summary.accepted, 3);
                for (got, want) in w.iter().zip(want) {
                    assert!((f64::from(*got) - want).abs() < 1e-7, "{rule:?} {w:?}");
                }
            }
        }
    }

    #[test]
    fn bad_reports_leave_the_round_untouched() {
        let server = Server::new(d8_params(Profile::Exact), 8, 3.0).unwrap();
        let mut round = server.begin_round();
        round.ingest(&report(&[0, 4, 7], 1, 1), 2).unwrap();
        let before = (
            round.update(1.0),
            round.total_weight(),
            round.magrr_counts(),
        );
        // Wrong count, wrong d, zero weight, overflowing weight, malformed bytes.
        assert!(matches!(
            round.ingest(&report(&[0, 4], 1, 0), 1),
            Err(Error::WrongIndexCount {
                count: 2,
                expected: 3
            })
        ));
        let other = Report::new(9, &[0, 1, 2], 1, 0).unwrap();
        assert!(matches!(
            round.ingest(&other, 1),
            Err(Error::DimensionMismatch { .. })
        ));
        assert!(round.ingest(&report(&[1, 2, 3], 1, 0), 0).is_err());
        assert!(round.ingest(&report(&[1, 2, 3], 1, 0), u64::MAX).is_err());
        let mut bytes = report(&[1, 2, 3], 1, 0).encode();
        bytes.push(0);
        assert!(round.ingest_bytes(&bytes, 1).is_err());
        // A duplicate index cannot even be built.
        assert!(Report::new(8, &[1, 1, 3], 1, 0).is_err());
        assert_eq!(
            before,
            (
                round.update(1.0),
                round.total_weight(),
                round.magrr_counts()
            )
        );
        assert!(
            round
                .ingest_bytes(&report(&[1, 2, 3], -1, 0).encode(), 1)
                .is_ok()
        );
        assert_eq!(round.accepted(), 2);
    }

    #[test]
    fn rounds_cannot_be_mixed() {
        let mut server = Server::new(d8_params(Profile::Exact), 8, 3.0).unwrap();
        let stale = server.begin_round();
        let mut w = [0.0f32; 8];
        server.finish_round(server.begin_round(), &mut w).unwrap();
        assert!(matches!(
            server.finish_round(stale, &mut w),
            Err(Error::StaleRound {
                round: 0,
                current: 1
            })
        ));
        let mut short = [0.0f32; 7];
        assert!(matches!(
            server.finish_round(server.begin_round(), &mut short),
            Err(Error::LengthMismatch { .. })
        ));
        assert!(Server::new(d8_params(Profile::Exact), 8, 0.0).is_err());
        assert!(Server::new(d8_params(Profile::Exact), 8, f64::NAN).is_err());
    }

    #[test]
    fn state_machine_growth_switch_and_shrink() {
        let mut e = StepSizeEstimator::new(Profile::Exact);
        // N_exp = 10, 10 bits each round: no fallback.
        assert_eq!(e.update(4, 6, 10.0, 0.1, Some(3.0)), Transition::Grow);
        assert!((e.r_est() - 5e-5).abs() < 1e-18);
        // A tie is B = 0.
        assert_eq!(e.update(5, 5, 10.0, 0.1, Some(3.0)), Transition::Grow);
        for i in 0..10 {
            assert_eq!(
                e.update(6, 4, 10.0, 0.1, Some(3.0)),
                Transition::Hold,
                "round {i}"
            );
            // B = 0 rounds in between do not reset the count.
            if i == 4 {
                assert_eq!(e.update(0, 10, 10.0, 0.1, Some(3.0)), Transition::Grow);
            }
        }
        assert_eq!(e.phase(), Phase::Growth);
        let r = e.r_est();
        assert_eq!(e.update(6, 4, 10.0, 0.1, Some(3.0)), Transition::Switch);
        assert_eq!(
            (e.phase(), e.reach_count(), e.r_est()),
            (Phase::Shrink, 11, r)
        );
        assert_eq!(e.update(6, 4, 10.0, 0.1, Some(3.0)), Transition::Shrink);
        assert!((e.r_est() - r / 1.5).abs() < 1e-18);
        assert_eq!(e.update(4, 6, 10.0, 0.1, Some(3.0)), Transition::Keep);
        assert_eq!(e.phase(), Phase::Shrink);
        // Fallback: 0 bits < 5 % of 10 expected.
        assert_eq!(e.update(0, 0, 10.0, 0.3, Some(3.0)), Transition::Fallback);
        assert!((e.r_est() - 0.01).abs() < 1e-15);
        // Server-side: the next step is then the global learning rate.
        assert!(StepSizeEstimator::from_state(f64::NAN, Phase::Growth, 0, Profile::Exact).is_err());
    }

    /// Reference §1.10: the six-decimal storage of the compatible profile.
    #[test]
    fn compatible_six_decimal_storage() {
        let mut e = StepSizeEstimator::new(Profile::MindSporeCompatible);
        let mut growth = Vec::new();
        for _ in 0..8 {
            e.update(0, 10, 10.0, 0.1, Some(3.0));
            growth.push(e.r_est());
        }
        let want = [
            5e-5, 2.5e-4, 1.25e-3, 6.25e-3, 0.03125, 0.15625, 0.78125, 3.90625,
        ];
        for (g, w) in growth.iter().zip(want) {
            assert_eq!(*g, f64::from(w as f32));
        }
        let mut e =
            StepSizeEstimator::from_state(0.00125, Phase::Shrink, 11, Profile::MindSporeCompatible)
                .unwrap();
        let want = [
            0.000833, 0.000555, 0.00037, 0.000247, 0.000165, 0.00011, 0.000073, 0.000049, 0.000033,
            0.000022, 0.000015, 0.00001, 0.000007, 0.000005, 0.000003, 0.000002, 0.000001,
            0.000001, 0.000001,
        ];
        for w in want {
            e.update(10, 0, 10.0, 0.1, Some(3.0));
            assert_eq!(e.r_est(), f64::from(w as f32));
        }
        // Fallback with a tiny value rounds to 0 and stays there (upstream defect).
        let mut e = StepSizeEstimator::new(Profile::MindSporeCompatible);
        assert_eq!(e.update(0, 0, 1e6, 1.0, Some(3.0)), Transition::Fallback);
        assert_eq!(e.r_est(), 0.0);
        e.update(0, 100_000, 1e6, 1.0, Some(3.0));
        assert_eq!(e.r_est(), 0.0);
        // N_exp truncated here: 0.5 × 5 = 2.5 → 2; 0 bits < 0.1 → fallback r = lr/3/2.
        let mut e = StepSizeEstimator::new(Profile::MindSporeCompatible);
        assert_eq!(e.update(0, 0, 2.5, 0.6, Some(3.0)), Transition::Fallback);
        assert_eq!(e.r_est(), f64::from(0.1f32));
        // N_exp < 1 truncates to 0: no fallback, majority of nothing is 0 → grow.
        let mut e = StepSizeEstimator::new(Profile::MindSporeCompatible);
        assert_eq!(e.update(0, 0, 0.5, 0.6, Some(3.0)), Transition::Grow);
    }
}
