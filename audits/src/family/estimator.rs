//! The de-biasing estimators (`estimator-rr-binary`, `estimator-grr`, `estimator-oue`,
//! `estimator-olh`): populations with known true counts are randomized and the mechanism
//! crate's estimator, at the law's ε, must recover them.

use std::{marker::PhantomData, sync::Arc};

use fl_ldp::{BinaryRandomizedResponse, FiniteOutputs, FrequencyOracle};
use rand::rngs::ChaCha20Rng;
use serde_json::json;

use super::{EPS, Family, Law, MechanismInfo, Reader, frequency::Oracle};
use crate::{
    analysis::estimator::{EstimatorAudit, apportion},
    error::{AuditError, Result},
    protocol::{OutputKind, Outputs},
    source::{Accumulate, Defects, Feed, Internal},
    suite::Params,
    tally::{Data, Draws},
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

/// The estimators draw whole populations at a time (see their `sampler`): they have no
/// per-output observer and no external protocol.
pub(crate) struct NoObserver;

fn no_protocol() -> AuditError {
    AuditError::usage("the estimators have no external protocol")
}

impl Accumulate<()> for NoObserver {
    fn add(&mut self, (): &()) -> Result<()> {
        Err(no_protocol())
    }

    fn finish(self) -> Draws {
        Draws::without_serial(Data::Counts(Vec::new()))
    }
}

impl Feed for NoObserver {
    fn feed(&mut self, _: &Outputs) -> Result<()> {
        Err(no_protocol())
    }

    fn finish_boxed(self: Box<Self>) -> Draws {
        self.finish()
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
        tests: &["estimate"],
    };
    type Output = ();
    type Drawer = ();
    type Observer = NoObserver;

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

    fn observer(&self, _: usize) -> Result<NoObserver> {
        Ok(NoObserver)
    }

    fn drawer(&self, _: usize) -> Result<()> {
        Ok(())
    }

    fn draw(&self, (): &mut (), _: &mut ChaCha20Rng) -> Result<()> {
        Err(no_protocol())
    }

    /// Each chunk is a population apportioned by the input's fractions; every user
    /// randomizes with the sampler's mechanism and the reports' count of ones is kept,
    /// with the true count, in [`EstimatorAudit`]'s layout.
    fn sampler(sampler: Arc<Self>, _: Arc<Self>, _: Defects) -> Result<Internal> {
        let rr = sampler.rr;
        Ok(Internal::new(move |i, n, rng| {
            let f = BINARY_POPULATIONS.get(i).copied().unwrap_or(0.0);
            let truth = apportion(n, &[1.0 - f, f]);
            let ones = |x: bool, count: u64, rng: &mut _| -> Result<u64> {
                Ok(rr
                    .sample_counts(&x, count, rng)?
                    .get(1)
                    .copied()
                    .unwrap_or(0))
            };
            let (zeros, true_ones) = (truth.first().copied(), truth.get(1).copied());
            let (zeros, true_ones) = (zeros.unwrap_or(0), true_ones.unwrap_or(0));
            let reported = ones(false, zeros, rng)? + ones(true, true_ones, rng)?;
            Ok(Draws::without_serial(Data::Counts(vec![
                n, reported, true_ones,
            ])))
        }))
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
    type Output = ();
    type Drawer = ();
    type Observer = NoObserver;

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

    fn observer(&self, _: usize) -> Result<NoObserver> {
        Ok(NoObserver)
    }

    fn drawer(&self, _: usize) -> Result<()> {
        Ok(())
    }

    fn draw(&self, (): &mut (), _: &mut ChaCha20Rng) -> Result<()> {
        Err(no_protocol())
    }

    /// Each chunk is a population apportioned by the input's fractions; every user
    /// randomizes with the sampler's mechanism and the reports' support counts are kept,
    /// with the true counts, in [`EstimatorAudit`]'s layout.
    fn sampler(sampler: Arc<Self>, _: Arc<Self>, _: Defects) -> Result<Internal> {
        let (o, k) = (sampler.oracle, sampler.k);
        let fractions: Vec<Vec<f64>> = populations(k).into_iter().map(|(_, f)| f).collect();
        Ok(Internal::new(move |i, n, rng| {
            let truth = apportion(n, fractions.get(i).map_or(&[][..], Vec::as_slice));
            let support = match &o {
                // GRR supports exactly its report: the batch histogram is the support count.
                FrequencyOracle::Grr(m) => {
                    let mut c = vec![0u64; k];
                    for (v, &t) in truth.iter().enumerate() {
                        for (x, y) in c.iter_mut().zip(m.sample_counts(&v, t, rng)?) {
                            *x += y;
                        }
                    }
                    c
                }
                _ => {
                    let mut counter = o.support_counter();
                    for (v, &t) in truth.iter().enumerate() {
                        for _ in 0..t {
                            counter.add(&o.randomize(v, rng)?)?;
                        }
                    }
                    counter.counts().to_vec()
                }
            };
            let mut out = Vec::with_capacity(1 + 2 * k);
            out.push(n);
            out.extend(support);
            out.extend(truth);
            Ok(Draws::without_serial(Data::Counts(out)))
        }))
    }
}
