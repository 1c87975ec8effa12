//! A Rényi-DP accountant: composes Gaussian (continuous or discrete, CKS 2020) and pure-ε
//! mechanisms adaptively and converts to (ε, δ)-DP.
//!
//! Callers count how often each example is released (fl-hetero-nn: per row id, once per
//! step that holds the example), and k releases compose k mechanisms. Subsampling
//! amplification is used only where the caller hides the inclusion coin from the
//! adversary ([`RdpAccountant::compose_subsampled_gaussian`], Poisson sampling).
//!
//! - Gaussian mechanism with noise multiplier z = σ/Δ₂ (L2 sensitivity Δ₂): RDP
//!   ε(α) = α/(2z²) for every α > 1 (Mironov 2017, Proposition 7; the same bound holds for
//!   the discrete Gaussian on integer-valued queries, CKS 2020 Theorem 14).
//! - Pure ε-DP: ε(α) ≤ min(ε, α·ε²/2) (Bun & Steinke 2016, Proposition 3.3), and the
//!   accountant also keeps the plain sum of pure ε's (basic composition), reported when it
//!   is smaller.
//! - Conversion (Canonne, Kamath, Steinke 2020, Proposition 12; Balle et al. 2020, the
//!   one tf-privacy / dp_accounting and Opacus use): (α, ε(α))-RDP implies (ε, δ)-DP with
//!   ε = ε(α) + ln(1 − 1/α) − (ln δ + ln α)/(α − 1), minimised over the orders.
//!
//! Proof sketch and references: `docs/proofs/fl-ldp/discrete-gaussian.md`.

use crate::error::{Error, Result};

/// The default orders: dp_accounting's 1.1, 1.2, …, 10.9, 12, …, 63, then 64 … 1024.
fn default_orders() -> Vec<f64> {
    let mut o: Vec<f64> = (1..100).map(|x| 1.0 + f64::from(x) / 10.0).collect();
    o.extend((12..64).map(f64::from));
    o.extend([
        64.0, 80.0, 96.0, 128.0, 192.0, 256.0, 384.0, 512.0, 768.0, 1024.0,
    ]);
    o
}

/// The (ε, δ) a composition converts to, with the order that achieved it.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct PrivacyLoss {
    /// ε.
    pub epsilon: f64,
    /// δ.
    pub delta: f64,
    /// The Rényi order that gave ε (`f64::INFINITY` when basic pure-ε composition did).
    pub order: f64,
}

/// Rényi-DP accountant over a fixed list of orders.
#[derive(Debug, Clone, PartialEq)]
pub struct RdpAccountant {
    orders: Vec<f64>,
    rdp: Vec<f64>,
    /// Σ ε of the pure mechanisms composed; `None` once any non-pure mechanism is added.
    pure_sum: Option<f64>,
}

impl Default for RdpAccountant {
    fn default() -> Self {
        Self::new()
    }
}

impl RdpAccountant {
    /// An empty accountant with the default orders (1.1 … 1024).
    #[must_use]
    pub fn new() -> Self {
        let orders = default_orders();
        Self {
            rdp: vec![0.0; orders.len()],
            orders,
            pure_sum: Some(0.0),
        }
    }

    /// An empty accountant with the given orders (each finite and > 1).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for an order that is not finite and > 1;
    /// [`Error::EmptyInput`] for no orders.
    pub fn with_orders(orders: &[f64]) -> Result<Self> {
        if orders.is_empty() {
            return Err(Error::EmptyInput { name: "orders" });
        }
        if let Some(&bad) = orders.iter().find(|a| !(a.is_finite() && **a > 1.0)) {
            return Err(Error::InvalidParameter {
                name: "order",
                value: bad,
                allowed: "a finite number > 1",
            });
        }
        Ok(Self {
            orders: orders.to_vec(),
            rdp: vec![0.0; orders.len()],
            pure_sum: Some(0.0),
        })
    }

    /// Composes `count` Gaussian mechanisms (continuous, or discrete on integer-valued
    /// queries) with noise multiplier z = σ/Δ₂: RDP α·count/(2z²).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] unless z is finite and > 0.
    pub fn compose_gaussian(&mut self, noise_multiplier: f64, count: u64) -> Result<()> {
        if !(noise_multiplier.is_finite() && noise_multiplier > 0.0) {
            return Err(Error::InvalidParameter {
                name: "noise_multiplier",
                value: noise_multiplier,
                allowed: "a finite number > 0",
            });
        }
        let z2 = noise_multiplier * noise_multiplier;
        for (r, a) in self.rdp.iter_mut().zip(&self.orders) {
            *r += count as f64 * a / (2.0 * z2);
        }
        if count > 0 {
            self.pure_sum = None;
        }
        Ok(())
    }

    /// Composes `count` **Poisson-subsampled** Gaussian mechanisms (continuous, or discrete
    /// on integer-valued queries with integer shifts) with noise multiplier z = σ/Δ₂ and
    /// inclusion probability q, for the add/remove relation *in both directions*: per
    /// mechanism, at each integer order α ≥ 2, the larger of
    ///
    /// - remove, D_α((1−q)N(0, σ²) + qN(Δ, σ²) ‖ N(0, σ²)) =
    ///   1/(α−1)·ln Σₖ C(α, k)(1−q)^(α−k) q^k e^(k(k−1)/(2z²)) (Mironov, Talwar, Zhang
    ///   2019, the integer-order formula, exact for the continuous Gaussian; for the
    ///   discrete Gaussian every moment E((B/A)^k) equals the continuous one at integer
    ///   shifts, so the same value is exact there too);
    /// - add, D_α(N(0, σ²) ‖ (1−q)N(0, σ²) + qN(Δ, σ²)) ≤
    ///   1/(α−1)·ln(1 + (C(α, 2)·q² + R)·(e^(1/z²) − 1)), R = (1−q)^(−(α−1)) − 1 − (α−1)q −
    ///   C(α, 2)q² (a second-order bound of (1 − q + qL)^(1−α): Taylor over L ≥ 1, the
    ///   binomial series over L < 1; E(L) = 1, E(L²) = e^(1/z²)). It is much looser than
    ///   the remove direction unless q·α is small, so the amplification it proves is
    ///   modest.
    ///
    /// Non-integer orders get +∞ (unused by the conversion). q = 1 is the plain Gaussian,
    /// [`Self::compose_gaussian`]. Proof: `docs/proofs/fl-hetero-nn/dp-sgd.md`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] unless z is finite and > 0;
    /// [`Error::InvalidProbability`] unless 0 < q ≤ 1.
    pub fn compose_subsampled_gaussian(
        &mut self,
        noise_multiplier: f64,
        sampling_rate: f64,
        count: u64,
    ) -> Result<()> {
        if !(noise_multiplier.is_finite() && noise_multiplier > 0.0) {
            return Err(Error::InvalidParameter {
                name: "noise_multiplier",
                value: noise_multiplier,
                allowed: "a finite number > 0",
            });
        }
        if !(sampling_rate > 0.0 && sampling_rate <= 1.0) {
            return Err(Error::InvalidProbability {
                name: "sampling_rate",
                value: sampling_rate,
            });
        }
        if sampling_rate == 1.0 {
            return self.compose_gaussian(noise_multiplier, count);
        }
        if count == 0 {
            return Ok(());
        }
        for (r, &a) in self.rdp.iter_mut().zip(&self.orders) {
            let per = subsampled_gaussian_rdp(noise_multiplier, sampling_rate, a);
            *r += count as f64 * per;
        }
        self.pure_sum = None;
        Ok(())
    }

    /// Composes `count` pure ε-DP mechanisms: RDP min(ε, α·ε²/2) each, and basic
    /// composition count·ε.
    ///
    /// # Errors
    /// [`Error::InvalidEpsilon`] unless ε is finite and ≥ 0.
    pub fn compose_pure(&mut self, epsilon: f64, count: u64) -> Result<()> {
        if !(epsilon.is_finite() && epsilon >= 0.0) {
            return Err(Error::InvalidEpsilon { value: epsilon });
        }
        for (r, a) in self.rdp.iter_mut().zip(&self.orders) {
            *r += count as f64 * epsilon.min(a * epsilon * epsilon / 2.0);
        }
        if let Some(s) = &mut self.pure_sum {
            *s += count as f64 * epsilon;
        }
        Ok(())
    }

    /// The RDP curve: (order, ε(order)) pairs.
    #[must_use]
    pub fn rdp(&self) -> Vec<(f64, f64)> {
        self.orders
            .iter()
            .copied()
            .zip(self.rdp.iter().copied())
            .collect()
    }

    /// The smallest ε such that the composition is (ε, δ)-DP.
    ///
    /// # Errors
    /// [`Error::InvalidProbability`] unless 0 < δ < 1.
    pub fn epsilon(&self, delta: f64) -> Result<PrivacyLoss> {
        if !(delta > 0.0 && delta < 1.0) {
            return Err(Error::InvalidProbability {
                name: "delta",
                value: delta,
            });
        }
        let mut best = PrivacyLoss {
            epsilon: f64::INFINITY,
            delta,
            order: f64::NAN,
        };
        for (&a, &r) in self.orders.iter().zip(&self.rdp) {
            let e = if delta * delta + (-r).exp_m1() > 0.0 {
                0.0
            } else {
                r + (-1.0 / a).ln_1p() - (delta.ln() + a.ln()) / (a - 1.0)
            };
            if e < best.epsilon {
                best.epsilon = e.max(0.0);
                best.order = a;
            }
        }
        if let Some(s) = self.pure_sum
            && s <= best.epsilon
        {
            best.epsilon = s;
            best.order = f64::INFINITY;
        }
        Ok(best)
    }

    /// The smallest δ such that the composition is (ε, δ)-DP (the conversion inverted:
    /// δ = exp((α − 1)(ε(α) − ε) + (α − 1)·ln(1 − 1/α) − ln α), minimised).
    ///
    /// # Errors
    /// [`Error::InvalidEpsilon`] unless ε is finite and ≥ 0.
    pub fn delta(&self, epsilon: f64) -> Result<f64> {
        if !(epsilon.is_finite() && epsilon >= 0.0) {
            return Err(Error::InvalidEpsilon { value: epsilon });
        }
        if self.pure_sum.is_some_and(|s| s <= epsilon) {
            return Ok(0.0);
        }
        let mut best = 1.0f64;
        for (&a, &r) in self.orders.iter().zip(&self.rdp) {
            let log_d = (a - 1.0) * (r - epsilon) + (a - 1.0) * (-1.0 / a).ln_1p() - a.ln();
            best = best.min(log_d.exp());
        }
        Ok(best)
    }

    /// The smallest noise multiplier z (to 10⁻⁹ relative) such that `count`
    /// Poisson-subsampled Gaussian mechanisms with inclusion probability q compose to
    /// (ε, δ)-DP ([`Self::compose_subsampled_gaussian`]), by bisection.
    ///
    /// # Errors
    /// Invalid ε, δ or q; `count` = 0.
    pub fn subsampled_noise_multiplier_for(
        epsilon: f64,
        delta: f64,
        sampling_rate: f64,
        count: u64,
    ) -> Result<f64> {
        Self::bisect_noise(epsilon, delta, count, |acc, z| {
            acc.compose_subsampled_gaussian(z, sampling_rate, count)
        })
    }

    /// The smallest noise multiplier z (to 10⁻⁹ relative) such that `count` Gaussian
    /// mechanisms with multiplier z compose to (ε, δ)-DP — the inverse of
    /// [`Self::compose_gaussian`] + [`Self::epsilon`], by bisection.
    ///
    /// # Errors
    /// Invalid ε or δ; `count` = 0 (no noise is needed, z is undefined).
    pub fn noise_multiplier_for(epsilon: f64, delta: f64, count: u64) -> Result<f64> {
        Self::bisect_noise(epsilon, delta, count, |acc, z| {
            acc.compose_gaussian(z, count)
        })
    }

    /// Bisection on z for the composition `compose` (monotone in z) to reach (ε, δ).
    fn bisect_noise(
        epsilon: f64,
        delta: f64,
        count: u64,
        compose: impl Fn(&mut Self, f64) -> Result<()>,
    ) -> Result<f64> {
        if !(epsilon.is_finite() && epsilon > 0.0) {
            return Err(Error::InvalidEpsilon { value: epsilon });
        }
        if count == 0 {
            return Err(Error::InvalidCount {
                name: "count",
                value: 0,
                allowed: "at least 1",
            });
        }
        let eps_of = |z: f64| -> Result<f64> {
            let mut acc = Self::new();
            compose(&mut acc, z)?;
            Ok(acc.epsilon(delta)?.epsilon)
        };
        let (mut lo, mut hi) = (1e-3, 1.0);
        while eps_of(hi)? > epsilon {
            lo = hi;
            hi *= 2.0;
            if hi > 1e12 {
                return Err(Error::PrecisionLimit {
                    what: "the noise multiplier needed exceeds 1e12",
                });
            }
        }
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if eps_of(mid)? > epsilon {
                lo = mid;
            } else {
                hi = mid;
            }
            if hi - lo <= 1e-9 * hi {
                break;
            }
        }
        Ok(hi)
    }
}

/// ln(eᵃ + eᵇ) without overflow.
fn log_add(a: f64, b: f64) -> f64 {
    let (hi, lo) = if a > b { (a, b) } else { (b, a) };
    if lo == f64::NEG_INFINITY {
        hi
    } else {
        hi + (lo - hi).exp().ln_1p()
    }
}

/// One Poisson-subsampled Gaussian mechanism's RDP at order `order` (z = σ/Δ₂,
/// 0 < q < 1): the larger of the remove and add directions
/// ([`RdpAccountant::compose_subsampled_gaussian`]); +∞ at a non-integer order.
fn subsampled_gaussian_rdp(z: f64, q: f64, order: f64) -> f64 {
    if order.fract() != 0.0 || !(2.0..=1e6).contains(&order) {
        return f64::INFINITY;
    }
    let alpha = order as u64;
    let inv = 1.0 / (2.0 * z * z);
    let (ln_q, ln_1q) = (q.ln(), (-q).ln_1p());
    // Remove: ln Σₖ C(α, k)(1−q)^(α−k) q^k e^(k(k−1)/(2z²)), in log space.
    let mut ln_binom = 0.0f64;
    let mut remove = f64::NEG_INFINITY;
    for k in 0..=alpha {
        if k > 0 {
            ln_binom += ((alpha - k + 1) as f64).ln() - (k as f64).ln();
        }
        let kf = k as f64;
        let term = ln_binom + (alpha - k) as f64 * ln_1q + kf * ln_q + kf * (kf - 1.0) * inv;
        remove = log_add(remove, term);
    }
    // Add: ln(1 + (C(α, 2) q² + R) (e^(1/z²) − 1)) with R = (1−q)^(−(α−1)) − 1 − (α−1)q −
    // C(α, 2) q², the tail of the binomial series (proof: docs/proofs/fl-hetero-nn/dp-sgd.md).
    let a = alpha as f64;
    let (g, head) = (a - 1.0, a * (a - 1.0) / 2.0 * q * q);
    // R from expm1, never below 0, plus a relative margin for the rounding of the
    // subtraction (R must not be underestimated).
    let tail = ((-g * ln_1q).exp_m1() - g * q - head).max(0.0) + 1e-12 * (1.0 + g * q + head);
    let ln_x = (head + tail).ln() + (2.0 * inv).exp_m1().ln();
    let add = log_add(0.0, ln_x);
    remove.max(add).max(0.0) / (a - 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// dp_accounting's `test_compute_epsilon_delta_pure_dp`: RDP 1.1 at orders 2..=32,
    /// δ = 10⁻⁵ → ε = 1.32783806176 at order 32, and back.
    #[test]
    fn published_pure_dp_conversion() {
        let orders: Vec<f64> = (2..33).map(f64::from).collect();
        let mut acc = RdpAccountant::with_orders(&orders).unwrap();
        acc.rdp = vec![1.1; orders.len()];
        acc.pure_sum = None;
        let loss = acc.epsilon(1e-5).unwrap();
        assert!((loss.epsilon - 1.327_838_061_76).abs() < 1e-10, "{loss:?}");
        assert_eq!(loss.order, 32.0);
        let d = acc.delta(1.327_838_061_76).unwrap();
        assert!((d - 1e-5).abs() < 1e-12, "{d}");
    }

    /// dp_accounting's `test_compute_epsilon_delta_gaussian`: no subsampling, noise
    /// multiplier 4.530877117, orders 1.000 … 99.999 → (1, 10⁻⁶)-DP.
    #[test]
    fn published_gaussian_without_subsampling() {
        let orders: Vec<f64> = (1001..100_000).map(|i| 0.001 * f64::from(i)).collect();
        let mut acc = RdpAccountant::with_orders(&orders).unwrap();
        acc.compose_gaussian(4.530_877_117, 1).unwrap();
        let e = acc.epsilon(1e-6).unwrap().epsilon;
        assert!((e - 1.0).abs() < 1e-7, "{e}");
        let d = acc.delta(1.0).unwrap();
        assert!((d - 1e-6).abs() < 1e-12, "{d}");
        // tf-privacy's `test_compute_rdp_no_sampling`: q = 1, z = 10, order 20 → 0.1.
        let mut one = RdpAccountant::with_orders(&[20.0]).unwrap();
        one.compose_gaussian(10.0, 1).unwrap();
        assert_eq!(one.rdp()[0].1, 0.1);
    }

    /// The RDP bound sits between the optimal Gaussian δ (Balle & Wang 2018, Theorem 8)
    /// and the "standard" bound exp(−(ε − ½)²/2) for z = 1 (dp_accounting's
    /// `test_delta_bounds_gaussian`).
    #[test]
    fn gaussian_delta_between_optimal_and_standard() {
        let orders: Vec<f64> = (11..505).map(|x| 0.1 * f64::from(x)).collect();
        let mut acc = RdpAccountant::with_orders(&orders).unwrap();
        acc.compose_gaussian(1.0, 1).unwrap();
        let erfc = |x: f64| 2.0 * normal_sf(x * core::f64::consts::SQRT_2);
        for i in 0..500 {
            let eps = 0.1 * f64::from(i);
            let d = acc.delta(eps).unwrap();
            let optimal = erfc((eps - 0.5) / 2f64.sqrt()) / 2.0
                - eps.exp() * erfc((eps + 0.5) / 2f64.sqrt()) / 2.0;
            assert!(optimal <= d + 1e-300, "ε = {eps}: {optimal} > {d}");
            if eps >= 0.5 {
                assert!(d <= (-0.5 * (eps - 0.5) * (eps - 0.5)).exp() + 1e-300);
            }
        }
    }

    /// P(N(0,1) > x) by the complementary error function's continued fraction (test only).
    fn normal_sf(x: f64) -> f64 {
        if x < 0.0 {
            return 1.0 - normal_sf(-x);
        }
        // Abramowitz–Stegun 26.2.17 is too coarse in the tail; use a Lentz continued
        // fraction for x > 2 and the series otherwise.
        if x < 2.0 {
            let mut term = x;
            let mut sum = x;
            let mut k = 0.0;
            while term.abs() > 1e-17 * sum.abs() {
                k += 1.0;
                term *= x * x / (2.0 * k + 1.0);
                sum += term;
            }
            0.5 - sum * (-x * x / 2.0).exp() / (2.0 * core::f64::consts::PI).sqrt()
        } else {
            let mut f = x;
            let (mut c, mut d) = (x, 0.0);
            for k in 1..200 {
                let a = f64::from(k);
                d = x + a * d;
                d = 1.0 / d;
                c = x + a / c;
                let delta = c * d;
                f *= delta;
                if (delta - 1.0).abs() < 1e-16 {
                    break;
                }
            }
            (-x * x / 2.0).exp() / (2.0 * core::f64::consts::PI).sqrt() / f
        }
    }

    /// The remove direction alone (the MTZ sum), for comparison with published values.
    fn remove_only(z: f64, q: f64, alpha: u64) -> f64 {
        let inv = 1.0 / (2.0 * z * z);
        let mut ln_binom = 0.0f64;
        let mut acc = f64::NEG_INFINITY;
        for k in 0..=alpha {
            if k > 0 {
                ln_binom += ((alpha - k + 1) as f64).ln() - (k as f64).ln();
            }
            let kf = k as f64;
            acc = log_add(
                acc,
                ln_binom + (alpha - k) as f64 * (-q).ln_1p() + kf * q.ln() + kf * (kf - 1.0) * inv,
            );
        }
        acc / (alpha as f64 - 1.0)
    }

    /// D_α between two 1-D densities on a fine grid (continuous Gaussian mixtures).
    fn renyi_numeric(p: impl Fn(f64) -> f64, q: impl Fn(f64) -> f64, alpha: f64) -> f64 {
        let (lo, hi, steps) = (-40.0, 40.0, 400_000);
        let h = (hi - lo) / steps as f64;
        let mut sum = 0.0;
        for i in 0..=steps {
            let x = lo + i as f64 * h;
            let (a, b) = (p(x), q(x));
            if a > 0.0 && b > 0.0 {
                sum += (alpha * a.ln() + (1.0 - alpha) * b.ln()).exp() * h;
            }
        }
        sum.ln() / (alpha - 1.0)
    }

    /// tf-privacy's `test_compute_rdp_scalar` (q = 0.1, z = 2, 10 steps, order 5:
    /// 0.07737) and `test_compute_rdp_sequence` (q = 0.01, z = 2.5, 50 steps: order 5
    /// 2.1808e-3, order 50 2.3846e-2) for the remove direction; the accountant's value
    /// (the larger of both directions) is at least that, and both directions bound a
    /// numerical integration of the continuous Gaussian mixture from above.
    #[test]
    fn subsampled_gaussian_matches_published_values_and_bounds_both_directions() {
        assert!((10.0 * remove_only(2.0, 0.1, 5) - 0.07737).abs() < 1e-5);
        assert!((50.0 * remove_only(2.5, 0.01, 5) - 2.1808e-3).abs() < 1e-7);
        assert!((50.0 * remove_only(2.5, 0.01, 50) - 2.3846e-2).abs() < 1e-6);
        for (z, q, alpha) in [
            (2.0, 0.1, 5u64),
            (1.0, 0.05, 8),
            (0.8, 0.2, 3),
            (4.0, 0.01, 32),
        ] {
            let got = subsampled_gaussian_rdp(z, q, alpha as f64);
            assert!(got >= remove_only(z, q, alpha));
            let n0 = |x: f64| {
                (-x * x / (2.0 * z * z)).exp() / (z * (2.0 * core::f64::consts::PI).sqrt())
            };
            let n1 = |x: f64| n0(x - 1.0);
            let mix = |x: f64| (1.0 - q) * n0(x) + q * n1(x);
            let a = alpha as f64;
            let remove = renyi_numeric(mix, n0, a);
            let add = renyi_numeric(n0, mix, a);
            assert!(
                remove <= got * (1.0 + 1e-6) + 1e-12,
                "remove {remove} > {got}"
            );
            assert!(add <= got * (1.0 + 1e-6) + 1e-12, "add {add} > {got}");
            assert!((remove - remove_only(z, q, alpha)).abs() < 1e-6 * remove.max(1e-9));
        }
        // Non-integer orders are unused; q = 1 is the plain Gaussian.
        assert_eq!(subsampled_gaussian_rdp(1.0, 0.5, 2.5), f64::INFINITY);
        let mut a = RdpAccountant::with_orders(&[4.0]).unwrap();
        a.compose_subsampled_gaussian(2.0, 1.0, 3).unwrap();
        assert_eq!(a.rdp()[0].1, 3.0 * 4.0 / 8.0);
        // Calibration inverts the conversion, and amplification helps.
        let z = RdpAccountant::subsampled_noise_multiplier_for(1.0, 1e-5, 0.05, 200).unwrap();
        let mut b = RdpAccountant::new();
        b.compose_subsampled_gaussian(z, 0.05, 200).unwrap();
        let e = b.epsilon(1e-5).unwrap().epsilon;
        assert!(e <= 1.0 && e > 0.999, "{e}");
        assert!(z < RdpAccountant::noise_multiplier_for(1.0, 1e-5, 200).unwrap() / 5.0);
        assert!(
            RdpAccountant::new()
                .compose_subsampled_gaussian(1.0, 0.0, 1)
                .is_err()
        );
        assert!(
            RdpAccountant::new()
                .compose_subsampled_gaussian(1.0, 1.5, 1)
                .is_err()
        );
        assert!(
            RdpAccountant::new()
                .compose_subsampled_gaussian(f64::NAN, 0.5, 1)
                .is_err()
        );
    }

    #[test]
    fn pure_composition_and_noise_calibration() {
        let mut acc = RdpAccountant::new();
        acc.compose_pure(0.5, 4).unwrap();
        // Basic composition wins for few rounds.
        assert_eq!(acc.epsilon(1e-5).unwrap().epsilon, 2.0);
        assert_eq!(acc.delta(2.0).unwrap(), 0.0);
        // Many small pure rounds: the RDP route beats T·ε.
        let mut many = RdpAccountant::new();
        many.compose_pure(0.05, 1000).unwrap();
        assert!(many.epsilon(1e-5).unwrap().epsilon < 50.0 * 0.5);
        // Calibration inverts the conversion.
        for (eps, delta, count) in [(1.0, 1e-5, 1u64), (2.0, 1e-5, 15), (8.0, 1e-6, 100)] {
            let z = RdpAccountant::noise_multiplier_for(eps, delta, count).unwrap();
            let mut a = RdpAccountant::new();
            a.compose_gaussian(z, count).unwrap();
            let got = a.epsilon(delta).unwrap().epsilon;
            assert!(got <= eps && got > eps * 0.999, "{eps} {count}: {got}");
        }
        assert!(RdpAccountant::new().compose_gaussian(0.0, 1).is_err());
        assert!(RdpAccountant::new().compose_pure(f64::NAN, 1).is_err());
        assert!(RdpAccountant::new().epsilon(0.0).is_err());
        assert!(RdpAccountant::with_orders(&[1.0]).is_err());
    }
}
