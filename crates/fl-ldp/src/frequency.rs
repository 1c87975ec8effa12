//! Frequency oracles: locally private frequency estimation over k values (Wang, Blocki,
//! Li and Jha, *Locally Differentially Private Protocols for Frequency Estimation*, USENIX
//! Security 2017): generalised randomized response (GRR), optimized unary encoding (OUE)
//! and optimized local hashing (OLH), each with its law, the unbiased estimator
//! ĉ_v = (C_v − n·q)/(p − q) and its closed-form variance, and [`FrequencyOracle::best`]
//! choosing the protocol with the smallest variance.
//!
//! **Privacy claim.** Every oracle built with ε is ε-LDP for any two input values
//! ([`Neighbouring::AnyTwoInputs`]); for OLH the claim holds for every fixed hash seed (the
//! seed is drawn independently of the value). The realised ε is reported and never exceeds
//! ε. Proof: `docs/proofs/fl-ldp/frequency-oracles.md`.

use rand::CryptoRng;

use crate::binary::BinaryRandomizedResponse;
use crate::coin::Bernoulli;
use crate::epsilon::Epsilon;
use crate::error::{Error, Result};
use crate::kary::KaryRandomizedResponse;
use crate::mechanism::{
    BitProduct, FiniteInputs, FiniteOutputs, Mechanism, Neighbouring, PrivacyClaim,
};

/// A protocol of [`FrequencyOracle`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrequencyProtocol {
    /// Generalised randomized response (k-ary RR): best when k < 3e^ε + 2.
    Grr,
    /// Optimized unary encoding: one-hot, 1 kept w.p. 1/2, 0 → 1 w.p. 1/(e^ε + 1).
    Oue,
    /// Optimized local hashing: hash to g ≈ e^ε + 1 buckets, then GRR on the bucket.
    Olh,
}

/// Optimized unary encoding (OUE): the value is one-hot encoded in k bits; the hot bit is
/// reported as 1 with probability 1/2, every other bit as 1 with probability
/// q = 1/(e^ε + 1) (rounded up). A product mechanism with bit outputs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OptimizedUnaryEncoding {
    epsilon: Epsilon,
    categories: usize,
    /// The 0 → 1 coin (the flip coin of binary RR at ε).
    zero_to_one: Bernoulli,
    realised: f64,
}

impl OptimizedUnaryEncoding {
    /// OUE over `categories` values.
    ///
    /// # Errors
    /// [`Error::InvalidCount`] unless 2 ≤ k ≤ 2^24.
    pub fn new(epsilon: Epsilon, categories: usize) -> Result<Self> {
        check_categories(categories)?;
        let rr = BinaryRandomizedResponse::new(epsilon);
        Ok(Self {
            epsilon,
            categories,
            zero_to_one: *rr.flip_coin(),
            realised: rr.realised_epsilon(),
        })
    }

    /// p = 1/2, q = P(0 → 1).
    #[must_use]
    pub fn support_probabilities(&self) -> (f64, f64) {
        (0.5, self.zero_to_one.probability())
    }

    /// Encodes and randomizes one value.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] when `value ≥ k`.
    pub fn randomize<R: CryptoRng + ?Sized>(&self, value: usize, rng: &mut R) -> Result<Vec<bool>> {
        check_value(value, self.categories)?;
        Ok((0..self.categories)
            .map(|j| {
                let fair = rng.next_u64() >> 63 == 1;
                let r = rng.next_u64();
                let noise = self.zero_to_one.flip_with_word(r, rng);
                // Both coins are drawn for every bit; the hot bit takes the fair one.
                if j == value { fair } else { noise }
            })
            .collect())
    }
}

impl Mechanism for OptimizedUnaryEncoding {
    type Input = usize;
    type Output = Vec<bool>;

    fn sample<R: CryptoRng + ?Sized>(&self, input: &usize, rng: &mut R) -> Result<Vec<bool>> {
        self.randomize(*input, rng)
    }

    fn privacy(&self) -> PrivacyClaim {
        PrivacyClaim::pure(
            self.epsilon.value(),
            self.realised,
            Neighbouring::AnyTwoInputs,
        )
    }
}

impl BitProduct for OptimizedUnaryEncoding {
    fn one_probabilities(&self, input: &usize) -> Result<Vec<f64>> {
        check_value(*input, self.categories)?;
        let (p, q) = self.support_probabilities();
        Ok((0..self.categories)
            .map(|j| if j == *input { p } else { q })
            .collect())
    }
}

/// One OLH report: the hash seed and the randomized bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OlhReport {
    /// The hash function's index: uniform in `0..g^(m+1)` (base-g digits b, a_1, …, a_m).
    pub seed: u128,
    /// The reported bucket in `0..g`.
    pub bucket: u64,
}

/// Optimized local hashing (OLH): each user draws a hash function H from a pairwise
/// independent family into g buckets (g a prime ≈ e^ε + 1) and reports (H, GRR_g(H(x))).
///
/// The family: write v in base g with m digits v_1..v_m; H_{b,a}(v) = (b + Σ a_i·v_i) mod g
/// with b, a_i uniform in 0..g. For g prime, H(v) − H(x) is uniform and independent of H(x)
/// for v ≠ x, so the estimator's q = 1/g holds exactly.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OptimizedLocalHashing {
    epsilon: Epsilon,
    categories: usize,
    buckets: u64,
    digits: u32,
    seeds: u128,
    grr: KaryRandomizedResponse,
}

/// The largest bucket count: 1048573, the largest prime below 2^20 (OLH is only useful
/// for e^ε + 1 well below k; a smaller g keeps ε-LDP and only costs variance).
const MAX_BUCKETS: u64 = 1_048_573;

/// The largest number of values a frequency oracle accepts (its counters hold one entry
/// per value): [`MAX_LAW_OUTPUTS`](crate::mechanism::MAX_LAW_OUTPUTS) = 2^24.
pub const MAX_FREQUENCY_CATEGORIES: usize = crate::mechanism::MAX_LAW_OUTPUTS;

fn is_prime(n: u64) -> bool {
    if n < 2 {
        return false;
    }
    let mut d = 2u64;
    while d * d <= n {
        if n.is_multiple_of(d) {
            return false;
        }
        d += 1;
    }
    true
}

impl OptimizedLocalHashing {
    /// OLH over `categories` values; g is the smallest prime ≥ round(e^ε) + 1 (at most
    /// 1048573, the largest prime below 2^20).
    ///
    /// # Errors
    /// [`Error::InvalidCount`] unless 2 ≤ k ≤ 2^24.
    pub fn new(epsilon: Epsilon, categories: usize) -> Result<Self> {
        check_categories(categories)?;
        let target = epsilon.value().exp().round() + 1.0;
        let mut g = if target >= MAX_BUCKETS as f64 {
            MAX_BUCKETS
        } else {
            (target as u64).max(2)
        };
        while !is_prime(g) {
            g += 1;
        }
        let mut digits = 1u32;
        let mut span = u128::from(g);
        while span < categories as u128 {
            span *= u128::from(g);
            digits += 1;
        }
        let grr = KaryRandomizedResponse::new(epsilon, g as usize)?;
        Ok(Self {
            epsilon,
            categories,
            buckets: g,
            digits,
            seeds: span * u128::from(g),
            grr,
        })
    }

    /// The number of buckets g.
    #[must_use]
    pub const fn buckets(&self) -> u64 {
        self.buckets
    }

    /// p = P(report supports the true value) = GRR_g keep probability; q = 1/g.
    #[must_use]
    pub fn support_probabilities(&self) -> (f64, f64) {
        (self.grr.keep_probability(), 1.0 / self.buckets as f64)
    }

    /// The hash of `value` under `seed` (`None` if the seed is out of range).
    #[must_use]
    pub fn hash(&self, seed: u128, value: usize) -> Option<u64> {
        if seed >= self.seeds {
            return None;
        }
        let g = u128::from(self.buckets);
        let mut rest = seed;
        let mut acc = rest % g;
        rest /= g;
        let mut v = value as u128;
        for _ in 0..self.digits {
            let a = rest % g;
            rest /= g;
            acc = (acc + a * (v % g)) % g;
            v /= g;
        }
        Some(acc as u64)
    }

    /// The law of the reported bucket for `value` given the seed: g-ary RR on H(value).
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] for a value ≥ k or a seed ≥ g^(m+1).
    pub fn bucket_law(&self, value: usize, seed: u128) -> Result<Vec<f64>> {
        check_value(value, self.categories)?;
        let h = self.hash(seed, value).ok_or(Error::IndexOutOfRange {
            name: "seed",
            index: usize::MAX,
            bound: usize::MAX,
        })?;
        (0..self.buckets as usize)
            .map(|y| self.grr.probability(h as usize, y))
            .collect()
    }

    /// Draws a hash seed uniformly and randomizes one value.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] when `value ≥ k`.
    pub fn randomize<R: CryptoRng + ?Sized>(&self, value: usize, rng: &mut R) -> Result<OlhReport> {
        check_value(value, self.categories)?;
        let bits = 128 - (self.seeds - 1).leading_zeros();
        let seed = loop {
            let raw = (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64());
            let candidate = if bits >= 128 {
                raw
            } else {
                raw & ((1u128 << bits) - 1)
            };
            if candidate < self.seeds {
                break candidate;
            }
        };
        let h = self.hash(seed, value).unwrap_or(0);
        let bucket = self.grr.randomize(h as usize, rng)? as u64;
        Ok(OlhReport { seed, bucket })
    }
}

impl Mechanism for OptimizedLocalHashing {
    type Input = usize;
    type Output = OlhReport;

    fn sample<R: CryptoRng + ?Sized>(&self, input: &usize, rng: &mut R) -> Result<OlhReport> {
        self.randomize(*input, rng)
    }

    fn privacy(&self) -> PrivacyClaim {
        PrivacyClaim::pure(
            self.epsilon.value(),
            self.grr.realised_epsilon(),
            Neighbouring::AnyTwoInputs,
        )
    }
}

impl OptimizedLocalHashing {
    /// The number of hash seeds g^(m+1) (each report's seed is uniform below it).
    #[must_use]
    pub const fn seed_count(&self) -> u128 {
        self.seeds
    }

    /// The number of (seed, bucket) reports, g^(m+1)·g, if an explicit law may list them.
    fn report_count(&self) -> Result<usize> {
        let count = self.seeds.saturating_mul(u128::from(self.buckets));
        usize::try_from(count)
            .ok()
            .filter(|&c| c <= crate::mechanism::MAX_LAW_OUTPUTS)
            .ok_or(Error::InvalidCount {
                name: "OLH reports (seeds x buckets, for an explicit law)",
                value: i128::try_from(count).unwrap_or(i128::MAX),
                allowed: "at most 2^24",
            })
    }
}

/// OLH's exact law over whole reports, for auditors (small k and ε): report (seed, bucket)
/// is output number seed·g + bucket, with probability (1/g^(m+1))·GRR_g(H_seed(x))\[bucket\].
/// Refused when g^(m+1)·g exceeds [`MAX_LAW_OUTPUTS`](crate::mechanism::MAX_LAW_OUTPUTS).
impl FiniteOutputs for OptimizedLocalHashing {
    fn output_count(&self, input: &usize) -> Result<usize> {
        check_value(*input, self.categories)?;
        self.report_count()
    }

    fn output_index(&self, output: &OlhReport) -> Result<usize> {
        let count = self.report_count()?;
        if output.seed >= self.seeds || output.bucket >= self.buckets {
            return Err(Error::IndexOutOfRange {
                name: "report",
                index: usize::MAX,
                bound: count,
            });
        }
        // < count ≤ 2^24: the conversions are exact.
        Ok(output.seed as usize * self.buckets as usize + output.bucket as usize)
    }

    fn output_probabilities(&self, input: &usize) -> Result<Vec<f64>> {
        let count = self.output_count(input)?;
        let per_seed = 1.0 / self.seeds as f64;
        let mut law = Vec::with_capacity(count);
        for seed in 0..self.seeds {
            law.extend(
                self.bucket_law(*input, seed)?
                    .into_iter()
                    .map(|p| per_seed * p),
            );
        }
        Ok(law)
    }
}

/// The input domain 0..k (every pair of values is a pair of neighbours).
impl FiniteInputs for OptimizedLocalHashing {
    fn inputs(&self) -> Result<Vec<usize>> {
        Ok((0..self.categories).collect())
    }
}

/// The input domain 0..k (every pair of values is a pair of neighbours).
impl FiniteInputs for OptimizedUnaryEncoding {
    fn inputs(&self) -> Result<Vec<usize>> {
        Ok((0..self.categories).collect())
    }
}

fn check_categories(categories: usize) -> Result<()> {
    if !(2..=MAX_FREQUENCY_CATEGORIES).contains(&categories) {
        return Err(Error::InvalidCount {
            name: "categories",
            value: categories as i128,
            allowed: "between 2 and 2^24",
        });
    }
    Ok(())
}

fn check_value(value: usize, categories: usize) -> Result<()> {
    if value >= categories {
        return Err(Error::IndexOutOfRange {
            name: "value",
            index: value,
            bound: categories,
        });
    }
    Ok(())
}

/// A report of any [`FrequencyOracle`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Report {
    /// GRR: the reported value.
    Grr(usize),
    /// OUE: the reported bit vector.
    Oue(Vec<bool>),
    /// OLH: seed and bucket.
    Olh(OlhReport),
}

/// A frequency oracle: one of GRR, OUE, OLH over k values at ε.
///
/// ```
/// use fl_ldp::{Epsilon, FrequencyOracle, FrequencyProtocol};
/// use rand::{SeedableRng, rngs::ChaCha20Rng};
///
/// let eps = Epsilon::new(1.0)?;
/// // k = 4 < 3e + 2: GRR has the smallest variance; k = 100: OUE/OLH.
/// assert_eq!(FrequencyOracle::best(eps, 4)?.protocol(), FrequencyProtocol::Grr);
/// assert_ne!(FrequencyOracle::best(eps, 100)?.protocol(), FrequencyProtocol::Grr);
/// let oracle = FrequencyOracle::new(eps, 4, FrequencyProtocol::Oue)?;
/// let mut rng = ChaCha20Rng::seed_from_u64(10); // fixed seed: example only
/// let mut counts = oracle.support_counter();
/// for i in 0..2000 {
///     let report = oracle.randomize(if i % 4 == 0 { 3 } else { 0 }, &mut rng)?;
///     counts.add(&report)?;
/// }
/// let estimate = counts.estimate();
/// let sd = oracle.variance(2000, 500.0).sqrt();
/// assert!((estimate[3] - 500.0).abs() < 5.0 * sd);
/// # Ok::<(), fl_ldp::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum FrequencyOracle {
    /// Generalised randomized response.
    Grr(KaryRandomizedResponse),
    /// Optimized unary encoding.
    Oue(OptimizedUnaryEncoding),
    /// Optimized local hashing.
    Olh(OptimizedLocalHashing),
}

impl FrequencyOracle {
    /// The oracle of `protocol` over `categories` values.
    ///
    /// # Errors
    /// [`Error::InvalidCount`] unless 2 ≤ k ≤ 2^24.
    pub fn new(epsilon: Epsilon, categories: usize, protocol: FrequencyProtocol) -> Result<Self> {
        check_categories(categories)?;
        Ok(match protocol {
            FrequencyProtocol::Grr => Self::Grr(KaryRandomizedResponse::new(epsilon, categories)?),
            FrequencyProtocol::Oue => Self::Oue(OptimizedUnaryEncoding::new(epsilon, categories)?),
            FrequencyProtocol::Olh => Self::Olh(OptimizedLocalHashing::new(epsilon, categories)?),
        })
    }

    /// The protocol with the smallest per-value variance q(1 − q)/(p − q)² (for the
    /// realised p, q); ties go to GRR, then OUE.
    ///
    /// # Errors
    /// [`Error::InvalidCount`] unless 2 ≤ k ≤ 2^24.
    pub fn best(epsilon: Epsilon, categories: usize) -> Result<Self> {
        let mut best: Option<(f64, Self)> = None;
        for protocol in [
            FrequencyProtocol::Grr,
            FrequencyProtocol::Oue,
            FrequencyProtocol::Olh,
        ] {
            let oracle = Self::new(epsilon, categories, protocol)?;
            let v = oracle.variance(1, 0.0);
            if best.as_ref().is_none_or(|(b, _)| v < *b) {
                best = Some((v, oracle));
            }
        }
        best.map(|(_, o)| o).ok_or(Error::InvalidCount {
            name: "categories",
            value: categories as i128,
            allowed: "between 2 and 2^24",
        })
    }

    /// The protocol.
    #[must_use]
    pub const fn protocol(&self) -> FrequencyProtocol {
        match self {
            Self::Grr(_) => FrequencyProtocol::Grr,
            Self::Oue(_) => FrequencyProtocol::Oue,
            Self::Olh(_) => FrequencyProtocol::Olh,
        }
    }

    /// The number of values k.
    #[must_use]
    pub const fn categories(&self) -> usize {
        match self {
            Self::Grr(m) => m.categories(),
            Self::Oue(m) => m.categories,
            Self::Olh(m) => m.categories,
        }
    }

    /// (p, q): the probability that a report supports the user's own value, and any
    /// other given value.
    #[must_use]
    pub fn support_probabilities(&self) -> (f64, f64) {
        match self {
            Self::Grr(m) => (m.keep_probability(), m.other_probability()),
            Self::Oue(m) => m.support_probabilities(),
            Self::Olh(m) => m.support_probabilities(),
        }
    }

    /// The exact variance of the estimated count of a value held by `true_count` of `n`
    /// users: n·q(1 − q)/(p − q)² + true_count·(1 − p − q)/(p − q). Infinite at ε = 0.
    #[must_use]
    pub fn variance(&self, n: u64, true_count: f64) -> f64 {
        let (p, q) = self.support_probabilities();
        let gap = p - q;
        if gap <= 0.0 {
            return f64::INFINITY;
        }
        n as f64 * q * (1.0 - q) / (gap * gap) + true_count * (1.0 - p - q) / gap
    }

    /// The privacy claim.
    #[must_use]
    pub fn privacy(&self) -> PrivacyClaim {
        match self {
            Self::Grr(m) => m.privacy(),
            Self::Oue(m) => m.privacy(),
            Self::Olh(m) => m.privacy(),
        }
    }

    /// Randomizes one value.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] when `value ≥ k`.
    pub fn randomize<R: CryptoRng + ?Sized>(&self, value: usize, rng: &mut R) -> Result<Report> {
        Ok(match self {
            Self::Grr(m) => Report::Grr(m.randomize(value, rng)?),
            Self::Oue(m) => Report::Oue(m.randomize(value, rng)?),
            Self::Olh(m) => Report::Olh(m.randomize(value, rng)?),
        })
    }

    /// Whether `report` supports `value` (C_v counts the reports supporting v).
    #[must_use]
    pub fn supports(&self, report: &Report, value: usize) -> bool {
        match (self, report) {
            (Self::Grr(_), Report::Grr(y)) => *y == value,
            (Self::Oue(_), Report::Oue(bits)) => bits.get(value).copied().unwrap_or(false),
            (Self::Olh(m), Report::Olh(r)) => m.hash(r.seed, value) == Some(r.bucket),
            _ => false,
        }
    }

    /// The unbiased count estimates ĉ_v = (C_v − n·q)/(p − q) from support counts C_v
    /// (`support_counts[v]` reports supported v) of `reports` reports — the estimator of
    /// [`SupportCounter::estimate`], for counts accumulated elsewhere (merged from several
    /// aggregators, or by an auditor). All-zero at ε = 0, where nothing can be estimated.
    ///
    /// # Errors
    /// [`Error::InvalidCount`] unless there is one count per value;
    /// [`Error::InputOutOfDomain`] when a count exceeds `reports`.
    pub fn estimate(&self, support_counts: &[u64], reports: u64) -> Result<Vec<f64>> {
        if support_counts.len() != self.categories() {
            return Err(Error::InvalidCount {
                name: "support counts",
                value: support_counts.len() as i128,
                allowed: "one count per value (k)",
            });
        }
        if let Some(v) = support_counts.iter().position(|&c| c > reports) {
            return Err(Error::InputOutOfDomain {
                name: "support counts",
                index: v,
                value: support_counts[v] as f64,
                allowed: "at most the number of reports",
            });
        }
        Ok(estimate_from(
            self.support_probabilities(),
            support_counts,
            reports,
        ))
    }

    /// An empty support counter for this oracle.
    #[must_use]
    pub fn support_counter(&self) -> SupportCounter {
        SupportCounter {
            oracle: *self,
            counts: vec![0; self.categories()],
            reports: 0,
        }
    }
}

/// Accumulates the support counts C_v of reports and produces the unbiased estimates.
#[derive(Debug, Clone, PartialEq)]
pub struct SupportCounter {
    oracle: FrequencyOracle,
    counts: Vec<u64>,
    reports: u64,
}

impl SupportCounter {
    /// Adds one report.
    ///
    /// # Errors
    /// [`Error::InputOutOfDomain`] when the report does not belong to this oracle's
    /// protocol or is malformed (value ≥ k, wrong bit-vector length, seed or bucket out of
    /// range). The counter is unchanged on error.
    pub fn add(&mut self, report: &Report) -> Result<()> {
        let k = self.oracle.categories();
        let valid = match (&self.oracle, report) {
            (FrequencyOracle::Grr(_), Report::Grr(y)) => *y < k,
            (FrequencyOracle::Oue(_), Report::Oue(bits)) => bits.len() == k,
            (FrequencyOracle::Olh(m), Report::Olh(r)) => r.seed < m.seeds && r.bucket < m.buckets,
            _ => false,
        };
        if !valid {
            return Err(Error::InputOutOfDomain {
                name: "report",
                index: usize::try_from(self.reports).unwrap_or(usize::MAX),
                value: f64::NAN,
                allowed: "a well-formed report of this oracle's protocol",
            });
        }
        for (v, c) in self.counts.iter_mut().enumerate() {
            *c += u64::from(self.oracle.supports(report, v));
        }
        self.reports += 1;
        Ok(())
    }

    /// The number of reports added.
    #[must_use]
    pub const fn reports(&self) -> u64 {
        self.reports
    }

    /// The support counts C_v.
    #[must_use]
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// The unbiased count estimates ĉ_v = (C_v − n·q)/(p − q) (NaN-free: all-zero at ε = 0,
    /// where nothing can be estimated; check [`FrequencyOracle::variance`]).
    #[must_use]
    pub fn estimate(&self) -> Vec<f64> {
        estimate_from(
            self.oracle.support_probabilities(),
            &self.counts,
            self.reports,
        )
    }
}

/// ĉ_v = (C_v − n·q)/(p − q), all-zero when p ≤ q (ε = 0): the one place the formula lives.
fn estimate_from((p, q): (f64, f64), counts: &[u64], reports: u64) -> Vec<f64> {
    let gap = p - q;
    let n = reports as f64;
    counts
        .iter()
        .map(|&c| {
            if gap > 0.0 {
                (c as f64 - n * q) / gap
            } else {
                0.0
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{SeedableRng, rngs::ChaCha20Rng};

    fn eps(e: f64) -> Epsilon {
        Epsilon::new(e).unwrap()
    }

    #[test]
    fn variances_match_the_paper() {
        for e in [0.5, 1.0, 2.0, 4.0] {
            let ee = f64::exp(e);
            let grr = FrequencyOracle::new(eps(e), 10, FrequencyProtocol::Grr).unwrap();
            let want = (ee + 10.0 - 2.0) / ((ee - 1.0) * (ee - 1.0));
            assert!((grr.variance(1, 0.0) / want - 1.0).abs() < 1e-12, "{e}");
            let oue = FrequencyOracle::new(eps(e), 10, FrequencyProtocol::Oue).unwrap();
            let want = 4.0 * ee / ((ee - 1.0) * (ee - 1.0));
            assert!((oue.variance(1, 0.0) / want - 1.0).abs() < 1e-12, "{e}");
            let olh = FrequencyOracle::new(eps(e), 10, FrequencyProtocol::Olh).unwrap();
            // g is a prime near e^ε + 1, so OLH is close to (not below) the OUE variance.
            assert!(olh.variance(1, 0.0) >= want * 0.999, "{e}");
        }
    }

    #[test]
    fn best_follows_the_variance_rule() {
        for (e, k) in [
            (1.0, 2),
            (1.0, 4),
            (1.0, 10),
            (1.0, 100),
            (4.0, 100),
            (4.0, 1000),
        ] {
            let best = FrequencyOracle::best(eps(e), k).unwrap();
            for protocol in [
                FrequencyProtocol::Grr,
                FrequencyProtocol::Oue,
                FrequencyProtocol::Olh,
            ] {
                let other = FrequencyOracle::new(eps(e), k, protocol).unwrap();
                assert!(best.variance(1, 0.0) <= other.variance(1, 0.0));
            }
            let grr_wins = (k as f64) < 3.0 * f64::exp(e) + 2.0;
            assert_eq!(
                best.protocol() == FrequencyProtocol::Grr,
                grr_wins,
                "{e} {k}"
            );
        }
    }

    #[test]
    fn olh_hash_family_is_pairwise_uniform() {
        assert_eq!(
            OptimizedLocalHashing::new(eps(1e6), 10).unwrap().buckets(),
            MAX_BUCKETS
        );
        let m = OptimizedLocalHashing::new(eps(1.0), 10).unwrap();
        let g = m.buckets();
        assert_eq!(g, 5); // round(e) + 1 = 4 → next prime 5
        assert_eq!(m.digits, 2);
        // Over all seeds, H(v) − H(x) is uniform for v ≠ x.
        for (x, v) in [(0usize, 1usize), (3, 9), (7, 2)] {
            let mut hist = vec![0u64; g as usize];
            for seed in 0..m.seeds {
                let d = (m.hash(seed, v).unwrap() + g - m.hash(seed, x).unwrap()) % g;
                hist[d as usize] += 1;
            }
            assert!(hist.iter().all(|&c| c == hist[0]), "{hist:?}");
        }
        assert_eq!(m.hash(m.seeds, 0), None);
        let law = m.bucket_law(3, 17).unwrap();
        assert!((law.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!(m.bucket_law(10, 0).is_err());
        assert!(m.bucket_law(1, m.seeds).is_err());
    }

    #[test]
    fn estimates_are_unbiased_for_every_protocol() {
        let mut rng = ChaCha20Rng::seed_from_u64(21);
        let n = 20_000u64;
        let truth = [0.5, 0.3, 0.2, 0.0];
        for protocol in [
            FrequencyProtocol::Grr,
            FrequencyProtocol::Oue,
            FrequencyProtocol::Olh,
        ] {
            let oracle = FrequencyOracle::new(eps(2.0), 4, protocol).unwrap();
            let mut counter = oracle.support_counter();
            for i in 0..n {
                let u = i as f64 / n as f64;
                let value = if u < 0.5 {
                    0
                } else if u < 0.8 {
                    1
                } else {
                    2
                };
                counter
                    .add(&oracle.randomize(value, &mut rng).unwrap())
                    .unwrap();
            }
            let est = counter.estimate();
            for (v, (&e, &f)) in est.iter().zip(&truth).enumerate() {
                let sd = oracle.variance(n, f * n as f64).sqrt();
                let z = (e - f * n as f64) / sd;
                assert!(z.abs() < 4.89, "{protocol:?} value {v}: z = {z}");
            }
            // Negative control: a 15 % error in the count of value 0 is detected.
            let sd = oracle.variance(n, 0.5 * n as f64).sqrt();
            assert!(
                ((est[0] - 0.425 * n as f64) / sd).abs() > 4.89,
                "{protocol:?} {est:?} sd {sd}"
            );
            assert_eq!(counter.reports(), n);
            // The estimator on counts accumulated elsewhere is the counter's estimator.
            assert_eq!(oracle.estimate(counter.counts(), n).unwrap(), est);
            assert!(oracle.estimate(&counter.counts()[..3], n).is_err());
            assert!(oracle.estimate(counter.counts(), 10).is_err());
        }
    }

    /// OLH's law over whole reports sums to 1, realises at most the claimed ε (and
    /// reaches it), and the sampler follows it (chi-square at α = 1e-6, with a negative
    /// control: the law at another ε).
    #[test]
    fn olh_report_law_is_exact_and_sampled() {
        use crate::mechanism::law_epsilon;
        use fl_stats::{Alpha, HypothesisTest, chi_square_gof};
        let alpha = Alpha::new(1e-6).unwrap();
        let m = OptimizedLocalHashing::new(eps(1.0), 6).unwrap();
        assert_eq!((m.buckets(), m.seed_count()), (5, 125));
        assert_eq!(m.inputs().unwrap(), (0..6).collect::<Vec<_>>());
        let law = m.output_probabilities(&2).unwrap();
        assert_eq!(law.len(), 625);
        assert!((law.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        let worst = law_epsilon(&m).unwrap();
        assert!(
            worst <= m.privacy().epsilon + 1e-12 && worst > 1.0 - 1e-9,
            "{worst}"
        );
        let mut rng = ChaCha20Rng::seed_from_u64(24);
        let counts = m.sample_counts(&2, 200_000, &mut rng).unwrap();
        let t = chi_square_gof(&counts, &law).unwrap();
        assert!(!t.rejects(alpha), "p = {}", t.p_value);
        let wrong = OptimizedLocalHashing::new(eps(1.2), 6)
            .unwrap()
            .output_probabilities(&2)
            .unwrap();
        let t = chi_square_gof(&counts, &wrong).unwrap();
        assert!(t.rejects(alpha), "control p = {}", t.p_value);
        let r = m.randomize(2, &mut rng).unwrap();
        assert_eq!(
            m.output_index(&r).unwrap(),
            r.seed as usize * 5 + r.bucket as usize
        );
        for bad in [
            OlhReport {
                seed: 125,
                bucket: 0,
            },
            OlhReport { seed: 0, bucket: 5 },
        ] {
            assert!(m.output_index(&bad).is_err());
        }
        assert!(m.output_probabilities(&6).is_err());
        // Too many reports for an explicit law: refused, sampling still works.
        let big = OptimizedLocalHashing::new(eps(1.0), 1 << 20).unwrap();
        assert!(big.output_count(&0).is_err());
        assert!(big.output_index(&OlhReport { seed: 0, bucket: 0 }).is_err());
        assert!(big.randomize(0, &mut rng).is_ok());
        assert_eq!(
            OptimizedUnaryEncoding::new(eps(1.0), 3)
                .unwrap()
                .inputs()
                .unwrap(),
            vec![0, 1, 2]
        );
    }

    #[test]
    fn malformed_reports_and_values() {
        let mut rng = ChaCha20Rng::seed_from_u64(22);
        for protocol in [
            FrequencyProtocol::Grr,
            FrequencyProtocol::Oue,
            FrequencyProtocol::Olh,
        ] {
            let oracle = FrequencyOracle::new(eps(1.0), 5, protocol).unwrap();
            assert!(oracle.randomize(5, &mut rng).is_err());
            let mut c = oracle.support_counter();
            // Out of range for this oracle, or of another protocol: all rejected.
            for bad in [
                Report::Grr(5),
                Report::Oue(vec![true; 4]),
                Report::Olh(OlhReport {
                    seed: u128::MAX,
                    bucket: 0,
                }),
            ] {
                assert!(c.add(&bad).is_err(), "{protocol:?} {bad:?}");
            }
            assert_eq!(c.reports(), 0);
            assert!(FrequencyOracle::new(eps(1.0), 1, protocol).is_err());
            assert!(
                FrequencyOracle::new(eps(1.0), MAX_FREQUENCY_CATEGORIES + 1, protocol).is_err()
            );
        }
        let zero = FrequencyOracle::new(eps(0.0), 3, FrequencyProtocol::Grr).unwrap();
        assert_eq!(zero.variance(10, 0.0), f64::INFINITY);
        assert_eq!(zero.support_counter().estimate(), vec![0.0; 3]);
    }

    #[test]
    fn stable_at_extreme_epsilons() {
        let mut rng = ChaCha20Rng::seed_from_u64(23);
        for e in [0.0, 1e-12, 50.0, 700.0, 1e6] {
            for protocol in [
                FrequencyProtocol::Grr,
                FrequencyProtocol::Oue,
                FrequencyProtocol::Olh,
            ] {
                let oracle = FrequencyOracle::new(eps(e), 6, protocol).unwrap();
                let c = oracle.privacy();
                assert!(c.epsilon <= e && c.epsilon >= 0.0);
                let (p, q) = oracle.support_probabilities();
                assert!(p.is_finite() && q.is_finite() && q > 0.0);
                let _ = oracle.randomize(2, &mut rng).unwrap();
                let _ = FrequencyOracle::best(eps(e), 6).unwrap();
            }
        }
    }
}
