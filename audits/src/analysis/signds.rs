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

    /// Tests this law produces.
    pub(crate) fn test_count(&self, tests: &TestSet) -> usize {
        self.inputs
            .iter()
            .map(|(_, _, set)| {
                let (inside, outside) = inclusion_parts(set.len(), self.dim);
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
                r.outcomes.extend(inclusion_outcomes(
                    set,
                    self.dim,
                    hits,
                    nu,
                    &[("input", json!(label))],
                )?);
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
/// broadcasts (phase and r_est), which decide the true MagRR bit.
///
/// Each input's draws are counts laid out as `[ν histogram per (sign, reported bit) (4 ×
/// (h + 1)) | index hits per (sign, reported bit) (4 × d)]`, combination c = 2·s + b̂ (s = 1
/// for the positive sign), ν measured against the top-k set of the sign that was drawn.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ClientAudit {
    /// P(ν) of the client's selection.
    pub nu: Vec<f64>,
    /// MagRR's keep probability e^ε_RR/(1 + e^ε_RR).
    pub keep: f64,
    /// d.
    pub dim: usize,
    /// The top-k sets of the fixed update for the negative and the positive sign.
    pub sets: [Vec<u32>; 2],
    /// Per input: label, JSON, the true MagRR bit.
    pub inputs: Vec<(String, Value, bool)>,
    /// MagRR's claimed (realised) ε_RR.
    pub magrr_epsilon: Option<f64>,
    /// Per input, its update's top-k sets (negative, positive sign) when the inputs have
    /// different updates; empty: every input has `sets`.
    pub input_sets: Vec<[Vec<u32>; 2]>,
    /// Per input, the true MagRR bit under the negative and under the positive sign (r is
    /// the magnitude of the drawn sign's top-k mean, so an asymmetric update has two);
    /// empty: the input's one bit for both signs.
    pub sign_truths: Vec<[bool; 2]>,
}

/// The (sign, reported bit) combinations in layout order.
const COMBINATIONS: [(&str, u8); 4] = [("-", 0), ("-", 1), ("+", 0), ("+", 1)];

impl ClientAudit {
    /// Outputs ν can take: h + 1.
    fn nus(&self) -> usize {
        self.nu.len()
    }

    /// Length of one input's counts.
    pub(crate) fn layout_len(&self) -> usize {
        4 * (self.nus() + self.dim)
    }

    /// The true MagRR bits of input number `input` under the negative and the positive
    /// sign.
    pub(crate) fn truths(&self, input: usize) -> [bool; 2] {
        self.sign_truths.get(input).copied().unwrap_or_else(|| {
            let t = self.inputs.get(input).is_some_and(|x| x.2);
            [t, t]
        })
    }

    /// The top-k sets (negative, positive sign) of input number `input`'s update.
    pub(crate) fn sets_of(&self, input: usize) -> &[Vec<u32>; 2] {
        self.input_sets.get(input).unwrap_or(&self.sets)
    }

    /// The joint law of (sign, reported bit, ν) when the true bit is `truths[s]` under sign
    /// s (0: negative), in layout order: the sign is fair, the bit kept with probability
    /// `keep` given the sign, ν from the selection independent of both.
    pub(crate) fn joint_law_by_sign(&self, truths: [bool; 2]) -> Vec<f64> {
        let mut law = Vec::with_capacity(4 * self.nus());
        for (i, (_, bit)) in COMBINATIONS.iter().enumerate() {
            let truth = truths[i / 2];
            let b = if (*bit == 1) == truth {
                self.keep
            } else {
                1.0 - self.keep
            };
            law.extend(self.nu.iter().map(|&p| 0.5 * b * p));
        }
        law
    }

    fn inclusion_tests(&self) -> usize {
        let (inside, outside) = inclusion_parts(self.sets[0].len(), self.dim);
        4 * (usize::from(inside) + usize::from(outside))
    }

    /// Tests this law produces.
    pub(crate) fn test_count(&self, tests: &TestSet) -> usize {
        let marginal = ["sign", "magrr", "nu"]
            .iter()
            .filter(|t| tests.has(t))
            .count();
        let joint = if tests.has("joint") {
            1 + self.inclusion_tests()
        } else {
            0
        };
        self.inputs.len() * (marginal + joint)
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
        let h1 = self.nus();
        for (input, ((label, _, _), c)) in self.inputs.iter().zip(counts).enumerate() {
            check_shape(c.len(), self.layout_len())?;
            let truths = self.truths(input);
            let (joint, hits) = c.split_at(4 * h1);
            let combo = |i: usize| &joint[i * h1..(i + 1) * h1];
            let total = |i: usize| combo(i).iter().sum::<u64>();
            let n: u64 = joint.iter().sum();
            r.drawn += n;
            let positive = total(2) + total(3);
            let ones = total(1) + total(3);
            let nu: Vec<u64> = (0..h1).map(|v| (0..4).map(|i| combo(i)[v]).sum()).collect();
            // The bit is kept when it equals the drawn sign's true bit.
            let kept = (0..4)
                .filter(|&i| (COMBINATIONS[i].1 == 1) == truths[i / 2])
                .map(total)
                .sum::<u64>();
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
                    .push(chi_square("nu-chi-square", a, &nu, &self.nu)?);
            }
            if tests.has("joint") {
                let a = about(&[
                    ("input", json!(label)),
                    ("output", json!("(sign, MagRR bit, nu)")),
                ]);
                r.outcomes.push(chi_square(
                    "joint-chi-square",
                    a,
                    joint,
                    &self.joint_law_by_sign(truths),
                )?);
                // The indices given each (sign, bit): uniform inside the sign's top-k set
                // and inside its complement, whatever the MagRR bit.
                for (i, (sign, bit)) in COMBINATIONS.iter().enumerate() {
                    let set = &self.sets_of(input)[i / 2];
                    let hits_i = &hits[i * self.dim..(i + 1) * self.dim];
                    let context = [
                        ("input", json!(label)),
                        ("sign", json!(sign)),
                        ("bit", json!(bit)),
                    ];
                    r.outcomes.extend(inclusion_outcomes(
                        set,
                        self.dim,
                        hits_i,
                        combo(i),
                        &context,
                    )?);
                }
            }
            bits.push(vec![n.saturating_sub(ones), ones]);
            r.panels.push(Panel {
                title: format!("input {label}: sign, bit kept, P(nu)"),
                data: PanelData::Bars {
                    labels: ["+", "kept"]
                        .iter()
                        .map(|s| (*s).to_string())
                        .chain((0..h1).map(|v| format!("nu={v}")))
                        .collect(),
                    expected: [0.5, self.keep]
                        .into_iter()
                        .chain(self.nu.iter().copied())
                        .collect(),
                    observed: [positive, kept]
                        .iter()
                        .chain(&nu)
                        .map(|&k| k as f64 / n.max(1) as f64)
                        .collect(),
                    samples: n,
                    standard_errors: None,
                },
            });
        }
        if self.epsilon_count(tests) == 1
            && let Some(claimed) = self.magrr_epsilon
        {
            // The reported bit is the true one with probability `keep`.
            // P(reported bit = 1) averaged over the fair sign.
            let law = |truths: [bool; 2]| {
                let one = truths
                    .iter()
                    .map(|&t| if t { self.keep } else { 1.0 - self.keep })
                    .sum::<f64>()
                    / 2.0;
                vec![1.0 - one, one]
            };
            let mut e = EpsilonEvidence::new(about(&[("scope", json!("MagRR bit"))]), claimed);
            let labels: Vec<(&str, [bool; 2])> = self
                .inputs
                .iter()
                .enumerate()
                .map(|(i, (l, _, _))| (l.as_str(), self.truths(i)))
                .collect();
            for (a, b) in neighbour_pairs(bits.len()) {
                if let (Some(ca), Some(cb), Some(&(la, ta)), Some(&(lb, tb))) =
                    (bits.get(a), bits.get(b), labels.get(a), labels.get(b))
                    && ta != tb
                {
                    e.push(
                        format!("{la} / {lb}"),
                        (ca.clone(), cb.clone()),
                        (law(ta), law(tb)),
                    );
                }
            }
            r.evidence.push(e);
        }
        Ok(r)
    }
}

/// Whether the subset-inclusion test has something to test inside a top-k set of size `k`
/// (at least 2 indices) and inside its complement in 0..d.
fn inclusion_parts(k: usize, d: usize) -> (bool, bool) {
    (k >= 2, d.saturating_sub(k) >= 2)
}

/// Index uniformity inside `set` and inside its complement in 0..`dim`, from the hits of
/// each index and the histogram of ν = |J ∩ set| over the same outputs.
fn inclusion_outcomes(
    set: &[u32],
    dim: usize,
    hits: &[u64],
    nu: &[u64],
    context: &[(&str, Value)],
) -> Result<Vec<super::Outcome>> {
    let mut out = Vec::new();
    let (inside, outside) = inclusion_parts(set.len(), dim);
    let mut in_set = vec![false; dim];
    for &j in set {
        if let Some(b) = in_set.get_mut(j as usize) {
            *b = true;
        }
    }
    let with = |part: &str| {
        let mut a = about(context);
        a.insert("part".into(), json!(part));
        a
    };
    if inside {
        let inc: Vec<u64> = set.iter().map(|&j| hits[j as usize]).collect();
        out.push(subset_inclusion(
            "inclusion-uniformity",
            with("top-k"),
            &inc,
            nu,
        )?);
    }
    if outside {
        let inc: Vec<u64> = (0..dim).filter(|&j| !in_set[j]).map(|j| hits[j]).collect();
        // h − ν of each output come from the complement.
        let sizes: Vec<u64> = nu.iter().rev().copied().collect();
        out.push(subset_inclusion(
            "inclusion-uniformity",
            with("complement"),
            &inc,
            &sizes,
        )?);
    }
    Ok(out)
}
