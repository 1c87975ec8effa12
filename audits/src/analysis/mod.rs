//! From observations and exact laws to test outcomes. Every statistic is computed by
//! fl-stats; this module only decides which tests to run on which counts.

use serde_json::{Value, json};

pub(crate) mod context;
pub(crate) mod epsilon;
pub(crate) mod estimator;
pub(crate) mod learned;
pub(crate) mod olh;
pub(crate) mod reuse;
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
///
/// Its outputs are not kept: each coordinate is counted in the cells between fixed edges
/// ([`RealLaw::edges`]: the family's `cell_offsets` around the coordinate's centre, a
/// grid on the law's quantiles, joined by every threshold a test reads), so memory and
/// counts files stay bounded whatever the sample size, and every test is computed from
/// the cells: the Kolmogorov–Smirnov statistic at the edges (a lower bound on the
/// statistic over every point, so the continuous law's p-value stays an upper bound),
/// the tail and central-mass counts and the chi-square's bins exactly.
pub(crate) struct RealLaw {
    /// Output dimension D.
    pub dim: usize,
    /// Per input: label, the input as JSON, and the centre of each coordinate's law.
    pub inputs: Vec<(String, Value, Vec<f64>)>,
    /// Each coordinate's CDF (from the mechanism crate).
    pub cdf: Box<CdfFn>,
    /// The noise scale s (the central mass is within s of the centre, the tail thresholds
    /// are 3s and 6s from it).
    pub scale: f64,
    /// Claimed ε for the first two inputs (the box event of the module docs).
    pub epsilon: Option<f64>,
    /// Bin edges relative to each coordinate's centre (increasing) for the `chi-square`
    /// test of binned counts: the cells (−∞, c + e₀], (c + e₀, c + e₁], …, (c + e_last, ∞),
    /// both tails included, their probabilities from `cdf`; empty: no such test.
    pub chi_square_edges: Vec<f64>,
    /// The cells' edges relative to each coordinate's centre, chosen before sampling
    /// (a grid on the law's quantiles, at most [`MAX_REAL_CELLS`]): where the KS
    /// statistic is evaluated. Every tested threshold is added to them.
    pub cell_offsets: Vec<f64>,
    /// The probabilities to plan for, when not the central masses
    /// P(c − s < Y ≤ c + s) of every input and coordinate.
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
            .field("cell_offsets", &self.cell_offsets.len())
            .finish_non_exhaustive()
    }
}

/// Tail thresholds, in units of the scale.
const TAILS: [f64; 2] = [3.0, 6.0];

/// The half-width of the central mass, in units of the scale.
const CENTRAL: f64 = 1.0;

/// The most cells of a real coordinate's quantile grid.
pub(crate) const MAX_REAL_CELLS: usize = 1 << 12;

/// The error for counts that do not have the law's cells (a crafted counts file).
fn wrong_cells(found: usize, expected: usize) -> crate::error::AuditError {
    crate::error::AuditError::Mechanism(format!(
        "the real counts have {found} cells where the law has {expected}"
    ))
}

impl RealLaw {
    /// Tests this law produces.
    pub(crate) fn test_count(&self, tests: &TestSet) -> usize {
        let mut per_input = 0;
        if tests.has("ks") {
            per_input += self.dim;
        }
        if tests.has("tails") {
            // Both tails at each threshold, and the central mass.
            per_input += self.dim * (2 * TAILS.len() + 1);
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

    /// The centre of coordinate `j` of input `i`.
    fn centre(&self, i: usize, j: usize) -> f64 {
        self.inputs
            .get(i)
            .and_then(|x| x.2.get(j))
            .copied()
            .unwrap_or(0.0)
    }

    /// The thresholds of the tail and central-mass tests around centre `c`, as
    /// (c − t·s, c + t·s) for t = 1 (the central mass) and each tail threshold.
    fn thresholds(&self, c: f64) -> impl Iterator<Item = (f64, f64, f64)> + '_ {
        std::iter::once(CENTRAL)
            .chain(TAILS)
            .map(move |t| (t, c - t * self.scale, c + t * self.scale))
    }

    /// The edges of the cells of a coordinate centred at `c` (increasing, finite,
    /// distinct): the cell offsets, every tail and central-mass threshold and every
    /// chi-square edge, each exactly as its test computes it.
    pub(crate) fn edges_at(&self, c: f64) -> Vec<f64> {
        let mut edges: Vec<f64> = self.cell_offsets.iter().map(|&o| c + o).collect();
        for (_, lo, hi) in self.thresholds(c) {
            edges.push(lo);
            edges.push(hi);
        }
        edges.extend(self.chi_square_edges.iter().map(|&e| c + e));
        edges.retain(|e| e.is_finite());
        edges.sort_by(f64::total_cmp);
        edges.dedup();
        edges
    }

    /// The box event {Y₀ > t₀, Y₁ ≤ t₁} of the ε statement, (t₀, t₁), if it is made:
    /// t₀ = max(x₀, y₀), t₁ = min(x₁, y₁) for the first two inputs x and y.
    pub(crate) fn box_event(&self) -> Option<(f64, f64)> {
        match (self.epsilon, self.inputs.as_slice()) {
            (Some(_), [x, y, ..]) if self.dim >= 2 => {
                Some((x.2[0].max(y.2[0]), x.2[1].min(y.2[1])))
            }
            _ => None,
        }
    }

    /// The cells the outputs of input `i` are counted in.
    pub(crate) fn cell_edges(&self, i: usize) -> crate::source::RealCellEdges {
        let mut sets: Vec<(u64, Vec<f64>)> = Vec::new();
        let mut of = Vec::with_capacity(self.dim);
        for j in 0..self.dim {
            let c = self.centre(i, j);
            let key = c.to_bits();
            let at = match sets.iter().position(|(k, _)| *k == key) {
                Some(at) => at,
                None => {
                    sets.push((key, self.edges_at(c)));
                    sets.len() - 1
                }
            };
            of.push(at);
        }
        crate::source::RealCellEdges {
            sets: sets.into_iter().map(|(_, e)| e).collect(),
            of,
            in_box: self.box_event(),
        }
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

    /// The central masses P(c − s < Y ≤ c + s) of every input and coordinate, or the
    /// law's own `plan` (planning): the probability each `tails` run tests with a
    /// binomial test, whose 1 % relative error the planned sizes detect. For the Laplace
    /// law 1 − e⁻¹ of a scale b, whose complement e^(−s/b) moves by the same relative
    /// amount as the scale (d ln e^(−s/b) / d ln b = s/b = 1): a 1 % error in b, hence
    /// in ε = Δ/b. The tails at 3s and 6s are tested, not planned for (a 1 % relative
    /// error in a 3s tail is a 0.33 % error in the scale, and would ask for 20 times the
    /// samples).
    pub(crate) fn plan_probabilities(&self) -> Vec<f64> {
        if let Some(plan) = &self.plan {
            return plan.clone();
        }
        let mut out = Vec::new();
        for (i, (_, _, c)) in self.inputs.iter().enumerate() {
            for (j, &cj) in c.iter().enumerate() {
                let (_, lo, hi) = self.thresholds(cj).next().unwrap_or((
                    CENTRAL,
                    cj - self.scale,
                    cj + self.scale,
                ));
                out.push((self.cdf)(i, j, hi) - (self.cdf)(i, j, lo));
            }
        }
        out.retain(|&p| p > 0.0 && p < 1.0);
        out
    }

    /// Runs the requested tests on the cell counts of every input.
    pub(crate) fn analyze(
        &self,
        counts: &[crate::tally::RealCells],
        tests: &TestSet,
    ) -> Result<PointResult> {
        let mut r = PointResult::default();
        for (i, ((label, _, centre), data)) in self.inputs.iter().zip(counts).enumerate() {
            if data.cells.len() != self.dim {
                return Err(crate::error::AuditError::Mechanism(format!(
                    "the real counts have {} coordinates, the law has {}",
                    data.cells.len(),
                    self.dim
                )));
            }
            for (j, cells) in data.cells.iter().enumerate() {
                let c = centre.get(j).copied().unwrap_or(0.0);
                let edges = self.edges_at(c);
                if cells.len() != edges.len() + 1 {
                    return Err(wrong_cells(cells.len(), edges.len() + 1));
                }
                // cum[k] = #(Y ≤ edges[k]).
                let mut cum = Vec::with_capacity(edges.len());
                let mut acc = 0u64;
                let overflow = || {
                    crate::error::AuditError::Mechanism(
                        "the real counts add up to more than 2^64 outputs".into(),
                    )
                };
                for &k in &cells[..edges.len()] {
                    acc = acc.checked_add(k).ok_or_else(overflow)?;
                    cum.push(acc);
                }
                let n = acc.checked_add(cells[edges.len()]).ok_or_else(overflow)?;
                r.drawn += n;
                let at = |y: f64| -> Result<usize> {
                    edges
                        .binary_search_by(|e| e.total_cmp(&y))
                        .map_err(|_| wrong_cells(cells.len(), edges.len() + 1))
                };
                // #(Y ≤ y) for an edge y.
                let below = |y: f64| -> Result<u64> { Ok(cum[at(y)?]) };
                let f: Vec<f64> = edges.iter().map(|&e| (self.cdf)(i, j, e)).collect();
                if tests.has("ks") {
                    let a = about(&[("input", json!(label)), ("coordinate", json!(j))]);
                    r.outcomes.push(ks_cells("ks-lattice-law", a, &cum, n, &f)?);
                }
                if self.chi_squares(tests) {
                    let a = about(&[("input", json!(label)), ("coordinate", json!(j))]);
                    let bins: Vec<f64> = self.chi_square_edges.iter().map(|&e| c + e).collect();
                    let mut observed = Vec::with_capacity(bins.len() + 1);
                    let mut last = 0;
                    for &e in &bins {
                        let k = below(e)?;
                        observed.push(k - last);
                        last = k;
                    }
                    observed.push(n - last);
                    let mut cdf = Vec::with_capacity(bins.len() + 2);
                    cdf.push(0.0);
                    cdf.extend(bins.iter().map(|&e| (self.cdf)(i, j, e)));
                    cdf.push(1.0);
                    let law: Vec<f64> = cdf.windows(2).map(|w| (w[1] - w[0]).max(0.0)).collect();
                    r.outcomes
                        .push(chi_square("chi-square", a, &observed, &law)?);
                }
                if tests.has("tails") {
                    for (t, lo, hi) in self.thresholds(c) {
                        let (k_lo, k_hi) = (below(lo)?, below(hi)?);
                        let (f_lo, f_hi) = ((self.cdf)(i, j, lo), (self.cdf)(i, j, hi));
                        if t == CENTRAL {
                            let a = about(&[
                                ("input", json!(label)),
                                ("coordinate", json!(j)),
                                (
                                    "threshold",
                                    json!(format!("> centre - {t}b and <= centre + {t}b")),
                                ),
                            ]);
                            r.outcomes.push(binomial(
                                "central-binomial",
                                a,
                                k_hi - k_lo,
                                n,
                                (f_hi - f_lo).clamp(0.0, 1.0),
                            )?);
                            continue;
                        }
                        let a = about(&[
                            ("input", json!(label)),
                            ("coordinate", json!(j)),
                            ("threshold", json!(format!("> centre + {t}b"))),
                        ]);
                        r.outcomes
                            .push(binomial("tail-binomial", a, n - k_hi, n, 1.0 - f_hi)?);
                        let a = about(&[
                            ("input", json!(label)),
                            ("coordinate", json!(j)),
                            ("threshold", json!(format!("<= centre - {t}b"))),
                        ]);
                        r.outcomes
                            .push(binomial("tail-binomial", a, k_lo, n, f_lo)?);
                    }
                }
                if j < 2 {
                    r.panels.push(cdf_panel(
                        format!("input {label}, coordinate {j}"),
                        &edges,
                        &cum,
                        n,
                        &f,
                    ));
                }
            }
        }
        if self.epsilon_count(tests) == 1
            && let (Some(claimed), Some((t0, t1)), [x, y, ..], [sx, sy, ..]) = (
                self.epsilon,
                self.box_event(),
                self.inputs.as_slice(),
                counts,
            )
        {
            // E = {Y_0 > max(x_0, y_0), Y_1 <= min(x_1, y_1)}: for one-hot neighbours its
            // likelihood ratio is e^(2/b) = e^ε for the Laplace law.
            let count = |d: &crate::tally::RealCells| {
                let n: u64 = d.cells.first().map_or(0, |c| c.iter().sum());
                vec![n.saturating_sub(d.in_box), d.in_box.min(n)]
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

/// The two-sided Kolmogorov–Smirnov test of `n` outputs counted in cells, from the
/// counts `cum[k]` = #(Y ≤ eₖ) and the law's F(eₖ) = `f[k]` at the cells' edges: D is
/// the largest |Fₙ(eₖ) − F(eₖ)|, the supremum of the exact statistic restricted to the
/// edges, so it is at most the exact D and the continuous law's p-value (fl-stats'
/// `kolmogorov_smirnov_sf`, itself an upper bound for a law with atoms: Noether 1963)
/// remains an upper bound on the exact p-value: the test is valid (conservative by at
/// most the mass of a cell). No output: p-value 1.
pub(crate) fn ks_cells(
    test: &str,
    about: Params,
    cum: &[u64],
    n: u64,
    f: &[f64],
) -> Result<Outcome> {
    if n == 0 {
        return Ok(Outcome {
            test: test.into(),
            about,
            samples: 0,
            statistic: 0.0,
            p_value: 1.0,
        });
    }
    let nf = n as f64;
    let mut d = 0.0f64;
    for (&k, &fk) in cum.iter().zip(f) {
        if !(0.0..=1.0).contains(&fk) {
            return Err(crate::error::AuditError::Mechanism(format!(
                "the law's CDF is {fk} at a cell edge, outside [0, 1]"
            )));
        }
        d = d.max((k as f64 / nf - fk).abs());
    }
    Ok(Outcome {
        test: test.into(),
        about,
        samples: n,
        statistic: d,
        p_value: fl_stats::kolmogorov_smirnov_sf(n, d)?,
    })
}

/// A CDF panel from cell counts: the empirical and the expected CDF at the edges nearest
/// the empirical 0.5 % to 99.5 % quantiles (at most 200 points).
pub(crate) fn cdf_panel(title: String, edges: &[f64], cum: &[u64], n: u64, f: &[f64]) -> Panel {
    let points = 200usize;
    let mut xs = Vec::with_capacity(points);
    let mut empirical = Vec::with_capacity(points);
    let mut expected = Vec::with_capacity(points);
    if n > 0 {
        for i in 0..points {
            let q = 0.005 + 0.99 * i as f64 / (points - 1) as f64;
            let k = cum.partition_point(|&c| (c as f64) < q * n as f64);
            let (Some(&x), Some(&c), Some(&fx)) = (edges.get(k), cum.get(k), f.get(k)) else {
                continue;
            };
            if xs.last().is_some_and(|&l: &f64| l >= x) {
                continue;
            }
            xs.push(x);
            empirical.push(c as f64 / n as f64);
            expected.push(fx);
        }
    }
    Panel {
        title,
        data: PanelData::Cdf {
            xs,
            expected,
            empirical,
            samples: n,
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

    /// Laplace(0, b) draws by inversion (test data only; the audit never samples this way).
    fn laplace_draws(n: usize, b: f64, shift: f64, seed: u64) -> Vec<f64> {
        use rand::{Rng, SeedableRng, rngs::ChaCha20Rng};
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        (0..n)
            .map(|_| {
                let u = ((rng.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64 - 0.5;
                shift - b * u.signum() * (1.0 - 2.0 * u.abs()).ln()
            })
            .collect()
    }

    fn laplace_cdf(y: f64) -> f64 {
        if y < 0.0 {
            0.5 * y.exp()
        } else {
            1.0 - 0.5 * (-y).exp()
        }
    }

    /// #(Y ≤ e) for each edge e (increasing).
    fn cumulative(samples: &[f64], edges: &[f64]) -> Vec<u64> {
        let mut cells = vec![0u64; edges.len() + 1];
        for &y in samples {
            cells[edges.partition_point(|&e| e < y)] += 1;
        }
        cells[..edges.len()]
            .iter()
            .scan(0, |acc, &k| {
                *acc += k;
                Some(*acc)
            })
            .collect()
    }

    fn ks_on_cells(samples: &[f64], edges: &[f64], cdf: impl Fn(f64) -> f64) -> Outcome {
        let f: Vec<f64> = edges.iter().map(|&e| cdf(e)).collect();
        let cum = cumulative(samples, edges);
        ks_cells("ks", Params::new(), &cum, samples.len() as u64, &f).unwrap()
    }

    /// The KS test on cell counts is the exact statistic restricted to the edges: never
    /// above fl-stats' exact statistic on the same outputs (so its p-value is never below
    /// the exact one, and the test keeps its level), equal to it when every value the
    /// outputs take is an edge (a lattice law, as the discrete Gaussian's cells are). Fixed
    /// seeds.
    #[test]
    fn ks_on_cells_is_bounded_by_the_exact_statistic() {
        let samples = laplace_draws(20_000, 1.0, 0.0, 7);
        let exact = fl_stats::ks_one_sample(&samples, laplace_cdf).unwrap();
        for k in [16usize, 4096] {
            let edges: Vec<f64> = (1..k)
                .map(|i| {
                    let q = i as f64 / k as f64;
                    if q < 0.5 {
                        (2.0 * q).ln()
                    } else {
                        -(2.0 * (1.0 - q)).ln()
                    }
                })
                .collect();
            let cells = ks_on_cells(&samples, &edges, laplace_cdf);
            assert!(cells.statistic <= exact.statistic + 1e-12, "{k} cells");
            assert!(cells.p_value >= exact.p_value - 1e-12, "{k} cells");
            assert!(cells.p_value > 1e-3, "{k} cells: {}", cells.p_value);
        }
        // A lattice law (integers): with an edge between every two integers the two
        // statistics are the same.
        let lattice: Vec<f64> = samples.iter().map(|y| (2.0 * y).round()).collect();
        let cdf = |y: f64| laplace_cdf((y.floor() + 0.5) / 2.0);
        let left = |y: f64| laplace_cdf((y.ceil() - 0.5) / 2.0);
        let exact = fl_stats::ks_one_sample_with_atoms(&lattice, cdf, left).unwrap();
        let (lo, hi) = lattice
            .iter()
            .fold((0.0f64, 0.0f64), |(l, h), &y| (l.min(y), h.max(y)));
        let edges: Vec<f64> = (lo as i64 - 1..=hi as i64)
            .map(|z| z as f64 + 0.5)
            .collect();
        let cells = ks_on_cells(&lattice, &edges, cdf);
        assert!((cells.statistic - exact.statistic).abs() < 1e-12);
    }

    /// Negative controls: on 4096 quantile cells, outputs with a 5 % larger scale or a
    /// centre shifted by 0.05 b are rejected at any level a run uses (p < 10⁻⁹). Fixed
    /// seeds.
    #[test]
    fn ks_on_cells_rejects_a_wrong_scale_or_centre() {
        let edges: Vec<f64> = (1..4096)
            .map(|i| {
                let q = f64::from(i) / 4096.0;
                if q < 0.5 {
                    (2.0 * q).ln()
                } else {
                    -(2.0 * (1.0 - q)).ln()
                }
            })
            .collect();
        let good = ks_on_cells(&laplace_draws(200_000, 1.0, 0.0, 8), &edges, laplace_cdf);
        assert!(good.p_value > 1e-3, "{}", good.p_value);
        for (b, shift) in [(1.05, 0.0), (1.0, 0.05)] {
            let bad = ks_on_cells(&laplace_draws(200_000, b, shift, 8), &edges, laplace_cdf);
            assert!(
                bad.p_value < 1e-9,
                "b = {b}, shift = {shift}: {}",
                bad.p_value
            );
        }
    }

    #[test]
    fn neighbour_pairs_cover_every_input() {
        assert_eq!(neighbour_pairs(2), vec![(0, 1)]);
        assert_eq!(neighbour_pairs(3).len(), 3);
        assert_eq!(neighbour_pairs(10).len(), 45);
        assert_eq!(neighbour_pairs(20).len(), 20);
    }
}
