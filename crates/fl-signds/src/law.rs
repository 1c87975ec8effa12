//! The selection's exact law: K, the output dimension h, the threshold ν_th and
//! P(ν) = ω_ν·exp(ε·1[ν ≥ ν_th]) / Z with ω_ν = C(K, ν)·C(d − K, h − ν).
//!
//! This module is the one place the formulas live: the client samples from a
//! [`SelectionLaw`], the server derives h from the same code, and tests and auditors compare
//! samples with [`SelectionLaw::probabilities`].
//!
//! Two ways of computing the same mathematics ([`Profile`]):
//! - `Exact`: log-space binomials; the greedy threshold rule and the h search are decided by
//!   exact criteria (see [`threshold`]), never by rounding noise or overflow.
//! - `MindSporeCompatible`: upstream's f64 operation order, step by step, so that the
//!   reference tables (h, ν_th, E(t, h), the inverse-CDF table) come out identical.

use fl_ldp::{Categorical, Neighbouring, PrivacyClaim};

use crate::error::{Error, Result};
use crate::params::{MAX_DIMENSION, MAX_OUTPUT_DIMENSION, Params, Profile};

/// Iteration limit of the MindSpore-compatible h search (upstream has none; it always stops
/// by h = d + 1 or on f64 overflow, far below this for every d and ε we know of).
pub const COMPATIBLE_SEARCH_LIMIT: usize = 2048;

/// The top-k size K for fraction `k` of `dimension` d.
///
/// - `Exact`: K = ⌊k ⊗ d⌋ where ⊗ is the IEEE-754 f64 product (for a decimal k this is the
///   floor of the decimal product in every case we know of: 0.13·900 → 117).
/// - `MindSporeCompatible`: K = trunc(f32(k) ⊗ f32(d)) in f32, as upstream's Java client
///   (0.13·900 → 116, 0.01·100 → 1).
#[must_use]
pub fn top_k_count(k: f64, dimension: usize, profile: Profile) -> usize {
    match profile {
        Profile::Exact => {
            let product = k * dimension as f64;
            if product.is_finite() && product > 0.0 {
                product.floor() as usize
            } else {
                0
            }
        }
        Profile::MindSporeCompatible => {
            // Java's (int) cast: saturating, NaN → 0; Rust's `as` on f32 does the same.
            let product = (k as f32) * (dimension as f32);
            (product as i32).max(0) as usize
        }
    }
}

/// The output dimension h and its threshold ν_th.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputDimension {
    /// h: the number of indices in a report.
    pub output_dimension: usize,
    /// ν_th: the exponential mechanism boosts outputs with at least ν_th top-k indices.
    pub threshold: usize,
}

/// Unit roundoff of f64 (2^−53).
const UNIT: f64 = f64::EPSILON / 2.0;

/// ln C(n, r) for r = 0..=max_r, by the exact recurrence C(n, r+1) = C(n, r)·(n − r)/(r + 1)
/// in log space (−∞ where r > n), with a bound on the absolute error of each value.
///
/// Error model: the quotient is correctly rounded (relative error ≤ u), `ln` is within one
/// ulp (≤ 2u relative; glibc's and every mainstream libm's `log` are), each addition is
/// correctly rounded. One step therefore adds at most u·(1.01 + 2|term| + |acc|).
fn ln_binomials(n: u64, max_r: usize) -> (Vec<f64>, Vec<f64>) {
    let mut values = Vec::with_capacity(max_r + 1);
    let mut errors = Vec::with_capacity(max_r + 1);
    let (mut acc, mut err) = (0.0f64, 0.0f64);
    values.push(acc);
    errors.push(err);
    for r in 0..max_r as u64 {
        if r >= n {
            acc = f64::NEG_INFINITY;
            err = 0.0;
        } else {
            let term = ((n - r) as f64 / (r + 1) as f64).ln();
            acc += term;
            err += UNIT * (1.01 + 2.0 * term.abs() + acc.abs());
        }
        values.push(acc);
        errors.push(err);
    }
    (values, errors)
}

/// Log-space tables of ln C(K, ν) and ln C(d − K, m) up to `max_h`, with error bounds.
#[derive(Debug, Clone)]
struct LnTables {
    top: (Vec<f64>, Vec<f64>),
    rest: (Vec<f64>, Vec<f64>),
}

impl LnTables {
    fn new(top_k: usize, dimension: usize, max_h: usize) -> Self {
        Self {
            top: ln_binomials(top_k as u64, max_h),
            rest: ln_binomials((dimension - top_k) as u64, max_h),
        }
    }

    /// ln ω_ν for ν = 0..=h.
    fn ln_omega(&self, h: usize) -> Vec<f64> {
        (0..=h)
            .map(|nu| self.top.0[nu] + self.rest.0[h - nu])
            .collect()
    }

    /// Bounds on |computed ln ω_ν − true ln ω_ν| (0 where ω_ν = 0, which is exact).
    fn ln_omega_errors(&self, h: usize) -> Vec<f64> {
        (0..=h)
            .map(|nu| {
                let v = self.top.0[nu] + self.rest.0[h - nu];
                if v == f64::NEG_INFINITY {
                    0.0
                } else {
                    self.top.1[nu] + self.rest.1[h - nu] + UNIT * v.abs()
                }
            })
            .collect()
    }
}

/// E(t, h) = Σ ν·P_t(ν) in log space, from ln ω; `None` when every ω is 0.
fn exact_expectation(ln_omega: &[f64], t: usize, epsilon: f64) -> Option<f64> {
    let boosted = |nu: usize| ln_omega[nu] + if nu >= t { epsilon } else { 0.0 };
    let max = (0..ln_omega.len())
        .map(boosted)
        .fold(f64::NEG_INFINITY, f64::max);
    if max == f64::NEG_INFINITY {
        return None;
    }
    let (mut w, mut m) = (0.0f64, 0.0f64);
    for nu in 0..ln_omega.len() {
        let p = (boosted(nu) - max).exp();
        w += p;
        m += nu as f64 * p;
    }
    Some(m / w)
}

/// Exact greedy threshold. Upstream scans t = 1, 2, … and stops at the first t whose
/// E(t + 1, h) is not strictly greater than E(t, h). Lowering the threshold from t to t + 1
/// removes the boost (e^ε − 1)·ω_t from ν = t, and
/// E(t + 1) − E(t) = (e^ε − 1)·ω_t·(E(t) − t) / (W_t·W_{t+1}),
/// so E improves exactly when ω_t > 0 and E(t) > t: a comparison of E with an integer
/// instead of two nearly equal rounded numbers.
fn exact_threshold(ln_omega: &[f64], epsilon: f64) -> usize {
    let h = ln_omega.len() - 1;
    let mut t = 1;
    while t < h {
        let improves = ln_omega[t] > f64::NEG_INFINITY
            && exact_expectation(ln_omega, t, epsilon).is_some_and(|e| e > t as f64);
        if !improves {
            break;
        }
        t += 1;
    }
    t
}

/// Upstream's binomial in f64: with m = n + 1 and t = min(r, n − r), start at 1 and for
/// i = 1..=t multiply by (m − i), then divide by i (two roundings per step).
fn compat_comb(n: i64, r: i64) -> f64 {
    if r < 0 || r > n || n < 0 {
        return 0.0;
    }
    let m = n + 1;
    let t = r.min(n - r);
    let mut res = 1.0f64;
    for i in 1..=t {
        res *= (m - i) as f64;
        res /= i as f64;
    }
    res
}

/// Upstream's ω_ν = comb(K, ν)·comb(d − K, h − ν) for ν = 0..=h.
fn compat_omega(top_k: usize, dimension: usize, h: usize) -> Vec<f64> {
    let (k, rest) = (top_k as i64, (dimension - top_k) as i64);
    (0..=h as i64)
        .map(|nu| compat_comb(k, nu) * compat_comb(rest, h as i64 - nu))
        .collect()
}

/// Bounds on |ln(upstream ω_ν) − ln(true ω_ν)|: each comb takes 2·min(r, n − r) correctly
/// rounded steps (relative error ≤ 2u each), the product one more, then `ln` (≤ 1 ulp).
fn compat_ln_omega_errors(top_k: usize, dimension: usize, h: usize, omega: &[f64]) -> Vec<f64> {
    let rest = dimension - top_k;
    (0..=h)
        .map(|nu| {
            let w = omega[nu];
            if w == 0.0 {
                return 0.0;
            }
            let t1 = nu.min(top_k.saturating_sub(nu));
            let m = h - nu;
            let t2 = m.min(rest.saturating_sub(m));
            let steps = (2 * (t1 + t2) + 1) as f64;
            1.01 * UNIT * steps * 1.01 + 2.0 * UNIT * w.ln().abs()
        })
        .collect()
}

/// Upstream's E(t, h): PMF with the boost multiplied in, sum S sequential, each entry
/// divided by S, then Σ ν·pmf sequential. S == 0 gives 0 (upstream's empty list).
fn compat_expectation(omega: &[f64], t: usize, exp_eps: f64) -> f64 {
    let w: Vec<f64> = omega
        .iter()
        .enumerate()
        .map(|(nu, &o)| if nu < t { o } else { o * exp_eps })
        .collect();
    let s = w.iter().fold(0.0f64, |acc, &x| acc + x);
    if s == 0.0 {
        return 0.0;
    }
    w.iter()
        .enumerate()
        .fold(0.0f64, |acc, (nu, &x)| acc + nu as f64 * (x / s))
}

/// Upstream's greedy threshold: best starts at 0, ν_th = last improving t (1 if none);
/// NaN counts as "not greater".
fn compat_threshold(omega: &[f64], exp_eps: f64) -> usize {
    let h = omega.len() - 1;
    let (mut best, mut thr) = (0.0f64, 1usize);
    for t in 1..=h {
        let e = compat_expectation(omega, t, exp_eps);
        if e > best {
            best = e;
            thr = t;
        } else {
            break;
        }
    }
    thr
}

fn check_shape(top_k: usize, dimension: usize) -> Result<()> {
    if dimension == 0 || dimension as u64 > MAX_DIMENSION {
        return Err(Error::InvalidDimension {
            dimension,
            max: MAX_DIMENSION,
        });
    }
    if top_k > dimension {
        return Err(Error::InvalidParameter {
            name: "top-k size K",
            value: top_k as f64,
            allowed: "K <= d",
        });
    }
    Ok(())
}

fn check_epsilon(epsilon: f64) -> Result<()> {
    if epsilon.is_finite() && epsilon > 0.0 {
        Ok(())
    } else {
        Err(Error::InvalidParameter {
            name: "epsilon",
            value: epsilon,
            allowed: "finite and > 0",
        })
    }
}

/// The threshold ν_th for output dimension `h` (≥ 1), by the greedy rule of upstream's
/// `calcOptThr` (maximise the expected number of top-k indices in the output, scanning
/// t = 1, 2, …).
///
/// # Errors
/// [`Error::InvalidDimension`], [`Error::InvalidParameter`] for K > d or a bad ε,
/// [`Error::InvalidOutputDimension`] for h = 0 or (Exact) h > d.
pub fn threshold(
    top_k: usize,
    dimension: usize,
    h: usize,
    epsilon: f64,
    profile: Profile,
) -> Result<usize> {
    check_shape(top_k, dimension)?;
    check_epsilon(epsilon)?;
    if h == 0 || (profile == Profile::Exact && h > dimension) {
        return Err(Error::InvalidOutputDimension {
            output_dimension: h,
            max: dimension.min(MAX_OUTPUT_DIMENSION),
        });
    }
    Ok(match profile {
        Profile::Exact => exact_threshold(&LnTables::new(top_k, dimension, h).ln_omega(h), epsilon),
        Profile::MindSporeCompatible => {
            compat_threshold(&compat_omega(top_k, dimension, h), epsilon.exp())
        }
    })
}

/// E(t, h): the expected number of top-k indices in the output when outputs with at least
/// `t` of them are boosted by e^ε. 0 when no h-subset exists.
///
/// # Errors
/// As [`threshold`].
pub fn expected_top_k(
    top_k: usize,
    dimension: usize,
    h: usize,
    t: usize,
    epsilon: f64,
    profile: Profile,
) -> Result<f64> {
    check_shape(top_k, dimension)?;
    check_epsilon(epsilon)?;
    if h == 0 {
        return Err(Error::InvalidOutputDimension {
            output_dimension: h,
            max: dimension.min(MAX_OUTPUT_DIMENSION),
        });
    }
    Ok(match profile {
        Profile::Exact => {
            if h > dimension {
                0.0
            } else {
                exact_expectation(&LnTables::new(top_k, dimension, h).ln_omega(h), t, epsilon)
                    .unwrap_or(0.0)
            }
        }
        Profile::MindSporeCompatible => {
            compat_expectation(&compat_omega(top_k, dimension, h), t, epsilon.exp())
        }
    })
}

/// Upstream's `findOptOutputDim`: for h = 1, 2, …, compute ν_th(h) and
/// ρ(h) = E(ν_th(h), h)/h; stop at the first h with ρ(h) < `threshold_ratio` and return
/// max(1, h − 1) with its threshold.
///
/// - `Exact`: ρ is computed in log space (no overflow); the search is capped at
///   [`MAX_OUTPUT_DIMENSION`] (the server's limit), so every h it returns is accepted.
/// - `MindSporeCompatible`: upstream's f64 arithmetic; the search also stops when ρ is NaN
///   (f64 overflow), as upstream's does, and is uncapped (h may exceed 100; a client or
///   server built with such an h returns [`Error::InvalidOutputDimension`]).
///
/// # Errors
/// As [`threshold`]; [`Error::SearchLimit`] if the compatible search passes
/// [`COMPATIBLE_SEARCH_LIMIT`].
pub fn search_output_dimension(
    top_k: usize,
    dimension: usize,
    epsilon: f64,
    threshold_ratio: f64,
    profile: Profile,
) -> Result<OutputDimension> {
    check_shape(top_k, dimension)?;
    check_epsilon(epsilon)?;
    match profile {
        Profile::Exact => {
            let tables = LnTables::new(top_k, dimension, MAX_OUTPUT_DIMENSION);
            let mut h = 1;
            while h <= MAX_OUTPUT_DIMENSION {
                let stop = if h > dimension {
                    true
                } else {
                    let ln_omega = tables.ln_omega(h);
                    let t = exact_threshold(&ln_omega, epsilon);
                    exact_expectation(&ln_omega, t, epsilon)
                        .is_none_or(|e| e < threshold_ratio * h as f64)
                };
                if stop {
                    break;
                }
                h += 1;
            }
            let h = (h - 1).clamp(1, MAX_OUTPUT_DIMENSION);
            let threshold = exact_threshold(&tables.ln_omega(h), epsilon);
            Ok(OutputDimension {
                output_dimension: h,
                threshold,
            })
        }
        Profile::MindSporeCompatible => {
            let exp_eps = epsilon.exp();
            let ratio = f64::from(threshold_ratio as f32);
            for h in 1..=COMPATIBLE_SEARCH_LIMIT {
                let omega = compat_omega(top_k, dimension, h);
                let t = compat_threshold(&omega, exp_eps);
                let rho = compat_expectation(&omega, t, exp_eps) / h as f64;
                if rho < ratio || rho.is_nan() {
                    let h = (h - 1).max(1);
                    let omega = compat_omega(top_k, dimension, h);
                    return Ok(OutputDimension {
                        output_dimension: h,
                        threshold: compat_threshold(&omega, exp_eps),
                    });
                }
            }
            Err(Error::SearchLimit {
                limit: COMPATIBLE_SEARCH_LIMIT,
            })
        }
    }
}

/// The exact law of one SignDS selection: the distribution of ν (how many of the h output
/// indices come from the top-k set) and, given ν, uniform subsets of the top-k set and of
/// its complement.
///
/// Every output set J ⊆ {0..d}, |J| = h, has probability
/// P(J) = exp(ε·1[|J ∩ S| ≥ ν_th]) / Z with Z = Σ_τ ω_τ·exp(ε·1[τ ≥ ν_th]), where S is the
/// top-k set; this is the exponential mechanism with a utility in {0, 1}, hence ε-LDP for
/// any two updates (docs/proofs/fl-signds/selection.md).
#[derive(Debug, Clone, PartialEq)]
pub struct SelectionLaw {
    dimension: usize,
    top_k: usize,
    output_dimension: usize,
    threshold: usize,
    epsilon: f64,
    profile: Profile,
    /// The ε in the sampler's log-weights: ε minus the rounding slack (see
    /// [`SelectionLaw::realised_epsilon`]).
    sampling_epsilon: f64,
    realised_epsilon: f64,
    /// The privacy claim of one selection (fl-ldp's contract).
    claim: PrivacyClaim,
    /// ln ω_ν (−∞ where ω_ν = 0).
    ln_omega: Vec<f64>,
    /// fl-ldp's exact sampler for P(ν) ∝ exp(ln ω_ν + ε_s·1[ν ≥ ν_th]).
    sampler: Categorical,
    /// ln P(ν) of the sampled law.
    log_probabilities: Vec<f64>,
    probabilities: Vec<f64>,
    cdf: Vec<f64>,
}

impl SelectionLaw {
    /// The law for explicit K, d, h, ν_th and ε (already profile-adjusted: the compatible
    /// profile's ε is f32-rounded by [`Params::effective_epsilon`]).
    ///
    /// # Errors
    /// [`Error::InvalidOutputDimension`] when h = 0, h > d (no h-subset: upstream's
    /// "denominator is 0") or h > 100; [`Error::InvalidParameter`] for K > d, ν_th = 0 or
    /// ν_th > h, or a bad ε; [`Error::NumericOverflow`] when the compatible profile's f64
    /// weights overflow.
    pub fn new(
        top_k: usize,
        dimension: usize,
        output_dimension: usize,
        threshold: usize,
        epsilon: f64,
        profile: Profile,
    ) -> Result<Self> {
        check_shape(top_k, dimension)?;
        check_epsilon(epsilon)?;
        let h = output_dimension;
        if h == 0 || h > dimension || h > MAX_OUTPUT_DIMENSION {
            return Err(Error::InvalidOutputDimension {
                output_dimension: h,
                max: dimension.min(MAX_OUTPUT_DIMENSION),
            });
        }
        if threshold == 0 || threshold > h {
            return Err(Error::InvalidParameter {
                name: "threshold nu_th",
                value: threshold as f64,
                allowed: "1 <= nu_th <= h",
            });
        }
        let (ln_omega, errors, reference) = match profile {
            Profile::Exact => {
                let tables = LnTables::new(top_k, dimension, h);
                (tables.ln_omega(h), tables.ln_omega_errors(h), None)
            }
            Profile::MindSporeCompatible => {
                let omega = compat_omega(top_k, dimension, h);
                if omega.iter().any(|w| !w.is_finite()) {
                    return Err(Error::NumericOverflow {
                        what: "the selection weights",
                    });
                }
                let exp_eps = epsilon.exp();
                // Upstream's countInters: den = Σ_{i<ν_th} ω_i + e^ε·Σ_{i≥ν_th} ω_i.
                let low = omega[..threshold].iter().fold(0.0f64, |a, &x| a + x);
                let high = omega[threshold..].iter().fold(0.0f64, |a, &x| a + x);
                let den = low + exp_eps * high;
                if !den.is_finite() {
                    return Err(Error::NumericOverflow {
                        what: "the selection weights",
                    });
                }
                let p: Vec<f64> = omega
                    .iter()
                    .enumerate()
                    .map(|(nu, &w)| {
                        if nu < threshold {
                            w / den
                        } else {
                            (exp_eps * w) / den
                        }
                    })
                    .collect();
                let errors = compat_ln_omega_errors(top_k, dimension, h, &omega);
                (omega.iter().map(|w| w.ln()).collect(), errors, Some(p))
            }
        };
        // Directed rounding: the sampler uses ε_s = ε − slack so that the realised privacy
        // loss, including every rounding in ln ω and in the addition of ε_s, is ≤ ε.
        let slack = 2.02
            * (0..=h)
                .filter(|&nu| ln_omega[nu] > f64::NEG_INFINITY)
                .map(|nu| errors[nu] + UNIT * (ln_omega[nu].abs() + epsilon))
                .fold(0.0f64, f64::max);
        let sampling_epsilon = (epsilon - slack).next_down();
        if sampling_epsilon <= 0.0 {
            return Err(Error::InvalidParameter {
                name: "epsilon",
                value: epsilon,
                allowed: "larger than the rounding slack of the selection weights",
            });
        }
        let realised_epsilon = (sampling_epsilon + slack).next_up().min(epsilon);
        let claim = PrivacyClaim::new(epsilon, realised_epsilon, 0.0, Neighbouring::AnyTwoInputs)?;
        let log_weights: Vec<f64> = (0..=h)
            .map(|nu| {
                ln_omega[nu]
                    + if nu >= threshold {
                        sampling_epsilon
                    } else {
                        0.0
                    }
            })
            .collect();
        let sampler = Categorical::from_log_weights(&log_weights)?;
        let log_probabilities = sampler.log_probabilities();
        let probabilities = reference.unwrap_or_else(|| sampler.probabilities());
        let mut cdf = Vec::with_capacity(h + 1);
        let mut acc = 0.0f64;
        for &p in &probabilities {
            acc += p;
            cdf.push(acc);
        }
        Ok(Self {
            dimension,
            top_k,
            output_dimension: h,
            threshold,
            epsilon,
            profile,
            sampling_epsilon,
            realised_epsilon,
            claim,
            ln_omega,
            sampler,
            log_probabilities,
            probabilities,
            cdf,
        })
    }

    /// The law for `params` at update dimension `dimension`: K, then h (the configured
    /// `dim_out` or the search) and ν_th, then P(ν).
    ///
    /// # Errors
    /// [`Error::EmptyTopK`] when K = 0 (the rule: a round needs at least one top-k index,
    /// i.e. k·d ≥ 1); [`Error::InvalidOutputDimension`] when h > d or h > 100; the errors of
    /// [`search_output_dimension`] and [`SelectionLaw::new`].
    pub fn for_params(params: &Params, dimension: usize) -> Result<Self> {
        if dimension == 0 || dimension as u64 > MAX_DIMENSION {
            return Err(Error::InvalidDimension {
                dimension,
                max: MAX_DIMENSION,
            });
        }
        let profile = params.profile();
        let top_k = top_k_count(params.top_k_fraction(), dimension, profile);
        if top_k == 0 {
            return Err(Error::EmptyTopK {
                top_k_fraction: params.top_k_fraction(),
                dimension,
            });
        }
        let epsilon = params.effective_epsilon();
        let (h, t) = if params.output_dimension() == 0 {
            let out = search_output_dimension(
                top_k,
                dimension,
                epsilon,
                params.threshold_ratio(),
                profile,
            )?;
            (out.output_dimension, out.threshold)
        } else {
            let h = params.output_dimension() as usize;
            (h, threshold(top_k, dimension, h, epsilon, profile)?)
        };
        Self::new(top_k, dimension, h, t, epsilon, profile)
    }

    /// d.
    #[must_use]
    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// K, the size of the top-k set.
    #[must_use]
    pub fn top_k(&self) -> usize {
        self.top_k
    }

    /// h, the number of indices in every output.
    #[must_use]
    pub fn output_dimension(&self) -> usize {
        self.output_dimension
    }

    /// ν_th.
    #[must_use]
    pub fn threshold(&self) -> usize {
        self.threshold
    }

    /// The ε the law was requested with (profile-adjusted).
    #[must_use]
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// An upper bound on the privacy loss the sampler actually realises, ≤ [`Self::epsilon`].
    ///
    /// The sampler draws ν exactly from the f64 log-weights ln ω_ν + ε_s·1[ν ≥ ν_th]; the
    /// computed ln ω_ν carries a bounded rounding error, so the likelihood ratio of one
    /// output set under two top-k sets is at most exp(ε_s + slack), where slack bounds twice
    /// the worst error. ε_s = ε − slack (rounded down), so the realised loss is ≤ ε.
    /// The slack is about 1e−12 for h ≤ 100.
    #[must_use]
    pub fn realised_epsilon(&self) -> f64 {
        self.realised_epsilon
    }

    /// The privacy claim of one selection: ε-LDP ([`Self::realised_epsilon`], requested
    /// [`Self::epsilon`], δ = 0) for any two top-k sets, hence any two updates
    /// (fl-ldp's [`Neighbouring::AnyTwoInputs`]); the same value as
    /// `fl_ldp::Mechanism::privacy`.
    #[must_use]
    pub fn privacy_claim(&self) -> PrivacyClaim {
        self.claim
    }

    /// ε_s, the boost in the sampler's log-weights (ε minus the rounding slack).
    #[must_use]
    pub fn sampling_epsilon(&self) -> f64 {
        self.sampling_epsilon
    }

    /// fl-ldp's exact sampler of ν (P(ν) ∝ exp(ln ω_ν + ε_s·1[ν ≥ ν_th])), with its law.
    #[must_use]
    pub fn nu_sampler(&self) -> &Categorical {
        &self.sampler
    }

    /// The profile the numbers were computed with.
    #[must_use]
    pub fn profile(&self) -> Profile {
        self.profile
    }

    /// P(ν) for ν = 0..=h: the law the sampler draws from (`Exact`), or upstream's f64
    /// table (`MindSporeCompatible`, reproduced bit for bit; it differs from the sampled law
    /// only by rounding, relative ≤ 1e−10).
    #[must_use]
    pub fn probabilities(&self) -> &[f64] {
        &self.probabilities
    }

    /// The unnormalised log-weights ln ω_ν + ε_s·1[ν ≥ ν_th] (−∞ where ω_ν = 0) the sampler
    /// draws ν from.
    #[must_use]
    pub fn log_weights(&self) -> &[f64] {
        self.sampler.log_weights()
    }

    /// F(ν) = Σ_{τ ≤ ν} P(τ) (accumulated in f64).
    #[must_use]
    pub fn cdf(&self) -> &[f64] {
        &self.cdf
    }

    /// E\[ν\].
    #[must_use]
    pub fn expectation(&self) -> f64 {
        self.probabilities
            .iter()
            .enumerate()
            .map(|(nu, p)| nu as f64 * p)
            .sum()
    }

    /// ln P(J) for one output set J with |J ∩ S| = ν: ε_s·1[ν ≥ ν_th] − ln Z (= ln P(ν) −
    /// ln ω_ν). −∞ when no such set exists or ν > h.
    #[must_use]
    pub fn set_log_probability(&self, nu: usize) -> f64 {
        match (self.log_probabilities.get(nu), self.ln_omega.get(nu)) {
            (Some(&lp), Some(&lo)) if lo > f64::NEG_INFINITY => lp - lo,
            _ => f64::NEG_INFINITY,
        }
    }

    /// P(j ∈ J) for one fixed index j: E\[ν\]/K inside the top-k set, (h − E\[ν\])/(d − K)
    /// outside it (0 when the complement is empty).
    #[must_use]
    pub fn inclusion_probability(&self, in_top_k: bool) -> f64 {
        let e = self.expectation();
        if in_top_k {
            e / self.top_k as f64
        } else if self.dimension == self.top_k {
            0.0
        } else {
            (self.output_dimension as f64 - e) / (self.dimension - self.top_k) as f64
        }
    }

    /// The inverse CDF: the smallest ν with F(ν) ≥ u, for a uniform `u` ∈ [0, 1).
    ///
    /// In the compatible profile the accumulation repeats upstream's `countInters`
    /// (F starts at ω_0/den and adds ω_ν/den or (e^ε·ω_ν)/den) so that its table is
    /// reproduced bit for bit. Unlike upstream it is guarded: when rounding leaves
    /// F(h) < u (upstream then loops forever) the answer is the last ν with non-zero
    /// probability, and a zero-probability ν is never returned (upstream returns ν = 0 for
    /// u = 0 even when ω_0 = 0). Sampling does not use this function: the client draws ν
    /// exactly from [`SelectionLaw::log_weights`].
    #[must_use]
    pub fn quantile(&self, u: f64) -> usize {
        let h = self.output_dimension;
        let mut nu = 0;
        let mut f = self.probabilities[0];
        while f < u && nu < h {
            nu += 1;
            f += self.probabilities[nu];
        }
        if f < u {
            nu = h;
        }
        if self.probabilities[nu] > 0.0 {
            return nu;
        }
        // Zero-probability landing spot: the next non-zero ν above, else the last below.
        (nu..=h)
            .find(|&v| self.probabilities[v] > 0.0)
            .or_else(|| (0..nu).rev().find(|&v| self.probabilities[v] > 0.0))
            .unwrap_or(nu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const C: Profile = Profile::MindSporeCompatible;
    const E: Profile = Profile::Exact;

    fn f32eps(e: f64) -> f64 {
        f64::from(e as f32)
    }

    #[test]
    fn top_k_count_vectors() {
        // Reference §1.4: (k, d, K upstream f32, exact decimal).
        for (k, d, compat, exact) in [
            (0.25, 8, 2, 2),
            (0.01, 100, 1, 1),
            (0.01, 300, 3, 3),
            (0.13, 900, 116, 117),
            (0.13, 1700, 220, 221),
            (0.01, 266_084, 2660, 2660),
            (0.2, 800_000, 160_000, 160_000),
            (0.1, 8, 0, 0),
        ] {
            assert_eq!(top_k_count(k, d, C), compat, "compat k={k} d={d}");
            assert_eq!(top_k_count(k, d, E), exact, "exact k={k} d={d}");
        }
    }

    #[test]
    fn compat_binomials_and_weights() {
        assert_eq!(compat_comb(6, 3), 20.0);
        assert_eq!(compat_comb(2, 3), 0.0);
        assert_eq!(compat_comb(-1, 0), 0.0);
        assert_eq!(compat_omega(2, 8, 1), vec![6.0, 2.0]);
        assert_eq!(compat_omega(2, 8, 2), vec![15.0, 12.0, 1.0]);
        assert_eq!(compat_omega(2, 8, 3), vec![20.0, 30.0, 6.0, 0.0]);
        assert_eq!(compat_omega(2, 8, 4), vec![15.0, 40.0, 15.0, 0.0, 0.0]);
        let ln = LnTables::new(2, 8, 4).ln_omega(3);
        let (_, err) = ln_binomials(1_000_000, 100);
        assert!(err[100] > 0.0 && err[100] < 1e-11, "{}", err[100]);
        for (l, w) in ln.iter().zip([20.0f64, 30.0, 6.0, 0.0]) {
            assert!((l.exp() - w).abs() < 1e-12 || (w == 0.0 && *l == f64::NEG_INFINITY));
        }
    }

    /// Reference §1.13: E(t, h) for d = 8, K = 2, both profiles, to 6 decimals.
    #[test]
    fn small_expectation_table() {
        let table: [(f64, [&[f64]; 4]); 5] = [
            (
                1.0,
                [
                    &[0.475367],
                    &[0.756013, 0.586729],
                    &[0.968689, 0.944347, 0.75],
                    &[1.156677, 1.269114, 1.0, 1.0],
                ],
            ),
            (
                2.0,
                [
                    &[0.711235],
                    &[0.931469, 0.778681],
                    &[1.085083, 1.257958, 0.75],
                    &[1.227424, 1.577896, 1.0, 1.0],
                ],
            ),
            (
                5.0,
                [
                    &[0.980187],
                    &[1.068615, 1.760565],
                    &[1.162316, 1.925570, 0.75],
                    &[1.270393, 1.969314, 1.0, 1.0],
                ],
            ),
            (
                10.0,
                [
                    &[0.999864],
                    &[1.076867, 1.998096],
                    &[1.166637, 1.999471, 0.75],
                    &[1.272712, 1.999788, 1.0, 1.0],
                ],
            ),
            (
                100.0,
                [
                    &[1.0],
                    &[1.076923, 2.0],
                    &[1.166667, 2.0, 0.75],
                    &[1.272727, 2.0, 1.0, 1.0],
                ],
            ),
        ];
        for (eps, rows) in table {
            for (hi, row) in rows.iter().enumerate() {
                for (ti, want) in row.iter().enumerate() {
                    for p in [C, E] {
                        let got = expected_top_k(2, 8, hi + 1, ti + 1, eps, p).unwrap();
                        assert!(
                            (got - want).abs() < 5e-7,
                            "{p:?} eps={eps} h={} t={} got {got} want {want}",
                            hi + 1,
                            ti + 1
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn small_threshold_and_h_table() {
        // ε: ν_th for h = 1..4, optimal h.
        for (eps, thr, h) in [
            (1.0, [1, 1, 1, 2], 1),
            (2.0, [1, 1, 2, 2], 1),
            (5.0, [1, 2, 2, 2], 3),
            (10.0, [1, 2, 2, 2], 3),
            (100.0, [1, 2, 2, 2], 3),
            (0.5, [1, 1, 1, 1], 1),
            (20.0, [1, 2, 2, 2], 3),
        ] {
            for p in [C, E] {
                let got: Vec<usize> = (1..=4)
                    .map(|hh| threshold(2, 8, hh, f32eps(eps), p).unwrap())
                    .collect();
                if eps != 0.5 {
                    assert_eq!(got, thr, "{p:?} eps={eps}");
                }
                let out = search_output_dimension(2, 8, f32eps(eps), 0.6, p).unwrap();
                assert_eq!(out.output_dimension, h, "{p:?} eps={eps}");
                assert_eq!(out.threshold, thr[h - 1], "{p:?} eps={eps}");
            }
        }
    }

    /// Reference §1.5.4: the h / ν_th table (thr_ratio 0.6, upstream f64 arithmetic).
    #[test]
    fn compatible_h_table() {
        type Row = (f64, usize, usize);
        let cases: &[(usize, f64, &[Row])] = &[
            (100, 0.01, &[(0.5, 1, 1), (10.0, 1, 1), (100.0, 1, 1)]),
            (1000, 0.01, &[(10.0, 2, 2), (20.0, 6, 4), (100.0, 16, 10)]),
            (
                1000,
                0.1,
                &[(5.0, 2, 2), (10.0, 6, 4), (20.0, 18, 11), (100.0, 98, 59)],
            ),
            (1000, 0.2, &[(100.0, 160, 102)]),
            (
                10_000,
                0.05,
                &[(10.0, 4, 3), (20.0, 11, 7), (100.0, 78, 47)],
            ),
            (
                266_084,
                0.01,
                &[(5.0, 1, 1), (10.0, 2, 2), (20.0, 6, 4), (100.0, 43, 26)],
            ),
            (
                266_084,
                0.2,
                &[(5.0, 4, 3), (10.0, 14, 9), (20.0, 36, 22), (100.0, 65, 63)],
            ),
            (
                800_000,
                0.2,
                &[(5.0, 4, 3), (10.0, 14, 9), (20.0, 36, 22), (100.0, 58, 58)],
            ),
            (1_000_000, 0.01, &[(100.0, 43, 26)]),
            (10_000_000, 0.2, &[(100.0, 46, 46)]),
        ];
        for &(d, k, rows) in cases {
            let kk = top_k_count(k, d, C);
            for &(eps, h, thr) in rows {
                let out = search_output_dimension(kk, d, f32eps(eps), 0.6, C).unwrap();
                assert_eq!(
                    (out.output_dimension, out.threshold),
                    (h, thr),
                    "d={d} k={k} eps={eps}"
                );
            }
        }
    }

    /// The Exact profile never lets overflow end the search: where upstream stops at 65 or
    /// 58 (f64 overflow), the exact search runs to the server's cap of 100; where upstream
    /// does not overflow, both agree.
    #[test]
    fn exact_h_search_is_overflow_free_and_capped() {
        for (d, k) in [(266_084, 0.2), (800_000, 0.2), (1000, 0.2)] {
            let kk = top_k_count(k, d, E);
            let out = search_output_dimension(kk, d, 100.0, 0.6, E).unwrap();
            assert_eq!(out.output_dimension, MAX_OUTPUT_DIMENSION, "d={d}");
        }
        for (d, k, eps, h) in [
            (266_084, 0.01, 100.0, 43),
            (1000, 0.1, 20.0, 18),
            (10_000, 0.05, 20.0, 11),
            (266_084, 0.2, 10.0, 14),
        ] {
            let kk = top_k_count(k, d, E);
            let out = search_output_dimension(kk, d, eps, 0.6, E).unwrap();
            assert_eq!(out.output_dimension, h, "d={d} k={k} eps={eps}");
        }
    }

    /// Reference §1.5.3 caveat: d = 1000, K = 200, ε = 100, h = 145. Upstream's f64 order
    /// continues by rounding noise; the exact rule decides by E(t) > t and continues too
    /// (E(1) ≈ 29 > 1), as exact arithmetic does.
    #[test]
    fn flat_region_threshold_is_decided_exactly() {
        let t = threshold(200, 1000, 145, 100.0, E).unwrap();
        assert!(t > 1);
        let e1 = expected_top_k(200, 1000, 145, 1, 100.0, E).unwrap();
        assert!((e1 - 29.0).abs() < 1e-9, "{e1}");
    }

    /// Reference §1.13: sampling table ε = 5, h = 3, ν_th = 2 and the others.
    #[test]
    fn compatible_sampling_table() {
        let law = SelectionLaw::new(2, 8, 3, 2, 5.0, C).unwrap();
        let f = law.cdf();
        assert_eq!(f[0], 0.02126576028293748);
        assert_eq!(f[1], 0.0531644007073437);
        assert_eq!(f[2], 1.0);
        assert_eq!(f[3], 1.0);
        // Upstream's den = 940.4789546154595: P(2) = 6e^5/den.
        assert!((6.0 * 5f64.exp() / law.probabilities()[2] - 940.4789546154595).abs() < 1e-9);
        for (p, want) in
            law.probabilities()
                .iter()
                .zip([0.0212657603, 0.0318986404, 0.9468355993, 0.0])
        {
            assert!((p - want).abs() < 1e-10);
        }
        assert_eq!(law.quantile(0.01), 0);
        assert_eq!(law.quantile(0.03), 1);
        assert_eq!(law.quantile(0.5), 2);
        // Guards: never a zero-probability ν.
        assert_eq!(law.quantile(1.0), 2);
        let law = SelectionLaw::new(2, 8, 1, 1, 1.0, C).unwrap();
        assert!((law.probabilities()[0] - 0.5246331136).abs() < 1e-10);
        assert!((law.probabilities()[1] - 0.4753668864).abs() < 1e-10);
        let law = SelectionLaw::new(2, 8, 4, 2, 1.0, C).unwrap();
        assert_eq!(law.cdf()[0], 0.15661833462923044);
        assert_eq!(law.cdf()[1], 0.5742672269738449);
        for (p, want) in
            law.probabilities()
                .iter()
                .zip([0.1566183346, 0.4176488923, 0.4257327730, 0.0, 0.0])
        {
            assert!((p - want).abs() < 1e-10);
        }
        let law = SelectionLaw::new(2, 8, 3, 2, 100.0, C).unwrap();
        assert!((law.cdf()[1] - 3.100063313350696e-43).abs() < 1e-55);
        // Exact profile: same law to full relative precision.
        let exact = SelectionLaw::new(2, 8, 3, 2, 5.0, E).unwrap();
        for (a, b) in
            exact
                .probabilities()
                .iter()
                .zip([0.0212657603, 0.0318986404, 0.9468355993, 0.0])
        {
            assert!((a - b).abs() < 1e-10);
        }
    }

    #[test]
    fn impossible_laws_are_errors() {
        // sign_dim_out = 50 with d = 8: no 50-subset (upstream: den = 0, upload aborted).
        assert!(matches!(
            SelectionLaw::new(2, 8, 50, 1, 1.0, E),
            Err(Error::InvalidOutputDimension { .. })
        ));
        assert!(matches!(
            SelectionLaw::new(2, 8, 50, 1, 1.0, C),
            Err(Error::InvalidOutputDimension { .. })
        ));
        assert!(SelectionLaw::new(2, 8, 3, 0, 1.0, E).is_err());
        assert!(SelectionLaw::new(2, 8, 3, 4, 1.0, E).is_err());
        assert!(SelectionLaw::new(9, 8, 3, 1, 1.0, E).is_err());
        assert!(SelectionLaw::new(2, 0, 1, 1, 1.0, E).is_err());
        assert!(SelectionLaw::new(2, 8, 3, 1, f64::NAN, E).is_err());
        // Compatible overflow: C(10^7, 50)·e^100 > f64::MAX.
        assert!(matches!(
            SelectionLaw::new(1_000_000, 10_000_000, 50, 30, 100.0, C),
            Err(Error::NumericOverflow { .. })
        ));
        // The exact profile has no such limit.
        let law = SelectionLaw::new(1_000_000, 10_000_000, 50, 30, 100.0, E).unwrap();
        let total: f64 = law.probabilities().iter().sum();
        assert!((total - 1.0).abs() < 1e-12);
    }

    #[test]
    fn k_zero_and_params() {
        // K = 0 (k = 0.1, d = 8): h = 1, ν_th = 1 in both profiles (reference §1.13)...
        for p in [C, E] {
            let out = search_output_dimension(0, 8, 1.0, 0.6, p).unwrap();
            assert_eq!((out.output_dimension, out.threshold), (1, 1));
        }
        // ... but a round with an empty top-k set is refused.
        let params = Params::default().with_top_k_fraction(0.1).unwrap();
        assert!(matches!(
            SelectionLaw::for_params(&params, 8),
            Err(Error::EmptyTopK { .. })
        ));
        let params = Params::default()
            .with_top_k_fraction(0.25)
            .unwrap()
            .with_epsilon(5.0)
            .unwrap();
        let law = SelectionLaw::for_params(&params, 8).unwrap();
        assert_eq!(
            (law.top_k(), law.output_dimension(), law.threshold()),
            (2, 3, 2)
        );
        let law = SelectionLaw::for_params(&params.with_output_dimension(4).unwrap(), 8).unwrap();
        assert_eq!((law.output_dimension(), law.threshold()), (4, 2));
        assert!(SelectionLaw::for_params(&params.with_output_dimension(9).unwrap(), 8).is_err());
    }

    #[test]
    fn set_and_inclusion_probabilities_are_consistent() {
        let law = SelectionLaw::new(3, 10, 4, 2, 2.0, E).unwrap();
        // Σ over all sets = Σ_ν ω_ν · P(set with ν) = 1.
        let total: f64 = (0..=4)
            .map(|nu| {
                let w = LnTables::new(3, 10, 4).ln_omega(4)[nu].exp().round();
                w * law.set_log_probability(nu).exp()
            })
            .sum();
        assert!((total - 1.0).abs() < 1e-12);
        let inside = law.inclusion_probability(true) * 3.0;
        let outside = law.inclusion_probability(false) * 7.0;
        assert!((inside + outside - 4.0).abs() < 1e-12);
        assert_eq!(law.set_log_probability(9), f64::NEG_INFINITY);
        // Ratio of set probabilities is e^ε exactly at the threshold.
        let r = law.set_log_probability(2) - law.set_log_probability(1);
        assert!((r - 2.0).abs() < 1e-12 && r <= 2.0);
        assert!(law.realised_epsilon() <= 2.0 && law.realised_epsilon() > 2.0 - 1e-10);
        assert!(law.sampling_epsilon() < 2.0);
    }
}
