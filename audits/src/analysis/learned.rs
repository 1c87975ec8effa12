//! The learned distinguishing event, in the manner of DP-Sniper and DP-Auditorium: an ε
//! statement whose event is searched over the **whole output**, not fixed from the law.
//!
//! The law-planned statements ([`super::epsilon`]) pick the event that the *claimed* law
//! makes most distinguishing. A mechanism whose outputs depart from that law where every
//! tested marginal is exact — two coordinates sharing one uniform, the sign and the MagRR
//! coin drawn from one number — can make some output impossible under one input and likely
//! under the other, an infinite privacy loss that no planned event looks at. The learned
//! statement looks for it in the data:
//!
//! 1. every output is mapped to a **cell** of a finite output space (the whole vector of up
//!    to 16 bits, a class, (sign, MagRR bit, ν) of a SignDS report, the bins of a real
//!    vector…), and its count goes to one of two halves by its position in the stream
//!    (blocks of [`crate::tally::EVENT_BLOCK`] outputs, alternately): the value never
//!    decides the half;
//! 2. on the **fitting half** only, for every audited pair of inputs and both orders, the
//!    cells are ranked by two scores — the empirical log-likelihood ratio (counts + ½) and a
//!    logistic regression on the cells' features and their pairwise products (where the
//!    output space is small enough) — and every prefix of each ranking is a candidate event
//!    S; the one with the largest lower bound of ln(P[S|x]/P[S|x′]) on the fitting half
//!    (Wilson score bounds) is chosen;
//! 3. on the **certifying half**, which the choice never saw, ln(CP_lower(P[S|x]) /
//!    CP_upper(P[S|x′])) is certified with the statement's confidence, exactly like a
//!    planned event (fl-stats' `epsilon_lower_bound_event`).
//!
//! The choice depends on the fitting half only, so the certified bound keeps its
//! confidence whatever was searched. An event of probability 0 under one input gives
//! CP_upper ≈ ln(1/α)/n there and a bound far above any claim. Both halves are plain count
//! tables: they add up over chunks (and shards), and the fit runs after they are merged.

use crate::error::{AuditError, Result};

use super::epsilon::{PlannedEvent, both_orders};

/// Where a point's learned event is searched.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LearnedSpec {
    /// Cells of the output space (the observers' event cells).
    pub cells: usize,
    /// What a cell is, for the report.
    pub cell_meaning: String,
    /// Per cell, its features for the logistic regression (all cells the same length;
    /// empty: the empirical ratio only).
    pub features: Vec<Vec<f64>>,
    /// The ε the mechanism claims for its whole output between the pairs below.
    pub claimed: f64,
    /// Pairs of input indices that are neighbours.
    pub pairs: Vec<(usize, usize)>,
    /// Per input, the exact law over the cells, when the audit can compute it (for the
    /// realised ε and the law's log-ratio of the chosen event).
    pub laws: Option<Vec<Vec<f64>>>,
}

/// How the event was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    /// Cells ranked by their empirical log-likelihood ratio on the fitting half.
    EmpiricalRatio,
    /// Cells ranked by a logistic regression on their features and pairwise products.
    Logistic,
}

impl Method {
    /// The method's name in the report.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::EmpiricalRatio => "empirical likelihood ratio",
            Self::Logistic => "logistic regression on cell features and pairwise products",
        }
    }
}

/// The chosen event and how it was found.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LearnedEvent {
    /// The pair, order and cells (the law's log-ratio when the law is known, else NaN).
    pub event: PlannedEvent,
    /// The ranking that produced it.
    pub method: Method,
    /// The bound on the fitting half (what the search optimised; not certified).
    pub fit_bound: f64,
}

/// The z of a one-sided bound at error `error`.
fn z_for(error: f64) -> f64 {
    // P(Z > z) = error by bisection on fl-stats' normal tail.
    let (mut lo, mut hi) = (0.0f64, 40.0f64);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if fl_stats::normal_sf(mid).unwrap_or(0.0) > error {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// Wilson score bounds of k successes in n: (lower, upper) at one-sided z.
fn wilson(k: u64, n: u64, z: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let nf = n as f64;
    let p = k as f64 / nf;
    let z2 = z * z;
    let centre = p + z2 / (2.0 * nf);
    let spread = z * (p * (1.0 - p) / nf + z2 / (4.0 * nf * nf)).sqrt();
    let d = 1.0 + z2 / nf;
    (
        ((centre - spread) / d).max(0.0),
        ((centre + spread) / d).min(1.0),
    )
}

/// The fitting half's bound of the event with hits `(a, b)` out of `(na, nb)`.
fn fit_value(a: u64, na: u64, b: u64, nb: u64, z: f64) -> f64 {
    let lower = wilson(a, na, z).0;
    let upper = wilson(b, nb, z).1;
    if lower > 0.0 && upper > 0.0 {
        (lower / upper).ln()
    } else {
        f64::NEG_INFINITY
    }
}

/// The largest number of Hessian entries × cells the logistic regression computes per
/// iteration (beyond it, only the empirical ratio ranks the cells).
const LOGISTIC_BUDGET: usize = 50_000_000;

/// Ridge penalty of the logistic regression (per unit of total weight).
const RIDGE: f64 = 1e-6;

/// The features and their pairwise products, with an intercept.
fn expand(base: &[f64]) -> Vec<f64> {
    let mut x = Vec::with_capacity(1 + base.len() * (base.len() + 1) / 2);
    x.push(1.0);
    x.extend_from_slice(base);
    for i in 0..base.len() {
        for j in i + 1..base.len() {
            x.push(base[i] * base[j]);
        }
    }
    x
}

/// Solves `a·x = b` for a symmetric positive definite `a` (n × n, row-major) by Cholesky;
/// `None` when `a` is not positive definite.
fn cholesky_solve(a: &[f64], b: &[f64], n: usize) -> Option<Vec<f64>> {
    let mut l = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let mut s = a[i * n + j];
            for k in 0..j {
                s -= l[i * n + k] * l[j * n + k];
            }
            if i == j {
                if s <= 0.0 {
                    return None;
                }
                l[i * n + i] = s.sqrt();
            } else {
                l[i * n + j] = s / l[j * n + j];
            }
        }
    }
    let mut y = vec![0.0; n];
    for i in 0..n {
        let s: f64 = (0..i).map(|k| l[i * n + k] * y[k]).sum();
        y[i] = (b[i] - s) / l[i * n + i];
    }
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        let s: f64 = (i + 1..n).map(|k| l[k * n + i] * x[k]).sum();
        x[i] = (y[i] - s) / l[i * n + i];
    }
    Some(x)
}

/// Log-odds scores of the cells for "drawn under the numerator input", from a logistic
/// regression weighted by the fitting half's counts (each input's counts normalised to
/// total weight 1, so the intercept absorbs the sample sizes); `None` when the features
/// are missing or too many for the budget.
fn logistic_scores(features: &[Vec<f64>], num: &[u64], den: &[u64]) -> Option<Vec<f64>> {
    let x: Vec<Vec<f64>> = features.iter().map(|f| expand(f)).collect();
    let width = x.first().map_or(0, Vec::len);
    if width <= 1 || x.len().saturating_mul(width * width) > LOGISTIC_BUDGET {
        return None;
    }
    let (tn, td) = (
        num.iter().sum::<u64>().max(1) as f64,
        den.iter().sum::<u64>().max(1) as f64,
    );
    let mut beta = vec![0.0; width];
    for _ in 0..30 {
        let mut grad = vec![0.0; width];
        let mut hess = vec![0.0; width * width];
        for (c, xc) in x.iter().enumerate() {
            let (wp, wn) = (num[c] as f64 / tn, den[c] as f64 / td);
            let w = wp + wn;
            if w == 0.0 {
                continue;
            }
            let eta: f64 = xc.iter().zip(&beta).map(|(a, b)| a * b).sum();
            let p = 1.0 / (1.0 + (-eta).exp());
            let r = wp - w * p;
            let h = w * p * (1.0 - p);
            for i in 0..width {
                grad[i] += r * xc[i];
                for j in 0..=i {
                    hess[i * width + j] += h * xc[i] * xc[j];
                }
            }
        }
        for i in 0..width {
            grad[i] -= RIDGE * beta[i];
            hess[i * width + i] += RIDGE;
            for j in 0..i {
                hess[j * width + i] = hess[i * width + j];
            }
        }
        let step = cholesky_solve(&hess, &grad, width)?;
        let size: f64 = step.iter().map(|s| s.abs()).fold(0.0, f64::max);
        for (b, s) in beta.iter_mut().zip(&step) {
            *b += s;
        }
        if !size.is_finite() {
            return None;
        }
        if size < 1e-9 {
            break;
        }
    }
    Some(
        x.iter()
            .map(|xc| xc.iter().zip(&beta).map(|(a, b)| a * b).sum())
            .collect(),
    )
}

/// Searches the event on the fitting half: `fit` holds, per pair of `spec.pairs`, the
/// fitting-half counts per cell under its first and its second input; `error_each` is the
/// error of each one-sided bound of the statement. `None` when no candidate has a positive
/// bound on the fitting half.
///
/// # Errors
/// Counts that do not have the spec's cells.
pub(crate) fn fit(
    spec: &LearnedSpec,
    fit: &[(Vec<u64>, Vec<u64>)],
    error_each: f64,
) -> Result<Option<LearnedEvent>> {
    let z = z_for(error_each);
    let mut best: Option<LearnedEvent> = None;
    for (pair, (a, b)) in fit.iter().enumerate() {
        if a.len() != spec.cells || b.len() != spec.cells {
            return Err(AuditError::Mechanism(format!(
                "the learned event's counts have {} and {} cells, its space {}",
                a.len(),
                b.len(),
                spec.cells
            )));
        }
        let (na, nb) = (a.iter().sum::<u64>(), b.iter().sum::<u64>());
        if na == 0 || nb == 0 {
            continue;
        }
        for (swapped, num, den, n_num, n_den) in both_orders(a, b, na, nb) {
            // Cells seen in the fitting half under either input.
            let seen: Vec<usize> = (0..spec.cells)
                .filter(|&c| num[c] > 0 || den[c] > 0)
                .collect();
            let half = 0.5 * seen.len() as f64;
            let empirical: Vec<f64> = (0..spec.cells)
                .map(|c| {
                    ((num[c] as f64 + 0.5) / (n_num as f64 + half)).ln()
                        - ((den[c] as f64 + 0.5) / (n_den as f64 + half)).ln()
                })
                .collect();
            let mut rankings = vec![(Method::EmpiricalRatio, empirical)];
            if !spec.features.is_empty()
                && let Some(s) = logistic_scores(&spec.features, num, den)
            {
                rankings.push((Method::Logistic, s));
            }
            for (method, score) in rankings {
                let mut order = seen.clone();
                order.sort_by(|&x, &y| score[y].total_cmp(&score[x]).then(x.cmp(&y)));
                let (mut hits_num, mut hits_den) = (0u64, 0u64);
                for (i, &c) in order.iter().enumerate() {
                    hits_num += num[c];
                    hits_den += den[c];
                    // Only prefixes that end where the score changes are events of the
                    // ranking (ties enter together).
                    if order
                        .get(i + 1)
                        .is_some_and(|&next| score[next] == score[c])
                    {
                        continue;
                    }
                    let value = fit_value(hits_num, n_num, hits_den, n_den, z);
                    if value > 0.0 && best.as_ref().is_none_or(|e| value > e.fit_bound) {
                        let mut cells = order[..=i].to_vec();
                        cells.sort_unstable();
                        best = Some(LearnedEvent {
                            event: PlannedEvent {
                                pair,
                                swapped,
                                cells,
                                law_log_ratio: f64::NAN,
                            },
                            method,
                            fit_bound: value,
                        });
                    }
                }
            }
        }
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(cells: usize, features: Vec<Vec<f64>>) -> LearnedSpec {
        LearnedSpec {
            cells,
            cell_meaning: "test".into(),
            features,
            claimed: 1.0,
            pairs: vec![(0, 1)],
            laws: None,
        }
    }

    #[test]
    fn an_impossible_cell_is_found_on_the_fitting_half() {
        // Cell 2 never occurs under the second input.
        let a = vec![3000, 3000, 4000];
        let b = vec![5000, 5000, 0];
        let e = fit(&spec(3, Vec::new()), &[(a, b)], 1e-7).unwrap().unwrap();
        assert_eq!(e.event.cells, vec![2]);
        assert!(!e.event.swapped);
        assert!(e.fit_bound > 4.0, "{e:?}");
    }

    #[test]
    fn identical_counts_give_no_event() {
        let a = vec![5000, 5000];
        assert_eq!(
            fit(&spec(2, Vec::new()), &[(a.clone(), a)], 1e-7).unwrap(),
            None
        );
    }

    #[test]
    fn the_logistic_regression_ranks_a_product_feature() {
        // Two bits; under the first input the bits are equal more often (a dependence only
        // the product b0·b1 and the intercept describe).
        let features: Vec<Vec<f64>> = (0..4)
            .map(|c| vec![f64::from(c & 1), f64::from((c >> 1) & 1)])
            .collect();
        let a = vec![3500, 1500, 1500, 3500];
        let b = vec![2500, 2500, 2500, 2500];
        let s = logistic_scores(&features, &a, &b).unwrap();
        // Equal bits (cells 0 and 3) score above unequal ones.
        assert!(s[0] > s[1] && s[3] > s[2], "{s:?}");
        // The best event is then "unequal bits" the other way round: ratio 2500/1500.
        let e = fit(&spec(4, features), &[(a, b)], 1e-7).unwrap().unwrap();
        assert_eq!(e.event.cells, vec![1, 2]);
        assert!(e.event.swapped);
    }

    #[test]
    fn cholesky_solves_a_small_system() {
        let x = cholesky_solve(&[4.0, 2.0, 2.0, 3.0], &[2.0, 1.0], 2).unwrap();
        assert!((x[0] - 0.5).abs() < 1e-12 && x[1].abs() < 1e-12, "{x:?}");
        assert!(cholesky_solve(&[0.0], &[1.0], 1).is_none());
        assert!((z_for(0.025) - 1.959_963_984_540_054).abs() < 1e-9);
    }
}
