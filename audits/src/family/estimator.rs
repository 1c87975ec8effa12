//! The de-biasing estimators (`estimator-rr-binary`, `estimator-grr`, `estimator-oue`,
//! `estimator-olh`): users drawn from populations of known value fractions randomize their
//! values, and the mechanism crate's estimator, at the law's ε, must recover the true
//! counts of the values drawn.

use std::marker::PhantomData;

use fl_ldp::{BinaryRandomizedResponse, FrequencyOracle, Report};
use rand::{Rng, rngs::ChaCha20Rng};
use serde_json::json;

use super::{EPS, Family, Law, MechanismInfo, Reader, frequency::Oracle};
use crate::{
    analysis::{estimator::EstimatorAudit, learned::LearnedSpec},
    error::{AuditError, Result},
    protocol::{OutputKind, Outputs},
    report::Branch,
    source::{Accumulate, Feed, Observer, word_threshold},
    suite::Params,
    tally::{Data, Draws, SERIAL_ALPHABET, Streams, class_symbol},
};

/// The populations of the binary estimator: 20 % and 70 % ones.
const BINARY_POPULATIONS: [f64; 2] = [0.2, 0.7];

/// The populations of a k-value estimator: skewed (value v held by a share ∝ k − 1 − v,
/// so the last value by nobody) and uniform.
fn populations(k: usize) -> Vec<(String, Vec<f64>)> {
    let total = (k * (k - 1) / 2) as f64;
    vec![
        (
            "skewed".into(),
            (0..k).map(|v| (k - 1 - v) as f64 / total).collect(),
        ),
        ("uniform".into(), vec![1.0 / k as f64; k]),
    ]
}

/// Thresholds on a uniform 64-bit word that draw value v with probability `fractions[v]`
/// (cumulative; a value of fraction 0 is never drawn).
fn thresholds(fractions: &[f64]) -> Vec<u64> {
    let mut acc = 0.0;
    let mut t: Vec<u64> = fractions
        .iter()
        .map(|&f| {
            acc += f;
            word_threshold(acc)
        })
        .collect();
    if let Some(last) = t.iter_mut().rev().find(|x| **x > 0) {
        *last = u64::MAX;
    }
    t
}

/// One user's value drawn by `thresholds`.
fn draw_value(thresholds: &[u64], rng: &mut ChaCha20Rng) -> usize {
    let u = rng.next_u64();
    thresholds
        .iter()
        .position(|&t| u < t)
        .unwrap_or(thresholds.len().saturating_sub(1))
}

fn no_protocol() -> AuditError {
    AuditError::usage("the estimators have no external protocol")
}

/// Counts an estimator's reports in [`EstimatorAudit`]'s layout `[reports n | support
/// counts (one per value) | true counts (one per value)]`, with a symbol of the report as
/// the serial and batch symbol.
pub(crate) struct EstimatorObserver {
    oracle: Option<FrequencyOracle>,
    values: usize,
    counts: Vec<u64>,
    streams: Streams,
}

impl EstimatorObserver {
    fn new(oracle: Option<FrequencyOracle>, values: usize, symbols: usize) -> Self {
        Self {
            oracle,
            values,
            counts: vec![0; 1 + 2 * values],
            streams: Streams::new(1, symbols, symbols, 0),
        }
    }

    /// One report whose user held the value counted in slot `truth` (none: a value not
    /// counted, the zeros of the binary estimator).
    fn observe(&mut self, truth: Option<usize>, symbol: usize) {
        self.counts[0] += 1;
        if let Some(t) = truth {
            self.counts[1 + self.values + t] += 1;
        }
        self.streams.symbol(0, symbol);
        self.streams.end_output(symbol, 0);
    }
}

impl Observer for EstimatorObserver {
    fn streams(&mut self) -> &mut Streams {
        &mut self.streams
    }
}

impl Accumulate<(bool, bool)> for EstimatorObserver {
    fn add(&mut self, &(truth, report): &(bool, bool)) -> Result<()> {
        // Layout [n, reported ones, true ones].
        self.counts[1] += u64::from(report);
        self.observe(truth.then_some(0), usize::from(report));
        Ok(())
    }

    fn finish(self) -> Draws {
        Draws {
            data: Data::Counts(self.counts),
            streams: self.streams,
        }
    }
}

impl Accumulate<(usize, Report)> for EstimatorObserver {
    fn add(&mut self, (truth, report): &(usize, Report)) -> Result<()> {
        let o = self.oracle.ok_or_else(no_protocol)?;
        if *truth >= self.values {
            return Err(AuditError::Mechanism(format!("no value {truth}")));
        }
        for v in 0..self.values {
            self.counts[1 + v] += u64::from(o.supports(report, v));
        }
        let symbol = match report {
            Report::Grr(y) => class_symbol(*y, self.values),
            Report::Oue(bits) => bits
                .iter()
                .take(4)
                .enumerate()
                .fold(0, |a, (j, &b)| a | (usize::from(b) << j)),
            Report::Olh(r) => (r.bucket as usize) % SERIAL_ALPHABET,
            _ => 0,
        };
        self.observe(Some(*truth), symbol);
        Ok(())
    }

    fn finish(self) -> Draws {
        Draws {
            data: Data::Counts(self.counts),
            streams: self.streams,
        }
    }
}

impl Feed for EstimatorObserver {
    fn feed(&mut self, _: &Outputs) -> Result<()> {
        Err(no_protocol())
    }

    fn finish_boxed(self: Box<Self>) -> Draws {
        Draws {
            data: Data::Counts(self.counts),
            streams: self.streams,
        }
    }
}

/// Binary RR's `estimate_ones` at ε.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BinaryEstimator {
    rr: BinaryRandomizedResponse,
}

impl Family for BinaryEstimator {
    const INFO: MechanismInfo = MechanismInfo {
        name: "estimator-rr-binary",
        description: "unbiasedness of binary RR's de-biasing (BinaryRandomizedResponse::estimate_ones), z-test",
        params: &[EPS],
        tests: &["estimate", "serial"],
    };
    type Output = (bool, bool);
    type Drawer = u64;
    type Observer = EstimatorObserver;

    fn parse(params: &Params) -> Result<Self> {
        Ok(Self {
            rr: BinaryRandomizedResponse::new(Reader::new(params, &Self::INFO).epsilon()?),
        })
    }

    fn law(&self) -> Result<Law> {
        let rr = self.rr;
        Ok(Law::Estimator(EstimatorAudit {
            values: vec!["ones".into()],
            inputs: BINARY_POPULATIONS
                .iter()
                .map(|&f| (format!("ones={f}"), json!({"ones": f}), vec![1.0 - f, f]))
                .collect(),
            estimate: Box::new(move |c, n, _| {
                let e = rr.estimate_ones(c.first().copied().unwrap_or(0), n)?;
                Ok(vec![(e.value, e.variance)])
            }),
            plan: vec![rr.flip_probability()],
        }))
    }

    fn output_kind(&self) -> Result<Option<OutputKind>> {
        Ok(None)
    }

    fn observer(&self, _: usize) -> Result<EstimatorObserver> {
        Ok(EstimatorObserver::new(None, 1, 2))
    }

    /// The user's value is 1 with the population's fraction of ones.
    fn drawer(&self, input: usize) -> Result<u64> {
        Ok(word_threshold(
            BINARY_POPULATIONS.get(input).copied().unwrap_or(0.0),
        ))
    }

    fn draw(&self, ones: &mut u64, rng: &mut ChaCha20Rng) -> Result<(bool, bool)> {
        let truth = rng.next_u64() < *ones;
        Ok((truth, self.rr.randomize(truth, rng)))
    }

    fn event_space(&self, _: &Law) -> Result<Option<LearnedSpec>> {
        Ok(None)
    }

    fn coverage(&self) -> Vec<Branch> {
        BINARY_POPULATIONS
            .iter()
            .map(|f| {
                let l = format!("ones={f}");
                Branch::new(format!("a population with {} % ones", f * 100.0), [l])
            })
            .collect()
    }
}

/// A frequency oracle's `estimate` at ε.
pub(crate) struct OracleEstimator<O> {
    oracle: FrequencyOracle,
    k: usize,
    protocol: PhantomData<fn() -> O>,
}

impl<O: Oracle> Family for OracleEstimator<O> {
    const INFO: MechanismInfo = O::ESTIMATOR;
    type Output = (usize, Report);
    type Drawer = Vec<u64>;
    type Observer = EstimatorObserver;

    fn parse(params: &Params) -> Result<Self> {
        let r = Reader::new(params, &Self::INFO);
        let k = r.int("k", 2, 1 << 16)?;
        Ok(Self {
            oracle: O::oracle(r.epsilon()?, k)?,
            k,
            protocol: PhantomData,
        })
    }

    fn law(&self) -> Result<Law> {
        let o = self.oracle;
        let (p, q) = o.support_probabilities();
        Ok(Law::Estimator(EstimatorAudit {
            values: (0..self.k).map(|v| v.to_string()).collect(),
            inputs: populations(self.k)
                .into_iter()
                .map(|(l, f)| (l, json!(f), f))
                .collect(),
            estimate: Box::new(move |c, n, truth| {
                let est = o.estimate(c, n)?;
                Ok(est
                    .into_iter()
                    .zip(truth)
                    .map(|(e, &t)| (e, o.variance(n, t as f64)))
                    .collect())
            }),
            plan: vec![p, q],
        }))
    }

    fn output_kind(&self) -> Result<Option<OutputKind>> {
        Ok(None)
    }

    fn observer(&self, _: usize) -> Result<EstimatorObserver> {
        let symbols = match self.oracle {
            FrequencyOracle::Grr(_) => self.k.min(SERIAL_ALPHABET),
            _ => SERIAL_ALPHABET,
        };
        Ok(EstimatorObserver::new(Some(self.oracle), self.k, symbols))
    }

    /// Users' values drawn independently with the population's fractions.
    fn drawer(&self, input: usize) -> Result<Vec<u64>> {
        let pops = populations(self.k);
        let (_, f) = pops
            .get(input)
            .ok_or_else(|| AuditError::Mechanism(format!("no population number {input}")))?;
        Ok(thresholds(f))
    }

    fn draw(&self, t: &mut Vec<u64>, rng: &mut ChaCha20Rng) -> Result<(usize, Report)> {
        let v = draw_value(t, rng);
        Ok((v, self.oracle.randomize(v, rng)?))
    }

    fn event_space(&self, _: &Law) -> Result<Option<LearnedSpec>> {
        Ok(None)
    }

    fn coverage(&self) -> Vec<Branch> {
        vec![
            Branch::new(
                "a skewed population (value v held by a share proportional to k - 1 - v; the last value by nobody)",
                ["skewed".to_string()],
            ),
            Branch::new("a uniform population", ["uniform".to_string()]),
        ]
    }
}
