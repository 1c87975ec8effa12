//! OLH audited through reported hashes: each report carries its bucket and the bucket
//! H(v) its hash function gives every value v, so the audit does not need to know the
//! mechanism's hash family — only that it is pairwise independent into g buckets, the
//! assumption OLH's analysis (and its estimator's q = 1/g) rests on.
//!
//! Under that assumption, for a user holding x (GRR_g around H(x): keep probability p*,
//! any other bucket q*, from fl-ldp's k-ary RR with k = g):
//!
//! - the report supports x (bucket = H(x)) with probability p*, any other value v with
//!   probability 1/g (`support-binomial`);
//! - H(x) is uniform over the g buckets (`hash-uniformity`), and the offset
//!   (bucket − H(x)) mod g is 0 with probability p* and each other offset with q*
//!   (`bucket-chi-square`);
//! - for another value y, the events A = {bucket = H(x), H(x) ≠ H(y)} and
//!   B = {bucket = H(y), H(x) ≠ H(y)} have probabilities (1 − 1/g)·p* and (1 − 1/g)·q*,
//!   and exchange them for a user holding y: their ratio is p*/q* = e^ε, so the ε
//!   statement compares A (or B) under x and under y.

use serde_json::{Value, json};

use super::{
    EpsilonEvidence, PointResult, TestSet, about, binomial, check_shape, chi_square,
    neighbour_pairs,
};
use crate::{
    error::Result,
    report::{Panel, PanelData},
};

/// The law of hashed OLH reports at one grid point.
///
/// Each input's draws are counts laid out as `[support counts (k) | H(x) histogram (g) |
/// offset (bucket − H(x)) mod g histogram (g) | for each value y: A_xy, B_xy (2k)]`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OlhHashedAudit {
    /// k.
    pub values: usize,
    /// g.
    pub buckets: usize,
    /// P(bucket = H(x)).
    pub keep: f64,
    /// P(bucket = a given other bucket).
    pub other: f64,
    /// Per input: label and value as JSON (input number i holds value i).
    pub inputs: Vec<(String, Value)>,
    /// The claimed ε.
    pub epsilon: Option<f64>,
}

impl OlhHashedAudit {
    /// Length of one input's counts.
    pub(crate) fn layout_len(&self) -> usize {
        3 * self.values + 2 * self.buckets
    }

    /// Tests this law produces.
    pub(crate) fn test_count(&self, tests: &TestSet) -> usize {
        let per_input =
            if tests.has("support") { self.values } else { 0 } + 2 * usize::from(tests.has("law"));
        per_input * self.inputs.len()
    }

    /// ε statements this law produces.
    pub(crate) fn epsilon_count(&self, tests: &TestSet) -> usize {
        usize::from(tests.has("epsilon") && self.epsilon.is_some() && self.inputs.len() >= 2)
    }

    /// The support probabilities p* and 1/g.
    pub(crate) fn plan_probabilities(&self) -> Vec<f64> {
        vec![self.keep, 1.0 / self.buckets as f64]
    }

    /// The three cells (neither, A, B) of the pair (x, y) under x, with its law.
    fn pair_law(&self) -> (Vec<f64>, Vec<f64>) {
        let apart = 1.0 - 1.0 / self.buckets as f64;
        let (a, b) = (apart * self.keep, apart * self.other);
        (vec![1.0 - a - b, a, b], vec![1.0 - a - b, b, a])
    }

    /// Runs the requested tests.
    pub(crate) fn analyze(&self, counts: &[Vec<u64>], tests: &TestSet) -> Result<PointResult> {
        let mut r = PointResult::default();
        let (k, g) = (self.values, self.buckets);
        for (x, ((label, _), c)) in self.inputs.iter().zip(counts).enumerate() {
            check_shape(c.len(), self.layout_len())?;
            let (support, rest) = c.split_at(k);
            let (hashes, rest) = rest.split_at(g);
            let offsets = &rest[..g];
            let n: u64 = hashes.iter().sum();
            r.drawn += n;
            let expected: Vec<f64> = (0..k)
                .map(|v| if v == x { self.keep } else { 1.0 / g as f64 })
                .collect();
            if tests.has("support") {
                for (v, (&s, &p)) in support.iter().zip(&expected).enumerate() {
                    let a = about(&[("input", json!(label)), ("value", json!(v))]);
                    r.outcomes.push(binomial("support-binomial", a, s, n, p)?);
                }
            }
            if tests.has("law") {
                let a = about(&[("input", json!(label))]);
                r.outcomes.push(chi_square(
                    "hash-uniformity",
                    a.clone(),
                    hashes,
                    &vec![1.0 / g as f64; g],
                )?);
                let mut law = vec![self.other; g];
                law[0] = self.keep;
                r.outcomes
                    .push(chi_square("bucket-chi-square", a, offsets, &law)?);
            }
            r.panels.push(Panel {
                title: format!("input {label}: P(report supports value)"),
                data: PanelData::Bars {
                    labels: (0..k).map(|v| v.to_string()).collect(),
                    expected,
                    observed: support
                        .iter()
                        .map(|&s| s as f64 / n.max(1) as f64)
                        .collect(),
                    samples: n,
                    standard_errors: None,
                },
            });
        }
        if self.epsilon_count(tests) == 1
            && let Some(claimed) = self.epsilon
        {
            // Counts of (neither, A, B) for the pair (x, y) under x's reports.
            let cells = |x: usize, y: usize, swap: bool| -> Option<Vec<u64>> {
                let c = counts.get(x)?;
                let n: u64 = c.get(k..k + g)?.iter().sum();
                let slot = k + 2 * g + 2 * y;
                let (a, b) = (*c.get(slot)?, *c.get(slot + 1)?);
                let (a, b) = if swap { (b, a) } else { (a, b) };
                Some(vec![n.saturating_sub(a + b), a, b])
            };
            let (under_x, under_y) = self.pair_law();
            let mut e = EpsilonEvidence::new(about(&[("scope", json!("report"))]), claimed);
            for (x, y) in neighbour_pairs(self.inputs.len()) {
                // Under y the same events are y's B and A (H(x) ≠ H(y) either way).
                if let (Some(cx), Some(cy), Some((lx, _)), Some((ly, _))) = (
                    cells(x, y, false),
                    cells(y, x, true),
                    self.inputs.get(x),
                    self.inputs.get(y),
                ) {
                    e.push(
                        format!("{lx} / {ly}"),
                        (cx, cy),
                        (under_x.clone(), under_y.clone()),
                    );
                }
            }
            r.evidence.push(e);
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_cells_exchange_between_the_inputs() {
        let a = OlhHashedAudit {
            values: 2,
            buckets: 3,
            keep: 0.5,
            other: 0.25,
            inputs: vec![("0".into(), json!(0)), ("1".into(), json!(1))],
            epsilon: Some(2f64.ln()),
        };
        let (x, y) = a.pair_law();
        assert!((x[1] / x[2] - 2.0).abs() < 1e-12);
        assert_eq!((x[1], x[2]), (y[2], y[1]));
        assert_eq!(a.layout_len(), 12);
        let tests = TestSet(vec!["support".into(), "law".into(), "epsilon".into()]);
        assert_eq!(a.test_count(&tests), 8);
        // Input 0 (value 0): 100 reports; A_01 = 30, B_01 = 15. Input 1: A_10 = 28,
        // B_10 = 16. Under input 1 the pair's A is its B: [.., 16, 28].
        let mut c0 = vec![0u64; 12];
        let mut c1 = vec![0u64; 12];
        // H(own value) = 0 and offset 0 for every report.
        c0[2] = 100;
        c1[2] = 100;
        c0[5] = 100;
        c1[5] = 100;
        c0[8 + 2] = 30;
        c0[8 + 3] = 15;
        c1[8] = 28;
        c1[8 + 1] = 16;
        let r = a.analyze(&[c0, c1], &tests).unwrap();
        let e = &r.evidence[0];
        assert_eq!(e.pairs[0], (vec![55, 30, 15], vec![56, 16, 28]));
    }
}
