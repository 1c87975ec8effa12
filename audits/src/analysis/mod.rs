//! From observations and exact laws to test outcomes. Every statistic is computed by
//! fl-stats; this module only decides which tests to run on which counts.

use rayon::prelude::*;
use serde_json::{Value, json};

pub(crate) mod epsilon;
pub(crate) mod estimator;
pub(crate) mod learned;
pub(crate) mod olh;
pub(crate) mod serial;
pub(crate) mod signds;

use crate::{
    error::Result,
    report::{Panel, PanelData},
    suite::Params,
    tally::{BitStats, FULL_VECTOR_MAX_DIM, PAIR_MAX_DIM, pair_design},
};

/// One unadjusted test outcome of a grid point.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Outcome {
    /// The test's name.
    pub test: String,
    /// What the test is about (input, output, coordinate), added to the point's params.
    pub about: Params,
    /// Observations used.
    pub samples: u64,
    /// The statistic (may be infinite).
    pub statistic: f64,
    /// The p-value.
    pub p_value: f64,
}

/// Counts from which one certified ε lower bound is computed: for each pair of
/// neighbouring inputs, the counts of the same events under both, and their exact law
/// (from which the statement's event is chosen before sampling: [`epsilon`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EpsilonEvidence {
    /// What the bound is about (`scope`), added to the point's params.
    pub about: Params,
    /// The claimed ε for this scope.
    pub claimed: f64,
    /// (counts under x, counts under x′) per pair of neighbours.
    pub pairs: Vec<(Vec<u64>, Vec<u64>)>,
    /// (P[cell | x], P[cell | x′]) per pair, over the same cells as `pairs`.
    pub laws: Vec<(Vec<f64>, Vec<f64>)>,
    /// Per pair, what it compares: `"a / b"` for inputs labelled a and b, optionally after
    /// a context (`"coordinate j: a / b"`).
    pub names: Vec<String>,
    /// For a learned event: where it is searched and, per pair, the fitting half's counts
    /// (`pairs` then holds the certifying half's counts and `laws` the cells' exact laws,
    /// or empty ones when unknown).
    pub learned: Option<LearnedEvidence>,
}

/// What a learned event is fitted on (see [`learned`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LearnedEvidence {
    /// The output space and the claim.
    pub spec: learned::LearnedSpec,
    /// Per pair, the fitting half's counts under its first and its second input.
    pub fit: Vec<(Vec<u64>, Vec<u64>)>,
}

impl EpsilonEvidence {
    /// A statement about `about` claiming `claimed`, with no pair yet.
    pub(crate) fn new(about: Params, claimed: f64) -> Self {
        Self {
            about,
            claimed,
            pairs: Vec::new(),
            laws: Vec::new(),
            names: Vec::new(),
            learned: None,
        }
    }

    /// The learned-event statement of `spec` from each input's event cells (`labels` name
    /// the inputs).
    pub(crate) fn learned(
        spec: &learned::LearnedSpec,
        cells: &[&crate::tally::EventCells],
        labels: &[String],
    ) -> Self {
        let mut e = Self::new(about(&[("scope", json!("learned event"))]), spec.claimed);
        let mut fit = Vec::new();
        for &(a, b) in &spec.pairs {
            if let (Some(ca), Some(cb), Some(la), Some(lb)) =
                (cells.get(a), cells.get(b), labels.get(a), labels.get(b))
            {
                let law = |i: usize| {
                    spec.laws
                        .as_ref()
                        .and_then(|l| l.get(i).cloned())
                        .unwrap_or_default()
                };
                e.push(
                    format!("{la} / {lb}"),
                    (ca.certify.clone(), cb.certify.clone()),
                    (law(a), law(b)),
                );
                fit.push((ca.fit.clone(), cb.fit.clone()));
            }
        }
        e.learned = Some(LearnedEvidence {
            spec: spec.clone(),
            fit,
        });
        e
    }

    /// Adds a pair: its name, its counts (under x, under x′) and its law over the same
    /// cells.
    pub(crate) fn push(
        &mut self,
        name: String,
        counts: (Vec<u64>, Vec<u64>),
        law: (Vec<f64>, Vec<f64>),
    ) {
        self.names.push(name);
        self.pairs.push(counts);
        self.laws.push(law);
    }

    /// Adds each pair (a, b) of input indices from `pairs`, with the inputs' `counts` and
    /// `input(i)` = (label, law) of input i; pairs missing either are skipped.
    pub(crate) fn push_pairs<'a>(
        &mut self,
        pairs: &[(usize, usize)],
        counts: &[Vec<u64>],
        input: impl Fn(usize) -> Option<(&'a str, &'a [f64])>,
    ) {
        for &(a, b) in pairs {
            if let (Some(ca), Some(cb), Some((xa, la)), Some((xb, lb))) =
                (counts.get(a), counts.get(b), input(a), input(b))
            {
                self.push(
                    format!("{xa} / {xb}"),
                    (ca.clone(), cb.clone()),
                    (la.to_vec(), lb.to_vec()),
                );
            }
        }
    }
}

/// Everything a grid point produced.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct PointResult {
    /// Test outcomes.
    pub outcomes: Vec<Outcome>,
    /// ε evidence.
    pub evidence: Vec<EpsilonEvidence>,
    /// Plot panels.
    pub panels: Vec<Panel>,
    /// Outputs drawn.
    pub drawn: u64,
    /// Sentences for the report about what the tests covered (one per kind of test).
    pub notes: Vec<String>,
    /// The branches of the mechanism and the inputs that exercise them.
    pub coverage: Vec<crate::report::Branch>,
}

/// Which tests a suite asked for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct TestSet(pub Vec<String>);

impl TestSet {
    /// Whether `name` was asked for.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.0.iter().any(|t| t == name)
    }
}

pub(crate) fn about(pairs: &[(&str, Value)]) -> Params {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), v.clone()))
        .collect()
}

/// Exact two-sided binomial test of `k` successes in `n` trials against `p`; an output
/// of probability 0 that was observed gives p-value 0 (it is impossible under H₀).
pub(crate) fn binomial(test: &str, about: Params, k: u64, n: u64, p: f64) -> Result<Outcome> {
    if p == 0.0 || p == 1.0 {
        let impossible = if p == 0.0 { k > 0 } else { k < n };
        return Ok(Outcome {
            test: test.into(),
            about,
            samples: n,
            statistic: if n == 0 { 0.0 } else { k as f64 / n as f64 },
            p_value: if impossible { 0.0 } else { 1.0 },
        });
    }
    let t = fl_stats::binomial_test(k, n, p, fl_stats::Alternative::TwoSided)?;
    Ok(Outcome {
        test: test.into(),
        about,
        samples: n,
        statistic: t.estimate(),
        p_value: t.p_value,
    })
}

/// Pearson chi-square goodness of fit (fl-stats' default sparse-cell merging).
pub(crate) fn chi_square(
    test: &str,
    about: Params,
    observed: &[u64],
    law: &[f64],
) -> Result<Outcome> {
    let t = fl_stats::chi_square_gof(observed, law)?;
    Ok(Outcome {
        test: test.into(),
        about,
        samples: observed.iter().sum(),
        statistic: t.statistic,
        p_value: t.p_value,
    })
}

/// One-sample Kolmogorov–Smirnov test of `samples` against the law with CDF `cdf` and
/// left limit `cdf_left` (P(Y < y)): exact at the atoms of a lattice law, conservative
/// for a coarse one (fl-stats' `ks_one_sample_with_atoms`).
pub(crate) fn ks(
    test: &str,
    about: Params,
    samples: &[f64],
    cdf: impl Fn(f64) -> f64,
    cdf_left: impl Fn(f64) -> f64,
) -> Result<Outcome> {
    let t = fl_stats::ks_one_sample_with_atoms(samples, cdf, cdf_left)?;
    Ok(Outcome {
        test: test.into(),
        about,
        samples: samples.len() as u64,
        statistic: t.statistic,
        p_value: t.p_value,
    })
}

/// The error when a sampler's output does not have the law's shape (a suite's `sampler`
/// overrides changed more than a calibration parameter).
pub(crate) fn check_shape(found: usize, expected: usize) -> Result<()> {
    if found == expected {
        Ok(())
    } else {
        Err(crate::error::AuditError::Mechanism(format!(
            "the sampler's output has {found} cells where the law has {expected}: sampler \
             overrides may change calibration parameters (eps), not the output shape"
        )))
    }
}

/// Exact test of fl-stats' subset-inclusion statistic: given its size, each draw is a
/// uniformly random subset of the cells. No draw at all (a combination the data never
/// showed) tests nothing: p-value 1.
pub(crate) fn subset_inclusion(
    test: &str,
    about: Params,
    inclusions: &[u64],
    sizes: &[u64],
) -> Result<Outcome> {
    if sizes.iter().all(|&s| s == 0) {
        return Ok(Outcome {
            test: test.into(),
            about,
            samples: 0,
            statistic: 0.0,
            p_value: 1.0,
        });
    }
    let t = fl_stats::subset_inclusion_test(inclusions, sizes)?;
    Ok(Outcome {
        test: test.into(),
        about,
        samples: t.draws,
        statistic: t.statistic,
        p_value: t.p_value,
    })
}

/// A frequency oracle's support structure over a finite law's outputs: which values each
/// output *supports* (C_v counts the reports supporting v), and the support probabilities.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SupportLaw {
    /// For each output, the values it supports.
    pub supports: Vec<Vec<usize>>,
    /// The number of values k (input number i holds value i).
    pub values: usize,
    /// P(a report supports the user's own value).
    pub p: f64,
    /// P(a report supports a given other value).
    pub q: f64,
}

/// A finite-output mechanism's law at one grid point.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FiniteLaw {
    /// Output labels (`output_count` of them).
    pub outputs: Vec<String>,
    /// Per input: label, the input as JSON (for the protocol), P(output | input).
    pub inputs: Vec<(String, Value, Vec<f64>)>,
    /// Claimed ε and the pairs of input indices that are neighbours, if ε is audited.
    pub epsilon: Option<(f64, Vec<(usize, usize)>)>,
    /// A frequency oracle's supports (the `support` test), if any.
    pub support: Option<SupportLaw>,
    /// The probabilities to plan for, when not every output cell's (frequency oracles:
    /// the support probabilities p and q).
    pub plan: Option<Vec<f64>>,
}

impl FiniteLaw {
    /// A law without supports and with the default plan (every output cell).
    pub(crate) fn new(
        outputs: Vec<String>,
        inputs: Vec<(String, Value, Vec<f64>)>,
        epsilon: Option<(f64, Vec<(usize, usize)>)>,
    ) -> Self {
        Self {
            outputs,
            inputs,
            epsilon,
            support: None,
            plan: None,
        }
    }

    /// Tests this law produces per the test set (an estimate used for planning).
    /// Tests this law produces per the test set when the data follow the law (an output
    /// of probability 0 gets a test only if it is observed, i.e. never under H₀).
    pub(crate) fn test_count(&self, tests: &TestSet) -> usize {
        let k = self.outputs.len();
        let mut count = 0;
        for (_, _, law) in &self.inputs {
            if tests.has("cells") {
                count += if k == 2 {
                    1
                } else {
                    law.iter().filter(|&&p| p > 0.0).count()
                };
            }
            if tests.has("chi-square") && k > 2 {
                count += 1;
            }
            if let (true, Some(s)) = (tests.has("support"), &self.support) {
                count += s.values;
            }
        }
        count
    }

    /// Every positive probability that a 1 % relative error must be detected in.
    pub(crate) fn plan_probabilities(&self) -> Vec<f64> {
        if let Some(plan) = &self.plan {
            return plan.clone();
        }
        self.inputs
            .iter()
            .flat_map(|(_, _, law)| law.iter().copied().filter(|&p| p > 0.0 && p < 1.0))
            .collect()
    }

    /// Runs the requested tests on `counts` (one histogram per input).
    pub(crate) fn analyze(&self, counts: &[Vec<u64>], tests: &TestSet) -> Result<PointResult> {
        let mut r = PointResult::default();
        for (i, ((label, _, law), c)) in self.inputs.iter().zip(counts).enumerate() {
            check_shape(c.len(), law.len())?;
            let n: u64 = c.iter().sum();
            r.drawn += n;
            if tests.has("cells") {
                if law.len() == 2 {
                    // One test per input: the two cells are the same test.
                    let o = usize::from(law[1] <= law[0]);
                    let a = about(&[("input", json!(label)), ("output", json!(self.outputs[o]))]);
                    r.outcomes
                        .push(binomial("cell-binomial", a, c[o], n, law[o])?);
                } else {
                    for (o, (&k, &p)) in c.iter().zip(law).enumerate() {
                        if p == 0.0 && k == 0 {
                            continue;
                        }
                        let a =
                            about(&[("input", json!(label)), ("output", json!(self.outputs[o]))]);
                        r.outcomes.push(binomial("cell-binomial", a, k, n, p)?);
                    }
                }
            }
            if tests.has("chi-square") && law.len() > 2 {
                let a = about(&[("input", json!(label))]);
                r.outcomes.push(chi_square("chi-square", a, c, law)?);
            }
            if let Some(s) = &self.support {
                // C_v = reports supporting v; input number i holds value i.
                let mut support = vec![0u64; s.values];
                for (&k, values) in c.iter().zip(&s.supports) {
                    for &v in values {
                        if let Some(x) = support.get_mut(v) {
                            *x += k;
                        }
                    }
                }
                let expected: Vec<f64> = (0..s.values)
                    .map(|v| if v == i { s.p } else { s.q })
                    .collect();
                if tests.has("support") {
                    for (v, (&k, &p)) in support.iter().zip(&expected).enumerate() {
                        let a = about(&[("input", json!(label)), ("value", json!(v))]);
                        r.outcomes.push(binomial("support-binomial", a, k, n, p)?);
                    }
                }
                r.panels.push(Panel {
                    title: format!("input {label}: P(report supports value)"),
                    data: PanelData::Bars {
                        labels: (0..s.values).map(|v| v.to_string()).collect(),
                        expected,
                        observed: support
                            .iter()
                            .map(|&k| k as f64 / n.max(1) as f64)
                            .collect(),
                        samples: n,
                        standard_errors: None,
                    },
                });
            } else {
                r.panels.push(Panel {
                    title: format!("input {label}"),
                    data: PanelData::Bars {
                        labels: self.outputs.clone(),
                        expected: law.clone(),
                        observed: c.iter().map(|&k| k as f64 / n.max(1) as f64).collect(),
                        samples: n,
                        standard_errors: None,
                    },
                });
            }
        }
        if tests.has("epsilon")
            && let Some((claimed, pairs)) = &self.epsilon
        {
            let mut e = EpsilonEvidence::new(about(&[("scope", json!("output"))]), *claimed);
            e.push_pairs(pairs, counts, |i| {
                self.inputs
                    .get(i)
                    .map(|(l, _, law)| (l.as_str(), law.as_slice()))
            });
            r.evidence.push(e);
        }
        Ok(r)
    }
}

/// Up to this many inputs, every pair of inputs is a candidate pair of an ε statement.
const ALL_PAIRS_MAX_INPUTS: usize = 16;

/// The neighbour pairs an ε statement chooses from over `k` inputs: every pair for
/// k ≤ 16, else a ring (i, i+1 mod k), so every input is in two pairs. The statement
/// certifies one pair chosen from the law before sampling, so more candidates cost no
/// confidence.
pub(crate) fn neighbour_pairs(k: usize) -> Vec<(usize, usize)> {
    if k <= ALL_PAIRS_MAX_INPUTS {
        (0..k)
            .flat_map(|a| (a + 1..k).map(move |b| (a, b)))
            .collect()
    } else {
        (0..k).map(|i| (i, (i + 1) % k)).collect()
    }
}

/// A product-of-bits mechanism's law at one grid point.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BitLaw {
    /// Output dimension D.
    pub dim: usize,
    /// Per input: label, the input as JSON, P(bit j = 1 | input) for each j.
    pub inputs: Vec<(String, Value, Vec<f64>)>,
    /// Per input, its own bit per coordinate (EmbeddingDP: the sign; OUE: the one-hot
    /// value), named in the adjacent-pair independence tests and their coverage note.
    pub input_bits: Vec<Vec<bool>>,
    /// Claimed ε per coordinate and for the whole vector (when D ≤ [`FULL_VECTOR_MAX_DIM`]).
    pub epsilon: Option<(f64, f64)>,
}

impl BitLaw {
    /// The input bits of coordinates (j, k) under input number `input`: "00", "01", "10"
    /// or "11".
    fn pair_bits(&self, input: usize, j: usize, k: usize) -> Option<String> {
        let bits = self.input_bits.get(input)?;
        let (a, b) = (bits.get(j)?, bits.get(k)?);
        Some(format!("{}{}", u8::from(*a), u8::from(*b)))
    }

    /// The pairs of coordinates the independence tests cover: [`pair_design`] (every pair
    /// up to [`PAIR_MAX_DIM`] coordinates, above every power-of-two offset and one pair at
    /// every other offset).
    fn pairs(&self) -> Vec<(usize, usize)> {
        pair_design(self.dim)
    }

    /// What the pair design covers, for the report: the pairs tested among all pairs, the
    /// offsets, and the cross-output tests on the same pairs.
    pub(crate) fn design_note(&self) -> Option<String> {
        if self.dim < 2 {
            return None;
        }
        let pairs = self.pairs().len();
        let all = self.dim * (self.dim - 1) / 2;
        let design = if self.dim <= PAIR_MAX_DIM {
            format!("every pair of the {} coordinates", self.dim)
        } else {
            let mut offsets = Vec::new();
            let mut o = 1;
            while o < self.dim {
                offsets.push(o.to_string());
                o *= 2;
            }
            format!(
                "every pair (j, j + o) at the power-of-two offsets o = {} and one pair (drawn \
                 from a fixed seed) at every other offset 3..{}: every offset and every \
                 coordinate is in a tested pair",
                offsets.join(", "),
                self.dim - 1
            )
        };
        Some(format!(
            "pair design: {pairs} of {all} pairs of coordinates ({:.1} %), {design}; \
             pair-independence tests each within an output, cross-output-independence tests \
             each in both orders ((j of output t, k of output t+1) and (k of t, j of t+1)) \
             over consecutive outputs of every input ({} tests per input); coordinate j of \
             output t against coordinate j of output t+1 is the serial test at lag 1",
            100.0 * pairs as f64 / all.max(1) as f64,
            2 * pairs
        ))
    }

    /// Which input-bit combinations of each pair the independence tests saw, over all
    /// inputs: a dependence that shows only for some combinations (e.g. equal bits) is
    /// only tested where they occur.
    pub(crate) fn coverage_note(&self) -> Option<String> {
        if self.input_bits.is_empty() || self.dim < 2 {
            return None;
        }
        let pairs = self.pairs();
        // An input with at most one bit set (a one-hot value, OUE's input) can never show
        // 11: that combination is impossible for such a family, not a gap.
        let one_hot = self
            .input_bits
            .iter()
            .all(|bits| bits.iter().filter(|&&b| b).count() <= 1);
        if one_hot {
            let full = pairs
                .iter()
                .filter(|&&(j, k)| {
                    let mut seen: Vec<String> = (0..self.inputs.len())
                        .filter_map(|i| self.pair_bits(i, j, k))
                        .collect();
                    seen.sort();
                    seen.dedup();
                    seen.len() == 3
                })
                .count();
            return Some(format!(
                "pair-independence input-bit combinations over the {} inputs: the inputs are \
                 one-hot (a single value, the only input this family takes), so 11 cannot \
                 occur; {full} of {} pairs of coordinates see all three possible \
                 combinations (00 01 10)",
                self.inputs.len(),
                pairs.len()
            ));
        }
        let mut partial = Vec::new();
        for &(j, k) in &pairs {
            let mut seen: Vec<String> = (0..self.inputs.len())
                .filter_map(|i| self.pair_bits(i, j, k))
                .collect();
            seen.sort();
            seen.dedup();
            if seen.len() < 4 {
                partial.push(format!("({j},{k}): {}", seen.join(" ")));
            }
        }
        let missing = if partial.is_empty() {
            String::new()
        } else {
            let shown = partial.len().min(12);
            format!(
                "; pairs that miss some: {}{}",
                partial[..shown].join("; "),
                if partial.len() > shown { "; …" } else { "" }
            )
        };
        Some(format!(
            "pair-independence input-bit combinations over the {} inputs: {} of {} pairs of \
             coordinates see all four (00 01 10 11){missing}",
            self.inputs.len(),
            pairs.len() - partial.len(),
            pairs.len(),
        ))
    }

    /// Tests this law produces (an estimate used for planning).
    pub(crate) fn test_count(&self, tests: &TestSet) -> usize {
        let mut per_input = 0;
        if tests.has("coordinates") {
            per_input += self.dim;
        }
        if tests.has("independence") {
            // Within an output, and across consecutive outputs in both orders.
            per_input += 3 * self.pairs().len() + usize::from(self.dim <= FULL_VECTOR_MAX_DIM);
        }
        per_input * self.inputs.len()
    }

    /// ε statements this law produces.
    pub(crate) fn epsilon_count(&self, tests: &TestSet) -> usize {
        if tests.has("epsilon") && self.epsilon.is_some() {
            1 + usize::from(self.dim <= FULL_VECTOR_MAX_DIM)
        } else {
            0
        }
    }

    /// Every probability (of a one and of a zero) a 1 % relative error must be detected in.
    pub(crate) fn plan_probabilities(&self) -> Vec<f64> {
        self.inputs
            .iter()
            .flat_map(|(_, _, p)| p.iter().flat_map(|&x| [x, 1.0 - x]))
            .filter(|&p| p > 0.0 && p < 1.0)
            .collect()
    }

    /// Runs the requested tests.
    pub(crate) fn analyze(&self, stats: &[BitStats], tests: &TestSet) -> Result<PointResult> {
        let mut r = PointResult::default();
        for (input_number, ((label, _, p), s)) in self.inputs.iter().zip(stats).enumerate() {
            r.drawn += s.n;
            if tests.has("coordinates") {
                for (j, (&k, &pj)) in s.ones.iter().zip(p).enumerate() {
                    let a = about(&[("input", json!(label)), ("coordinate", json!(j))]);
                    r.outcomes
                        .push(binomial("coordinate-binomial", a, k, s.n, pj)?);
                }
            }
            if tests.has("independence") {
                // Every pair of coordinates against the product law (2 × 2 cells)…
                let pairs = self.pairs();
                for (pair, &(j, k)) in pairs.iter().enumerate() {
                    let (a, b) = (p[j], p[k]);
                    let law = [(1.0 - a) * (1.0 - b), (1.0 - a) * b, a * (1.0 - b), a * b];
                    let mut ab = about(&[("input", json!(label)), ("coordinates", json!([j, k]))]);
                    if let Some(bits) = self.pair_bits(input_number, j, k) {
                        ab.insert("input_bits".into(), json!(bits));
                    }
                    r.outcomes.push(chi_square(
                        "pair-independence",
                        ab,
                        &s.pair_table(pair, j, k),
                        &law,
                    )?);
                }
                // …the same pairs across consecutive outputs, in both orders (law-free: a
                // chi-square of independence of each 2 × 2 table)…
                for (pair, &(j, k)) in pairs.iter().enumerate() {
                    let (forward, backward) = s.cross_tables(pair);
                    for (first, second, table) in [(j, k, forward), (k, j, backward)] {
                        let t = fl_stats::chi_square_independence(&table, 2, 2)?;
                        r.outcomes.push(Outcome {
                            test: "cross-output-independence".into(),
                            about: about(&[
                                ("input", json!(label)),
                                ("coordinates", json!([first, second])),
                                ("outputs", json!("t, t+1")),
                            ]),
                            samples: t.samples,
                            statistic: t.statistic,
                            p_value: t.p_value,
                        });
                    }
                }
                // …and the whole vector against the exact joint law (2^D cells).
                if let Some(full) = &s.full {
                    let a = about(&[("input", json!(label))]);
                    r.outcomes
                        .push(chi_square("joint-chi-square", a, full, &vector_law(p))?);
                }
            }
            r.panels.push(Panel {
                title: format!("input {label}: P(bit = 1) per coordinate"),
                data: PanelData::Bars {
                    labels: (0..self.dim).map(|j| j.to_string()).collect(),
                    expected: p.clone(),
                    observed: s
                        .ones
                        .iter()
                        .map(|&k| k as f64 / s.n.max(1) as f64)
                        .collect(),
                    samples: s.n,
                    standard_errors: None,
                },
            });
        }
        if tests.has("independence")
            && let Some(note) = self.coverage_note()
        {
            r.notes.push(note);
        }
        if tests.has("independence")
            && let Some(note) = self.design_note()
        {
            r.notes.push(note);
        }
        if tests.has("epsilon")
            && let (Some((per_coordinate, whole)), [first, second, ..], [x, y, ..]) =
                (self.epsilon, stats, self.inputs.as_slice())
        {
            let names = format!("{} / {}", x.0, y.0);
            let mut e =
                EpsilonEvidence::new(about(&[("scope", json!("coordinate"))]), per_coordinate);
            for (j, ((&a, &b), (&pa, &pb))) in first
                .ones
                .iter()
                .zip(&second.ones)
                .zip(x.2.iter().zip(&y.2))
                .enumerate()
            {
                e.push(
                    format!("coordinate {j}: {names}"),
                    (vec![first.n - a, a], vec![second.n - b, b]),
                    (vec![1.0 - pa, pa], vec![1.0 - pb, pb]),
                );
            }
            r.evidence.push(e);
            if let (Some(a), Some(b)) = (&first.full, &second.full) {
                let mut e = EpsilonEvidence::new(about(&[("scope", json!("vector"))]), whole);
                e.push(
                    names,
                    (a.clone(), b.clone()),
                    (vector_law(&x.2), vector_law(&y.2)),
                );
                r.evidence.push(e);
            }
        }
        Ok(r)
    }
}

/// The law of a whole vector of independent bits with P(bit j = 1) = `ones[j]`, indexed
/// Σ b_j 2^j like [`BitStats::full`].
pub(crate) fn vector_law(ones: &[f64]) -> Vec<f64> {
    let mut law = vec![1.0];
    for &p in ones {
        // Bit j is the highest so far: vectors with it set follow those without.
        let zero: Vec<f64> = law.iter().map(|&q| q * (1.0 - p)).collect();
        let one: Vec<f64> = law.iter().map(|&q| q * p).collect();
        law = zero;
        law.extend(one);
    }
    law
}

/// The CDF of output coordinate `coordinate` under input number `input`.
pub(crate) type CdfFn = dyn Fn(usize, usize, f64) -> f64 + Send + Sync;

/// A real-valued product mechanism's law at one grid point (coordinates independent).
pub(crate) struct RealLaw {
    /// Output dimension D.
    pub dim: usize,
    /// Per input: label, the input as JSON, and the centre of each coordinate's law.
    pub inputs: Vec<(String, Value, Vec<f64>)>,
    /// Each coordinate's CDF (from the mechanism crate).
    pub cdf: Box<CdfFn>,
    /// Each coordinate's left limit P(Y < y) (below the CDF at the law's atoms).
    pub cdf_left: Box<CdfFn>,
    /// The noise scale b (tail thresholds are 3b and 6b from the centre).
    pub scale: f64,
    /// Claimed ε for the first two inputs (the box event of the module docs).
    pub epsilon: Option<f64>,
    /// Bin edges relative to each coordinate's centre (increasing) for the `chi-square`
    /// test of binned counts: the cells (−∞, c + e₀], (c + e₀, c + e₁], …, (c + e_last, ∞),
    /// both tails included, their probabilities from `cdf`; empty: no such test.
    pub chi_square_edges: Vec<f64>,
    /// The probabilities to plan for, when not the tails at 3b (the discrete Gaussian:
    /// its central mass).
    pub plan: Option<Vec<f64>>,
}

impl std::fmt::Debug for RealLaw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealLaw")
            .field("dim", &self.dim)
            .field("inputs", &self.inputs)
            .field("scale", &self.scale)
            .field("epsilon", &self.epsilon)
            .field("chi_square_edges", &self.chi_square_edges)
            .finish_non_exhaustive()
    }
}

/// Tail thresholds, in units of the scale.
const TAILS: [f64; 2] = [3.0, 6.0];

impl RealLaw {
    /// Tests this law produces.
    pub(crate) fn test_count(&self, tests: &TestSet) -> usize {
        let mut per_input = 0;
        if tests.has("ks") {
            per_input += self.dim;
        }
        if tests.has("tails") {
            per_input += self.dim * 2 * TAILS.len();
        }
        if self.chi_squares(tests) {
            per_input += self.dim;
        }
        per_input * self.inputs.len()
    }

    /// Whether the binned chi-square test runs.
    fn chi_squares(&self, tests: &TestSet) -> bool {
        tests.has("chi-square") && !self.chi_square_edges.is_empty()
    }

    /// The binned chi-square test of one coordinate's samples `col` under input `i`,
    /// centred at `c`.
    fn binned_chi_square(
        &self,
        about: Params,
        i: usize,
        j: usize,
        c: f64,
        col: &[f64],
    ) -> Result<Outcome> {
        let edges: Vec<f64> = self.chi_square_edges.iter().map(|&e| c + e).collect();
        let mut counts = vec![0u64; edges.len() + 1];
        for &y in col {
            counts[edges.partition_point(|&e| e < y)] += 1;
        }
        let mut cdf = Vec::with_capacity(edges.len() + 2);
        cdf.push(0.0);
        cdf.extend(edges.iter().map(|&e| (self.cdf)(i, j, e)));
        cdf.push(1.0);
        let law: Vec<f64> = cdf.windows(2).map(|w| (w[1] - w[0]).max(0.0)).collect();
        chi_square("chi-square", about, &counts, &law)
    }

    /// ε statements this law produces.
    pub(crate) fn epsilon_count(&self, tests: &TestSet) -> usize {
        usize::from(
            tests.has("epsilon")
                && self.epsilon.is_some()
                && self.inputs.len() >= 2
                && self.dim >= 2,
        )
    }

    /// Tail probabilities at the first threshold, or the law's own `plan` (planning).
    pub(crate) fn plan_probabilities(&self) -> Vec<f64> {
        if let Some(plan) = &self.plan {
            return plan.clone();
        }
        let mut out = Vec::new();
        for (i, (_, _, c)) in self.inputs.iter().enumerate() {
            for (j, &cj) in c.iter().enumerate() {
                let t = TAILS[0] * self.scale;
                out.push(1.0 - (self.cdf)(i, j, cj + t));
                out.push((self.cdf)(i, j, cj - t));
            }
        }
        out.retain(|&p| p > 0.0 && p < 1.0);
        out
    }

    /// Runs the requested tests on per-input, per-coordinate samples.
    pub(crate) fn analyze(
        &self,
        samples: &[Vec<Vec<f64>>],
        tests: &TestSet,
    ) -> Result<PointResult> {
        let mut r = PointResult::default();
        // The KS tests (a sort and a lattice CDF per sample: most of this analysis) run in
        // parallel over inputs and coordinates; their rows keep this order.
        let cells: Vec<(usize, usize)> = samples
            .iter()
            .enumerate()
            .flat_map(|(i, cols)| (0..cols.len()).map(move |j| (i, j)))
            .collect();
        let mut ks_rows = if tests.has("ks") {
            cells
                .par_iter()
                .map(|&(i, j)| {
                    let label = self.inputs.get(i).map_or("", |x| x.0.as_str());
                    let a = about(&[("input", json!(label)), ("coordinate", json!(j))]);
                    ks(
                        "ks-lattice-law",
                        a,
                        &samples[i][j],
                        |y| (self.cdf)(i, j, y),
                        |y| (self.cdf_left)(i, j, y),
                    )
                })
                .collect::<Result<Vec<_>>>()?
        } else {
            Vec::new()
        }
        .into_iter();
        for (i, ((label, _, centre), cols)) in self.inputs.iter().zip(samples).enumerate() {
            for (j, col) in cols.iter().enumerate() {
                let n = col.len() as u64;
                r.drawn += n;
                if let Some(o) = ks_rows.next() {
                    r.outcomes.push(o);
                }
                if self.chi_squares(tests) {
                    let c = centre.get(j).copied().unwrap_or(0.0);
                    let a = about(&[("input", json!(label)), ("coordinate", json!(j))]);
                    r.outcomes.push(self.binned_chi_square(a, i, j, c, col)?);
                }
                if tests.has("tails") {
                    let c = centre.get(j).copied().unwrap_or(0.0);
                    for t in TAILS {
                        let hi = c + t * self.scale;
                        let lo = c - t * self.scale;
                        let above = col.iter().filter(|&&y| y > hi).count() as u64;
                        let below = col.iter().filter(|&&y| y <= lo).count() as u64;
                        let a = about(&[
                            ("input", json!(label)),
                            ("coordinate", json!(j)),
                            ("threshold", json!(format!("> centre + {t}b"))),
                        ]);
                        r.outcomes.push(binomial(
                            "tail-binomial",
                            a,
                            above,
                            n,
                            1.0 - (self.cdf)(i, j, hi),
                        )?);
                        let a = about(&[
                            ("input", json!(label)),
                            ("coordinate", json!(j)),
                            ("threshold", json!(format!("<= centre - {t}b"))),
                        ]);
                        r.outcomes.push(binomial(
                            "tail-binomial",
                            a,
                            below,
                            n,
                            (self.cdf)(i, j, lo),
                        )?);
                    }
                }
                if j < 2 {
                    r.panels.push(cdf_panel(
                        format!("input {label}, coordinate {j}"),
                        col,
                        |y| (self.cdf)(i, j, y),
                    ));
                }
            }
        }
        if self.epsilon_count(tests) == 1
            && let (Some(claimed), [x, y, ..], [sx, sy, ..]) =
                (self.epsilon, self.inputs.as_slice(), samples)
        {
            // E = {Y_0 > max(x_0, y_0), Y_1 <= min(x_1, y_1)}: for one-hot neighbours its
            // likelihood ratio is e^(2/b) = e^ε for the Laplace law.
            let t0 = x.2[0].max(y.2[0]);
            let t1 = x.2[1].min(y.2[1]);
            let count = |cols: &Vec<Vec<f64>>| {
                let n = cols[0].len() as u64;
                let e = cols[0]
                    .iter()
                    .zip(&cols[1])
                    .filter(|&(&a, &b)| a > t0 && b <= t1)
                    .count() as u64;
                vec![n - e, e]
            };
            // Coordinates are independent: P(E | input i) = (1 − F_i0(t0))·F_i1(t1).
            let law = |i: usize| {
                let e = (1.0 - (self.cdf)(i, 0, t0)) * (self.cdf)(i, 1, t1);
                vec![1.0 - e, e]
            };
            let mut e = EpsilonEvidence::new(
                about(&[
                    ("scope", json!("vector")),
                    ("event", json!("Y0 > t0 and Y1 <= t1")),
                ]),
                claimed,
            );
            e.push(
                format!("{} / {}", x.0, y.0),
                (count(sx), count(sy)),
                (law(0), law(1)),
            );
            r.evidence.push(e);
        }
        Ok(r)
    }
}

/// Evaluation points for a CDF panel: quantiles of the sample.
pub(crate) fn cdf_panel(title: String, samples: &[f64], cdf: impl Fn(f64) -> f64) -> Panel {
    let mut sorted: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let points = 200usize.min(n);
    let mut xs = Vec::with_capacity(points);
    let mut empirical = Vec::with_capacity(points);
    for i in 0..points {
        // From the 0.5 % to the 99.5 % quantile.
        let q = 0.005 + 0.99 * i as f64 / (points.max(2) - 1) as f64;
        let idx = ((q * n as f64) as usize).min(n.saturating_sub(1));
        let x = sorted[idx];
        if xs.last().is_some_and(|&l: &f64| l >= x) {
            continue;
        }
        xs.push(x);
        empirical.push(sorted.partition_point(|&v| v <= x) as f64 / n as f64);
    }
    let expected = xs.iter().map(|&x| cdf(x)).collect();
    Panel {
        title,
        data: PanelData::Cdf {
            xs,
            expected,
            empirical,
            samples: n as u64,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rr_law() -> FiniteLaw {
        let p = 0.731_058_578_630_004_9;
        FiniteLaw::new(
            vec!["0".into(), "1".into()],
            vec![
                ("0".into(), json!(0), vec![p, 1.0 - p]),
                ("1".into(), json!(1), vec![1.0 - p, p]),
            ],
            Some((1.0, vec![(0, 1)])),
        )
    }

    #[test]
    fn finite_tests_accept_the_law_and_reject_a_shift() {
        let law = rr_law();
        let tests = TestSet(vec!["cells".into(), "chi-square".into(), "epsilon".into()]);
        assert_eq!(law.test_count(&tests), 2);
        let good = law
            .analyze(&[vec![73_100, 26_900], vec![26_900, 73_100]], &tests)
            .unwrap();
        assert_eq!(good.outcomes.len(), 2);
        assert!(good.outcomes.iter().all(|o| o.p_value > 0.01));
        assert_eq!(good.evidence.len(), 1);
        let bad = law
            .analyze(&[vec![75_000, 25_000], vec![26_900, 73_100]], &tests)
            .unwrap();
        assert!(bad.outcomes[0].p_value < 1e-10);
    }

    #[test]
    fn impossible_outputs_have_p_value_zero() {
        let o = binomial("t", Params::new(), 1, 10, 0.0).unwrap();
        assert_eq!(o.p_value, 0.0);
        assert_eq!(
            binomial("t", Params::new(), 0, 10, 0.0).unwrap().p_value,
            1.0
        );
    }

    #[test]
    fn neighbour_pairs_cover_every_input() {
        assert_eq!(neighbour_pairs(2), vec![(0, 1)]);
        assert_eq!(neighbour_pairs(3).len(), 3);
        assert_eq!(neighbour_pairs(10).len(), 45);
        assert_eq!(neighbour_pairs(20).len(), 20);
    }
}
