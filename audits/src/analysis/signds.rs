//! SignDS audits: the selection (ν = |J ∩ S|, the boost event ν ≥ ν_th, uniformity of the
//! indices inside and outside the top-k set, whole output sets and ε) and the client
//! pipeline (sign, MagRR bit and ν through `Client::encode`). Laws come from fl-signds,
//! statistics from fl-stats.

use serde_json::{Value, json};

use super::{
    EpsilonEvidence, PointResult, TestSet, about, binomial, check_shape, chi_square,
    neighbour_pairs, subset_inclusion,
};
use crate::{
    error::Result,
    report::{Panel, PanelData},
};

/// The selection's law at one grid point.
///
/// Each input's draws are counts laid out as `[ν histogram (h + 1) | index hits (d) |
/// output-set histogram (C(d, h), when the explicit set law is kept)]`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SelectionAudit {
    /// d.
    pub dim: usize,
    /// h.
    pub output_dim: usize,
    /// ν_th.
    pub threshold: usize,
    /// P(ν) for ν = 0..=h (the same for every top-k set).
    pub nu: Vec<f64>,
    /// Per input: label, the top-k set as JSON, the set.
    pub inputs: Vec<(String, Value, Vec<u32>)>,
    /// Per input, P(J) for every output set J in colex order (small d only).
    pub sets: Option<Vec<Vec<f64>>>,
    /// The claimed (realised) ε of the selection.
    pub epsilon: Option<f64>,
}

impl SelectionAudit {
    /// Length of one input's counts.
    pub(crate) fn layout_len(&self) -> usize {
        self.output_dim
            + 1
            + self.dim
            + self
                .sets
                .as_ref()
                .and_then(|s| s.first())
                .map_or(0, Vec::len)
    }

    /// P(ν ≥ ν_th): the probability that the output is a "good" set (utility 1), the
    /// selection's keep probability.
    pub(crate) fn boost_probability(&self) -> f64 {
        self.nu.iter().skip(self.threshold).sum::<f64>().min(1.0)
    }

    fn inclusion_parts(&self, set: &[u32]) -> (bool, bool) {
        (set.len() >= 2, self.dim.saturating_sub(set.len()) >= 2)
    }

    /// Tests this law produces.
    pub(crate) fn test_count(&self, tests: &TestSet) -> usize {
        self.inputs
            .iter()
            .map(|(_, _, set)| {
                let (inside, outside) = self.inclusion_parts(set);
                usize::from(tests.has("nu"))
                    + usize::from(tests.has("boost"))
                    + if tests.has("inclusion") {
                        usize::from(inside) + usize::from(outside)
                    } else {
                        0
                    }
                    + usize::from(tests.has("sets") && self.sets.is_some())
            })
            .sum()
    }

    /// ε statements this law produces.
    pub(crate) fn epsilon_count(&self, tests: &TestSet) -> usize {
        usize::from(
            tests.has("epsilon")
                && self.sets.is_some()
                && self.epsilon.is_some()
                && self.inputs.len() >= 2,
        )
    }

    /// The boost probability (the selection's keep probability).
    pub(crate) fn plan_probabilities(&self) -> Vec<f64> {
        vec![self.boost_probability()]
    }

    /// Runs the requested tests.
    pub(crate) fn analyze(&self, counts: &[Vec<u64>], tests: &TestSet) -> Result<PointResult> {
        let mut r = PointResult::default();
        let h = self.output_dim;
        let mut set_counts = Vec::new();
        for (i, ((label, _, set), c)) in self.inputs.iter().zip(counts).enumerate() {
            check_shape(c.len(), self.layout_len())?;
            let (nu, rest) = c.split_at(h + 1);
            let (hits, sets) = rest.split_at(self.dim);
            let n: u64 = nu.iter().sum();
            r.drawn += n;
            if tests.has("nu") {
                let a = about(&[("input", json!(label))]);
                r.outcomes
                    .push(chi_square("nu-chi-square", a, nu, &self.nu)?);
            }
            if tests.has("boost") {
                let boosted: u64 = nu.iter().skip(self.threshold).sum();
                let a = about(&[
                    ("input", json!(label)),
                    ("threshold", json!(self.threshold)),
                ]);
                r.outcomes.push(binomial(
                    "boost-binomial",
                    a,
                    boosted,
                    n,
                    self.boost_probability(),
                )?);
            }
            if tests.has("inclusion") {
                let (inside, outside) = self.inclusion_parts(set);
                let mut in_set = vec![false; self.dim];
                for &j in set {
                    if let Some(b) = in_set.get_mut(j as usize) {
                        *b = true;
                    }
                }
                if inside {
                    let inc: Vec<u64> = set.iter().map(|&j| hits[j as usize]).collect();
                    let a = about(&[("input", json!(label)), ("part", json!("top-k"))]);
                    r.outcomes
                        .push(subset_inclusion("inclusion-uniformity", a, &inc, nu)?);
                }
                if outside {
                    let inc: Vec<u64> = (0..self.dim)
                        .filter(|&j| !in_set[j])
                        .map(|j| hits[j])
                        .collect();
                    // h − ν of each output come from the complement.
                    let sizes: Vec<u64> = nu.iter().rev().copied().collect();
                    let a = about(&[("input", json!(label)), ("part", json!("complement"))]);
                    r.outcomes
                        .push(subset_inclusion("inclusion-uniformity", a, &inc, &sizes)?);
                }
            }
            if tests.has("sets")
                && let Some(law) = self.sets.as_ref().and_then(|l| l.get(i))
            {
                let a = about(&[("input", json!(label))]);
                r.outcomes.push(chi_square("set-chi-square", a, sets, law)?);
            }
            set_counts.push(sets.to_vec());
            r.panels.push(Panel {
                title: format!("top-k set {label}: P(nu = |J ∩ S|)"),
                data: PanelData::Bars {
                    labels: (0..=h).map(|v| v.to_string()).collect(),
                    expected: self.nu.clone(),
                    observed: nu.iter().map(|&k| k as f64 / n.max(1) as f64).collect(),
                    samples: n,
                    standard_errors: None,
                },
            });
        }
        if self.epsilon_count(tests) == 1
            && let (Some(claimed), Some(laws)) = (self.epsilon, &self.sets)
        {
            let mut e = EpsilonEvidence::new(about(&[("scope", json!("output set"))]), claimed);
            e.push_pairs(&neighbour_pairs(set_counts.len()), &set_counts, |i| {
                Some((self.inputs.get(i)?.0.as_str(), laws.get(i)?.as_slice()))
            });
            r.evidence.push(e);
        }
        Ok(r)
    }
}

/// The client pipeline's law at one grid point: the update is fixed, the inputs are the
/// MagRR bit's true value (chosen through r_est).
///
/// Each input's draws are counts laid out as `[positive signs, reported MagRR ones,
/// ν histogram (h + 1)]`, ν measured against the top-k set of the sign that was drawn.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ClientAudit {
    /// P(ν) of the client's selection.
    pub nu: Vec<f64>,
    /// MagRR's keep probability e^ε_RR/(1 + e^ε_RR).
    pub keep: f64,
    /// Per input: label, JSON, the true MagRR bit.
    pub inputs: Vec<(String, Value, bool)>,
    /// MagRR's claimed (realised) ε_RR.
    pub magrr_epsilon: Option<f64>,
}

impl ClientAudit {
    fn layout_len(&self) -> usize {
        2 + self.nu.len()
    }

    /// Tests this law produces.
    pub(crate) fn test_count(&self, tests: &TestSet) -> usize {
        self.inputs.len()
            * ["sign", "magrr", "nu"]
                .iter()
                .filter(|t| tests.has(t))
                .count()
    }

    /// ε statements this law produces.
    pub(crate) fn epsilon_count(&self, tests: &TestSet) -> usize {
        usize::from(tests.has("epsilon") && self.magrr_epsilon.is_some() && self.inputs.len() >= 2)
    }

    /// The sign's 1/2 and MagRR's keep probability.
    pub(crate) fn plan_probabilities(&self) -> Vec<f64> {
        vec![0.5, self.keep]
    }

    /// Runs the requested tests.
    pub(crate) fn analyze(&self, counts: &[Vec<u64>], tests: &TestSet) -> Result<PointResult> {
        let mut r = PointResult::default();
        let mut bits = Vec::new();
        for ((label, _, truth), c) in self.inputs.iter().zip(counts) {
            check_shape(c.len(), self.layout_len())?;
            let (positive, ones, nu) = (c[0], c[1], &c[2..]);
            let n: u64 = nu.iter().sum();
            r.drawn += n;
            let kept = if *truth { ones } else { n.saturating_sub(ones) };
            if tests.has("sign") {
                let a = about(&[("input", json!(label)), ("output", json!("positive sign"))]);
                r.outcomes
                    .push(binomial("sign-binomial", a, positive, n, 0.5)?);
            }
            if tests.has("magrr") {
                let a = about(&[("input", json!(label)), ("output", json!("bit kept"))]);
                r.outcomes
                    .push(binomial("magrr-binomial", a, kept, n, self.keep)?);
            }
            if tests.has("nu") {
                let a = about(&[("input", json!(label))]);
                r.outcomes
                    .push(chi_square("nu-chi-square", a, nu, &self.nu)?);
            }
            bits.push(vec![n.saturating_sub(ones), ones]);
            r.panels.push(Panel {
                title: format!("true MagRR bit {label}: sign, bit kept, P(nu)"),
                data: PanelData::Bars {
                    labels: ["+", "kept"]
                        .iter()
                        .map(|s| (*s).to_string())
                        .chain((0..nu.len()).map(|v| format!("nu={v}")))
                        .collect(),
                    expected: [0.5, self.keep]
                        .into_iter()
                        .chain(self.nu.iter().copied())
                        .collect(),
                    observed: [positive, kept]
                        .iter()
                        .chain(nu)
                        .map(|&k| k as f64 / n.max(1) as f64)
                        .collect(),
                    samples: n,
                    standard_errors: None,
                },
            });
        }
        if self.epsilon_count(tests) == 1
            && let (Some(claimed), [a, b, ..], [x, y, ..]) =
                (self.magrr_epsilon, bits.as_slice(), self.inputs.as_slice())
        {
            // The reported bit is the true one with probability `keep`.
            let law = |truth: bool| {
                let one = if truth { self.keep } else { 1.0 - self.keep };
                vec![1.0 - one, one]
            };
            let mut e = EpsilonEvidence::new(about(&[("scope", json!("MagRR bit"))]), claimed);
            e.push(
                format!("{} / {}", x.0, y.0),
                (a.clone(), b.clone()),
                (law(x.2), law(y.2)),
            );
            r.evidence.push(e);
        }
        Ok(r)
    }
}
