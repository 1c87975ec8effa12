//! Unbiasedness of de-biasing estimators (binary RR's `estimate_ones`, the frequency
//! oracles' `estimate`): a population with known true counts is randomized, the mechanism
//! crate's estimator (at the *law's* ε) turns the reports' support counts into estimates,
//! and a z-test (fl-stats) compares each estimate with the truth in units of the
//! estimator's exact standard deviation (also from the mechanism crate).

use serde_json::{Value, json};

use super::{PointResult, TestSet, about, check_shape};
use crate::{
    error::Result,
    report::{Panel, PanelData},
};

/// The estimator of a grid point: (support counts, reports, true counts) → (estimate,
/// variance) per estimated value, computed by the mechanism crate at the law's ε.
pub(crate) type EstimateFn = dyn Fn(&[u64], u64, &[u64]) -> Result<Vec<(f64, f64)>> + Send + Sync;

/// An estimator's audit at one grid point.
///
/// Each input (a population) draws counts laid out as `[reports n | support counts C_v
/// (one per value) | true counts c_v (one per value)]`.
pub(crate) struct EstimatorAudit {
    /// Labels of the estimated values.
    pub values: Vec<String>,
    /// Per input: label, the population as JSON, the population's value fractions.
    pub inputs: Vec<(String, Value, Vec<f64>)>,
    /// The estimator.
    pub estimate: Box<EstimateFn>,
    /// The mechanism's support (keep/flip) probabilities, for planning.
    pub plan: Vec<f64>,
}

impl std::fmt::Debug for EstimatorAudit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EstimatorAudit")
            .field("values", &self.values)
            .field("inputs", &self.inputs)
            .field("plan", &self.plan)
            .finish_non_exhaustive()
    }
}

impl EstimatorAudit {
    /// Tests this law produces.
    pub(crate) fn test_count(&self, tests: &TestSet) -> usize {
        if tests.has("estimate") {
            self.values.len() * self.inputs.len()
        } else {
            0
        }
    }

    /// The mechanism's keep/flip probabilities: a 1 % relative error in them biases the
    /// estimate by as many standard deviations as it moves a binomial count.
    pub(crate) fn plan_probabilities(&self) -> Vec<f64> {
        self.plan.clone()
    }

    /// Runs the z-tests.
    pub(crate) fn analyze(&self, counts: &[Vec<u64>], tests: &TestSet) -> Result<PointResult> {
        let mut r = PointResult::default();
        let m = self.values.len();
        for ((label, _, _), c) in self.inputs.iter().zip(counts) {
            check_shape(c.len(), 1 + 2 * m)?;
            let n = c[0];
            let (support, truth) = c[1..].split_at(m);
            r.drawn += n;
            let estimates = (self.estimate)(support, n, truth)?;
            if tests.has("estimate") {
                for ((name, &(value, variance)), &t) in
                    self.values.iter().zip(&estimates).zip(truth)
                {
                    let a = about(&[("input", json!(label)), ("value", json!(name))]);
                    let z = fl_stats::z_test(
                        value,
                        t as f64,
                        variance.sqrt(),
                        n,
                        fl_stats::Alternative::TwoSided,
                    )?;
                    r.outcomes.push(super::Outcome {
                        test: "estimate-z".into(),
                        about: a,
                        samples: n,
                        statistic: z.statistic,
                        p_value: z.p_value,
                    });
                }
            }
            let scale = n.max(1) as f64;
            r.panels.push(Panel {
                title: format!("population {label}: estimated vs true fraction"),
                data: PanelData::Bars {
                    labels: self.values.clone(),
                    expected: truth.iter().map(|&t| t as f64 / scale).collect(),
                    observed: estimates.iter().map(|&(v, _)| v / scale).collect(),
                    samples: n,
                    // The estimator's exact standard deviation, as a fraction of n.
                    standard_errors: Some(
                        estimates
                            .iter()
                            .map(|&(_, var)| var.sqrt() / scale)
                            .collect(),
                    ),
                },
            });
        }
        Ok(r)
    }
}
