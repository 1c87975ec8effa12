//! The exact discrete Gaussian distribution on ℤ (Canonne, Kamath and Steinke, *The
//! Discrete Gaussian for Differential Privacy*, NeurIPS 2020, Algorithm 3), beside the
//! exact discrete Laplace it is sampled from.
//!
//! N_ℤ(0, σ²): P(Z = z) = exp(−z²/(2σ²)) / Σ_{y∈ℤ} exp(−y²/(2σ²)).
//!
//! **Sampler (exact).** σ² is taken as an exact rational p/q (from an `f64` σ, exactly).
//! With t = ⌊σ⌋ + 1: draw Y from the discrete Laplace with scale t
//! ([`crate::DiscreteLaplace`], exact), accept with probability
//! exp(−(|Y| − σ²/t)²/(2σ²)) = exp(−(|Y|·q·t − p)²/(2·p·q·t²)) — a Bernoulli(e^(−γ)) for a
//! rational γ, drawn exactly with CKS Algorithm 1 on big integers — else repeat. The
//! accepted Y has exactly the law above (CKS Theorem 6; expected < 1/(1 − e^(−1)) + 1
//! rounds). Variable time: the loop counts depend on the noise (Jin et al. 2022), so the
//! sampler must run where its timing is not observed.
//!
//! **Privacy.** Adding N_ℤ(0, σ²) to each coordinate of an integer vector query with L2
//! sensitivity Δ satisfies (α, α·Δ²/(2σ²))-Rényi DP for every α > 1, i.e.
//! Δ²/(2σ²)-concentrated DP (CKS Theorem 14, the continuous Gaussian's bound) —
//! [`crate::RdpAccountant::compose_gaussian`] composes it. Proof and the conversion:
//! `docs/proofs/fl-ldp/discrete-gaussian.md`.

use num_bigint::{BigInt, BigRng010, BigUint, Sign};
use num_integer::Integer;
use num_traits::{One, ToPrimitive, Zero};
use rand::CryptoRng;

use crate::error::{Error, Result};
use crate::exact::{DiscreteLaplaceSampler, bernoulli_exp_integer};

/// Largest σ accepted (the discrete Laplace proposal's scale ⌊σ⌋ + 1 must fit the integer
/// sampler).
pub const MAX_SIGMA: f64 = 4_611_686_018_427_387_904.0; // 2^62

/// The discrete Gaussian N_ℤ(0, σ²): an exact sampler and its law from one σ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscreteGaussian {
    /// σ² = p / q exactly.
    p: BigUint,
    q: BigUint,
    /// t = ⌊σ⌋ + 1, the proposal's scale.
    t: u64,
    sigma: u64Bits,
}

/// σ as its f64 bits (so the type stays `Eq`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types)]
struct u64Bits(u64);

impl DiscreteGaussian {
    /// N_ℤ(0, σ²) for a finite σ with 0 < σ ≤ 2^62.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] when σ is NaN, infinite, ≤ 0 or above 2^62.
    pub fn new(sigma: f64) -> Result<Self> {
        if !(sigma.is_finite() && sigma > 0.0 && sigma <= MAX_SIGMA) {
            return Err(Error::InvalidParameter {
                name: "sigma",
                value: sigma,
                allowed: "a finite number in (0, 2^62]",
            });
        }
        // σ = m·2^e exactly (m odd or e = 0), so σ² = m²·2^(2e).
        let (m, e) = dyadic(sigma);
        let m2 = BigUint::from(m) * BigUint::from(m);
        let (p, q) = if e >= 0 {
            (m2 << (2 * e as u32), BigUint::one())
        } else {
            (m2, BigUint::one() << (2 * (-e) as u32))
        };
        // t = ⌊σ⌋ + 1 = ⌊√⌊p/q⌋⌋ + 1.
        let floor_sigma = (&p / &q).sqrt();
        let t =
            floor_sigma
                .to_u64()
                .and_then(|f| f.checked_add(1))
                .ok_or(Error::InvalidParameter {
                    name: "sigma",
                    value: sigma,
                    allowed: "a finite number in (0, 2^62]",
                })?;
        Ok(Self {
            p,
            q,
            t,
            sigma: u64Bits(sigma.to_bits()),
        })
    }

    /// σ.
    #[must_use]
    pub fn sigma(&self) -> f64 {
        f64::from_bits(self.sigma.0)
    }

    /// One exact sample (variable time; see the module docs).
    pub fn sample<R: CryptoRng + ?Sized>(&self, rng: &mut R) -> i128 {
        let laplace = DiscreteLaplaceSampler {
            numerator: self.t,
            denominator: 1,
        };
        let t = BigUint::from(self.t);
        let qt = &self.q * &t;
        let den = BigUint::from(2u8) * &self.p * &self.q * &t * &t;
        loop {
            let y = laplace.sample(rng);
            // γ = (|Y|·q·t − p)² / (2·p·q·t²).
            let a = BigInt::from_biguint(Sign::Plus, BigUint::from(y.unsigned_abs()) * &qt)
                - BigInt::from_biguint(Sign::Plus, self.p.clone());
            let num = a.magnitude() * a.magnitude();
            if bernoulli_exp_big(rng, &num, &den) {
                return y;
            }
        }
    }

    /// `count` independent samples.
    pub fn sample_many<R: CryptoRng + ?Sized>(&self, count: usize, rng: &mut R) -> Vec<i128> {
        (0..count).map(|_| self.sample(rng)).collect()
    }

    /// ln of the normalising constant Σ_{y∈ℤ} exp(−y²/(2σ²)): a direct sum for σ ≤ 1000
    /// (terms beyond 40σ are below e^(−800)), else Poisson summation
    /// σ√(2π)·(1 + 2Σ_k exp(−2π²σ²k²)) whose correction is below e^(−2·10^7).
    fn log_normaliser(&self) -> f64 {
        let s = self.sigma();
        if s <= 1000.0 {
            let two_s2 = 2.0 * s * s;
            let limit = (40.0 * s).ceil().max(40.0) as i64;
            let mut sum = 1.0;
            for y in 1..=limit {
                sum += 2.0 * (-((y * y) as f64) / two_s2).exp();
            }
            sum.ln()
        } else {
            s.ln() + 0.5 * (2.0 * core::f64::consts::PI).ln()
        }
    }

    /// ln P(Z = z).
    #[must_use]
    pub fn log_pmf(&self, z: i128) -> f64 {
        let s = self.sigma();
        let zf = z as f64;
        -(zf * zf) / (2.0 * s * s) - self.log_normaliser()
    }

    /// P(Z = z).
    #[must_use]
    pub fn pmf(&self, z: i128) -> f64 {
        self.log_pmf(z).exp()
    }

    /// P(Z ≤ z) by summing the smaller tail (the law is symmetric); exact to f64
    /// rounding for σ ≤ 1000, and for larger σ within the 40σ window it sums.
    #[must_use]
    pub fn cdf(&self, z: i128) -> f64 {
        if z < 0 {
            self.tail(z.unsigned_abs())
        } else {
            1.0 - self.tail(z.unsigned_abs() + 1)
        }
    }

    /// P(Z ≥ k) for k ≥ 0 (= P(Z ≤ −k)).
    #[must_use]
    pub fn tail(&self, k: u128) -> f64 {
        let s = self.sigma();
        let limit = k as f64 + (40.0 * s).ceil().max(40.0);
        let ln_z = self.log_normaliser();
        let mut sum = 0.0;
        let mut y = k as f64;
        while y <= limit {
            let term = (-(y * y) / (2.0 * s * s) - ln_z).exp();
            sum += term;
            if term < sum * 1e-18 && y > k as f64 + 1.0 {
                break;
            }
            y += 1.0;
        }
        sum
    }

    /// Rényi divergence of order α between N_ℤ(μ, σ²) and N_ℤ(ν, σ²) for integers with
    /// |μ − ν| ≤ Δ is at most α·Δ²/(2σ²) (CKS Proposition 5; equality for the continuous
    /// Gaussian): this mechanism's RDP curve for one coordinate of sensitivity `delta`.
    #[must_use]
    pub fn renyi_divergence_bound(&self, alpha: f64, delta: f64) -> f64 {
        let s = self.sigma();
        alpha * delta * delta / (2.0 * s * s)
    }
}

/// x = m·2^e exactly with m an integer (x finite, > 0).
fn dyadic(x: f64) -> (u64, i32) {
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1u64 << 52) - 1);
    let (mut m, mut e) = if exp == 0 {
        (frac, -1074)
    } else {
        (frac | (1u64 << 52), exp - 1075)
    };
    while m != 0 && m & 1 == 0 {
        m >>= 1;
        e += 1;
    }
    (m, e)
}

/// Bernoulli(exp(−num/den)) for big integers num ≥ 0, den ≥ 1 (CKS20 Algorithm 1 on the
/// fractional part, e^(−1) coins for the integer part).
pub(crate) fn bernoulli_exp_big<R: CryptoRng + ?Sized>(
    rng: &mut R,
    num: &BigUint,
    den: &BigUint,
) -> bool {
    let (whole, rest) = num.div_rem(den);
    let whole = whole.to_u64().unwrap_or(u64::MAX);
    if !bernoulli_exp_integer(rng, whole) {
        return false;
    }
    if rest.is_zero() {
        return true;
    }
    // γ = rest/den ∈ (0, 1): A_k ~ Bernoulli(γ/k) until the first A_k = 0; heads iff k odd.
    let mut k: u64 = 1;
    loop {
        let bound = den * BigUint::from(k);
        let u = rng.random_biguint_below(&bound);
        if u >= rest {
            break;
        }
        k += 1;
    }
    k % 2 == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigma_is_taken_exactly_and_validated() {
        let g = DiscreteGaussian::new(1.5).unwrap();
        assert_eq!(
            (g.p.clone(), g.q.clone(), g.t),
            (BigUint::from(9u8), BigUint::from(4u8), 2)
        );
        let g = DiscreteGaussian::new(3.0).unwrap();
        assert_eq!(
            (g.p.clone(), g.q.clone(), g.t),
            (BigUint::from(9u8), BigUint::one(), 4)
        );
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e30] {
            assert!(DiscreteGaussian::new(bad).is_err(), "{bad}");
        }
        // The law sums to one.
        for s in [0.3, 1.0, 7.5, 2000.0] {
            let g = DiscreteGaussian::new(s).unwrap();
            let total = g.tail(0) + g.tail(1);
            assert!((total - 1.0).abs() < 1e-12, "σ = {s}: {total}");
        }
    }
}
