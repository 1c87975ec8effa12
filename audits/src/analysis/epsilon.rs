//! ε statements on a distinguishing event fixed before sampling.
//!
//! An ε lower bound is only as strong as the inputs and the event it compares. Every
//! ε statement of a run carries, beside the counts, the **exact law** of the same events
//! under both inputs of each pair. Before the counts are looked at, the statement fixes
//! one pair, one order of its inputs and one event S — a union of output cells — from the
//! law and the sample sizes alone:
//!
//! - the candidates are, for each pair and order, the Neyman–Pearson level sets of the
//!   likelihood ratio: the cells sorted by P[o|x]/P[o|x′] in decreasing order, and every
//!   prefix that ends where the ratio changes (its ratio is at most the largest cell ratio,
//!   its probability larger);
//! - the chosen candidate maximises the bound one would certify from the *expected*
//!   counts (the Clopper–Pearson bounds at the expected counts), which trades the event's
//!   likelihood ratio against how precisely its probability can be estimated.
//!
//! The statement then certifies ln(L(P[S|x]) / U(P[S|x′])) with the error split over only
//! the two one-sided bounds ([`fl_stats::epsilon_lower_bound_event`]); choosing from the
//! law and the (planned) sample sizes, never from the counts, keeps the guarantee.
//!
//! The same law gives the **realised ε** at the audited inputs: the largest log-ratio
//! ln(P[o|x]/P[o|x′]) over the statement's pairs, cells and orders. A mechanism whose
//! analysis is loose realises less than it claims; the report shows both, and the bound
//! is still judged against the claim.

use crate::error::{AuditError, Result};

/// Cells whose log-ratios differ by less than this are one level of the ratio.
const RATIO_TIE: f64 = 1e-12;

/// The event an ε statement certifies, chosen from the law before sampling.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PlannedEvent {
    /// Index of the pair in the statement.
    pub pair: usize,
    /// `true` when the numerator is the pair's second input (P[S|x′]/P[S|x]).
    pub swapped: bool,
    /// The output cells making up S.
    pub cells: Vec<usize>,
    /// ln(P[S|numerator] / P[S|denominator]) under the law (may be +∞).
    pub law_log_ratio: f64,
}

/// ln(a / b) for probabilities, +∞ when only b is 0.
pub(crate) fn log_ratio(a: f64, b: f64) -> f64 {
    if a <= 0.0 {
        f64::NEG_INFINITY
    } else if b <= 0.0 {
        f64::INFINITY
    } else {
        (a / b).ln()
    }
}

/// Both orders of a pair of inputs: (swapped, numerator, denominator, numerator's samples,
/// denominator's samples), the pair's first input on top first.
pub(crate) fn both_orders<'a, T: ?Sized>(
    a: &'a T,
    b: &'a T,
    na: u64,
    nb: u64,
) -> [(bool, &'a T, &'a T, u64, u64); 2] {
    [(false, a, b, na, nb), (true, b, a, nb, na)]
}

/// The realised ε of the law at the statement's pairs: the largest ln(P[o|x]/P[o|x′])
/// over pairs, cells and both orders (0 for identical laws, +∞ when an output is
/// possible under one input only).
pub(crate) fn realised_epsilon(laws: &[(Vec<f64>, Vec<f64>)]) -> f64 {
    let mut best = 0.0f64;
    for (a, b) in laws {
        for (&pa, &pb) in a.iter().zip(b) {
            best = best.max(log_ratio(pa, pb)).max(log_ratio(pb, pa));
        }
    }
    best
}

/// The bound the expected counts would certify for an event of probability `p_num` under
/// the numerator's `n_num` samples and `p_den` under the denominator's `n_den` samples,
/// each one-sided bound at error `error_each`.
fn expected_bound(p_num: f64, n_num: u64, p_den: f64, n_den: u64, error_each: f64) -> Result<f64> {
    let confidence = fl_stats::Confidence::new(1.0 - error_each)?;
    let expected = |p: f64, n: u64| ((p * n as f64).round() as u64).min(n);
    let lower = fl_stats::clopper_pearson_lower(expected(p_num, n_num), n_num, confidence)?;
    let upper = fl_stats::clopper_pearson_upper(expected(p_den, n_den), n_den, confidence)?;
    Ok(if lower > 0.0 && upper > 0.0 {
        (lower / upper).ln()
    } else {
        f64::NEG_INFINITY
    })
}

/// Chooses the statement's pair, order and event from the `laws` (one pair of laws over
/// the same cells per pair of neighbours) and the sample sizes `samples` (per pair: under
/// the first and the second input), for one-sided bounds at error `error_each` each.
/// `None` when no event has a positive expected bound (identical laws, or too few
/// samples to certify anything).
///
/// # Errors
/// Laws of different lengths, or sample sizes the Clopper–Pearson bounds reject.
pub(crate) fn plan_event(
    laws: &[(Vec<f64>, Vec<f64>)],
    samples: &[(u64, u64)],
    error_each: f64,
) -> Result<Option<PlannedEvent>> {
    let mut best: Option<(f64, PlannedEvent)> = None;
    for (pair, ((a, b), &(na, nb))) in laws.iter().zip(samples).enumerate() {
        if a.len() != b.len() {
            return Err(AuditError::Mechanism(format!(
                "the law of an epsilon statement has {} cells under one input and {} under \
                 the other",
                a.len(),
                b.len()
            )));
        }
        if na == 0 || nb == 0 {
            continue;
        }
        for (swapped, num, den, n_num, n_den) in both_orders(a, b, na, nb) {
            let mut cells: Vec<(f64, usize)> = num
                .iter()
                .zip(den)
                .enumerate()
                .filter(|&(_, (&p, _))| p > 0.0)
                .map(|(o, (&p, &q))| (log_ratio(p, q), o))
                .filter(|&(r, _)| r > 0.0)
                .collect();
            cells.sort_by(|x, y| y.0.total_cmp(&x.0));
            let (mut p_num, mut p_den) = (0.0, 0.0);
            for (i, &(ratio, o)) in cells.iter().enumerate() {
                p_num += num[o];
                p_den += den[o];
                let same_level = |next: f64| ratio - next <= RATIO_TIE * ratio.abs().max(1.0);
                if cells.get(i + 1).is_some_and(|&(next, _)| same_level(next)) {
                    continue;
                }
                let value = expected_bound(p_num, n_num, p_den, n_den, error_each)?;
                if value > 0.0 && best.as_ref().is_none_or(|(v, _)| value > *v) {
                    let mut chosen: Vec<usize> = cells[..=i].iter().map(|&(_, o)| o).collect();
                    chosen.sort_unstable();
                    best = Some((
                        value,
                        PlannedEvent {
                            pair,
                            swapped,
                            cells: chosen,
                            law_log_ratio: log_ratio(p_num, p_den),
                        },
                    ));
                }
            }
        }
    }
    Ok(best.map(|(_, e)| e))
}

/// The certified bound of a statement on its planned event: ln(L/U) with the error
/// 1 − `confidence` split over the two one-sided bounds; 0 without an event.
///
/// # Errors
/// Counts the Clopper–Pearson bounds reject (more than 2⁵³ samples).
pub(crate) fn certify(
    event: Option<&PlannedEvent>,
    pairs: &[(Vec<u64>, Vec<u64>)],
    confidence: fl_stats::Confidence,
) -> Result<f64> {
    let Some(e) = event else {
        return Ok(0.0);
    };
    let Some((a, b)) = pairs.get(e.pair) else {
        return Ok(0.0);
    };
    let (num, den) = if e.swapped { (b, a) } else { (a, b) };
    let hits = |c: &[u64]| e.cells.iter().filter_map(|&o| c.get(o)).sum::<u64>();
    let total = |c: &[u64]| c.iter().sum::<u64>();
    if total(num) == 0 || total(den) == 0 {
        // Nothing to certify on (a learned event's certifying half of a tiny run).
        return Ok(0.0);
    }
    Ok(fl_stats::epsilon_lower_bound_event(
        hits(num),
        total(num),
        hits(den),
        total(den),
        confidence,
    )?
    .epsilon)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rr(eps: f64) -> (Vec<f64>, Vec<f64>) {
        let p = 1.0 / (1.0 + (-eps).exp());
        (vec![p, 1.0 - p], vec![1.0 - p, p])
    }

    #[test]
    fn realised_epsilon_is_the_largest_cell_log_ratio() {
        assert!((realised_epsilon(&[rr(0.7)]) - 0.7).abs() < 1e-12);
        assert_eq!(realised_epsilon(&[(vec![0.5, 0.5], vec![0.5, 0.5])]), 0.0);
        assert_eq!(
            realised_epsilon(&[(vec![1.0, 0.0], vec![0.5, 0.5])]),
            f64::INFINITY
        );
    }

    #[test]
    fn the_planned_event_of_rr_is_the_kept_input() {
        let e = plan_event(&[rr(1.0)], &[(1_000_000, 1_000_000)], 1e-6)
            .unwrap()
            .unwrap();
        assert_eq!(e.cells.len(), 1);
        assert!((e.law_log_ratio - 1.0).abs() < 1e-12);
    }

    #[test]
    fn levels_merge_cells_of_equal_ratio() {
        // Two cells share the largest ratio (2): the level set holds both, which doubles
        // the event's probability at the same ratio.
        let x = vec![0.2, 0.2, 0.3, 0.3];
        let y = vec![0.1, 0.1, 0.4, 0.4];
        let e = plan_event(&[(x, y)], &[(100_000, 100_000)], 1e-6)
            .unwrap()
            .unwrap();
        assert_eq!(e.cells, vec![0, 1]);
        assert!(!e.swapped);
        assert!((e.law_log_ratio - 2f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn a_rare_extreme_cell_loses_to_a_frequent_one() {
        // Cell 0 has ratio 100 but probability 1e-7: at 10^4 samples it is never seen, so
        // the planner prefers cell 1 (ratio 3) — and certifies more with it.
        let x = vec![1e-7, 0.6 - 1e-7, 0.4];
        let y = vec![1e-9, 0.2 - 1e-9, 0.8];
        let e = plan_event(&[(x, y)], &[(10_000, 10_000)], 1e-3)
            .unwrap()
            .unwrap();
        assert_eq!(e.cells, vec![0, 1]);
    }

    #[test]
    fn identical_laws_plan_no_event_and_certify_zero() {
        let l = (vec![0.5, 0.5], vec![0.5, 0.5]);
        assert_eq!(plan_event(&[l], &[(1000, 1000)], 1e-3).unwrap(), None);
        let c = fl_stats::Confidence::new(0.99).unwrap();
        assert_eq!(certify(None, &[], c).unwrap(), 0.0);
    }

    #[test]
    fn certify_counts_the_planned_cells_in_the_planned_order() {
        let e = PlannedEvent {
            pair: 0,
            swapped: true,
            cells: vec![1],
            law_log_ratio: 1.0,
        };
        let c = fl_stats::Confidence::new(1.0 - 1e-6).unwrap();
        // Under the pair's second input cell 1 is frequent, under its first rare.
        let pairs = vec![(vec![7311, 2689], vec![2689, 7311])];
        let swapped = certify(Some(&e), &pairs, c).unwrap();
        assert!(swapped > 0.5 && swapped < 1.0, "{swapped}");
        let unswapped = PlannedEvent {
            swapped: false,
            ..e
        };
        assert_eq!(certify(Some(&unswapped), &pairs, c).unwrap(), 0.0);
        assert!(plan_event(&[(vec![0.5], vec![0.5, 0.5])], &[(1, 1)], 0.1).is_err());
    }
}
