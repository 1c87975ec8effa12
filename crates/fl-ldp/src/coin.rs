//! Exact Bernoulli coins: the one randomness primitive every mechanism uses.
//!
//! A coin with bias `p` (any `f64` in `[0, 1]`) is sampled *exactly*: a uniform real
//! U ∈ [0, 1) is drawn lazily as a stream of 64-bit words from a CSPRNG and compared with
//! the binary expansion of `p`, word by word; the first unequal word decides, and the
//! coin shows heads iff U < p. Because every `f64` has a finite binary expansion (at most
//! 1074 bits after the point), P(heads) is exactly `p`, with no rounding of a float uniform
//! and no bias from the generator's output range. Almost always one word decides: a second
//! word is needed with probability 2^−64 for `p` ≥ 2^−64 (and never when `p`'s expansion
//! fits in 64 bits).
//!
//! Timing: the number of words read depends only on the random words and on `p`, which is
//! a public parameter; it never depends on the private input a mechanism applies the coin
//! to. Mechanisms combine the coin with their input branch-free (XOR, masks).

use rand::CryptoRng;

use crate::epsilon::Probability;

/// An exact Bernoulli(p) coin for a fixed `p`, with its binary expansion precomputed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bernoulli {
    /// The first 64 bits of p after the binary point, i.e. ⌊p·2^64⌋ (for p < 1).
    first_word: u64,
    /// p = mantissa · 2^(−shift) for p < 1 (mantissa < 2^53).
    mantissa: u64,
    /// See `mantissa`.
    shift: u32,
    /// How many 64-bit words the expansion of p has (0 for p = 0).
    words: u32,
    /// p = 1.
    certain: bool,
}

impl Bernoulli {
    /// A coin that shows heads with probability exactly `p`.
    #[must_use]
    pub fn new(p: Probability) -> Self {
        let p = p.value();
        if p >= 1.0 {
            return Self {
                first_word: u64::MAX,
                mantissa: 1,
                shift: 0,
                words: 0,
                certain: true,
            };
        }
        let bits = p.to_bits();
        let raw_exponent = ((bits >> 52) & 0x7ff) as u32;
        let fraction = bits & ((1u64 << 52) - 1);
        let (mantissa, shift) = if raw_exponent == 0 {
            // Zero or subnormal: p = fraction · 2^−1074.
            (fraction, 1074)
        } else {
            // Normal: p = (2^52 + fraction) · 2^(raw_exponent − 1075); p < 1 so shift ≥ 53.
            (fraction | (1u64 << 52), 1075 - raw_exponent)
        };
        let words = if mantissa == 0 { 0 } else { shift.div_ceil(64) };
        let mut coin = Self {
            first_word: 0,
            mantissa,
            shift,
            words,
            certain: false,
        };
        coin.first_word = coin.word(0);
        coin
    }

    /// The probability of heads.
    #[must_use]
    pub fn probability(&self) -> f64 {
        if self.certain {
            1.0
        } else {
            // Exact: mantissa < 2^53 and the scaling is a power of two (subnormals included).
            self.mantissa as f64 * pow2(-(self.shift as i32))
        }
    }

    /// Word `i` of the binary expansion of p: ⌊p · 2^(64(i+1))⌋ mod 2^64.
    fn word(&self, i: u32) -> u64 {
        let t = 64 * (i as i64 + 1) - self.shift as i64;
        if t >= 64 || t <= -64 {
            0
        } else if t >= 0 {
            ((self.mantissa as u128) << t) as u64
        } else {
            self.mantissa >> (-t)
        }
    }

    /// Flips the coin: `true` with probability exactly p.
    pub fn sample<R: CryptoRng + ?Sized>(&self, rng: &mut R) -> bool {
        let r = rng.next_u64();
        self.flip_with_word(r, rng)
    }

    /// Decides the coin from its first uniform word `r` (drawing continuation words from
    /// `rng` only in the rare case that `r` equals p's first word and p's expansion is
    /// longer than one word, i.e. with probability 2^−64, and never for p ≥ 2^−11).
    ///
    /// The hot path is branch-free: `r < first_word`, or-ed with `certain` for p = 1.
    #[inline(always)]
    pub(crate) fn flip_with_word<R: CryptoRng + ?Sized>(&self, r: u64, rng: &mut R) -> bool {
        if r == self.first_word && self.words > 1 {
            return self.sample_tail(rng);
        }
        (r < self.first_word) | self.certain
    }

    /// The rare continuation after the first word of U equalled p's first word.
    #[cold]
    #[inline(never)]
    fn sample_tail<R: CryptoRng + ?Sized>(&self, rng: &mut R) -> bool {
        for i in 1..self.words {
            let w = self.word(i);
            let r = rng.next_u64();
            if r != w {
                return r < w;
            }
        }
        // U agrees with p on every bit p has; U > p with probability one.
        false
    }

    /// Flips the coin once for every element of `out` (`true` = heads): a batch API for
    /// mechanisms that need many coins with the same bias. Same law as repeated
    /// [`Bernoulli::sample`]: one 64-bit word per coin, independent coins.
    pub fn fill<R: CryptoRng + ?Sized>(&self, rng: &mut R, out: &mut [bool]) {
        for o in out.iter_mut() {
            let r = rng.next_u64();
            *o = self.flip_with_word(r, rng);
        }
    }

    /// Flips the coin once per bit of `out` (bit `j` of `out[i]` is coin `64·i + j`):
    /// a batch API for mechanisms that need many coins with the same bias.
    pub fn fill_bits<R: CryptoRng + ?Sized>(&self, rng: &mut R, out: &mut [u64]) {
        for word in out.iter_mut() {
            let mut acc = 0u64;
            for j in 0..64 {
                let r = rng.next_u64();
                acc |= u64::from(self.flip_with_word(r, rng)) << j;
            }
            *word = acc;
        }
    }
}

/// A uniform integer in `[0, n)`, exactly (Lemire's nearly divisionless method: the
/// 128-bit product of a uniform word and `n`, rejecting the at most `n − 1` low values that
/// would bias it). Returns 0 for `n ≤ 1` without drawing.
///
/// The number of words drawn depends only on the random words and on `n` (a rejection
/// happens with probability below n/2^64), never on the value returned. Proof of
/// exactness: `docs/proofs/fl-ldp/exact-samplers.md` §2.
///
/// ```
/// use fl_ldp::coin::uniform_below;
/// use rand::{SeedableRng, rngs::ChaCha20Rng};
///
/// let mut rng = ChaCha20Rng::seed_from_u64(1); // fixed seed: example only
/// let die = uniform_below(&mut rng, 6);
/// assert!(die < 6);
/// assert_eq!(uniform_below(&mut rng, 0), 0);
/// ```
#[inline]
pub fn uniform_below<R: CryptoRng + ?Sized>(rng: &mut R, n: u64) -> u64 {
    if n <= 1 {
        return 0;
    }
    let mut m = u128::from(rng.next_u64()) * u128::from(n);
    if (m as u64) < n {
        let threshold = n.wrapping_neg() % n;
        while (m as u64) < threshold {
            m = u128::from(rng.next_u64()) * u128::from(n);
        }
    }
    (m >> 64) as u64
}

/// A uniform integer in `[0, n)` from one uniform 32-bit value `r` (Lemire, 32-bit), with
/// rejection drawing fresh words from `rng`; `n` must be in `1..=2^32`.
#[inline(always)]
pub(crate) fn uniform_below_u32<R: CryptoRng + ?Sized>(r: u32, n: u64, rng: &mut R) -> u64 {
    let mut m = u64::from(r) * n;
    if (m as u32 as u64) < n {
        let threshold = (1u64 << 32).wrapping_sub(n) % n;
        while (m as u32 as u64) < threshold {
            m = u64::from(rng.next_u32()) * n;
        }
    }
    m >> 32
}

/// 2^e for e in the range of finite f64 powers of two, subnormals included.
fn pow2(e: i32) -> f64 {
    if e >= -1022 {
        f64::from_bits(((e + 1023) as u64) << 52)
    } else {
        // Subnormal: 2^e = 2^(e + 1074) · 2^−1074.
        f64::from_bits(1u64 << (e + 1074))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::convert::Infallible;
    use rand::{SeedableRng, TryCryptoRng, TryRng, rngs::ChaCha20Rng};

    /// Replays scripted words, then zeros.
    struct Script(Vec<u64>);

    impl TryRng for Script {
        type Error = Infallible;
        fn try_next_u32(&mut self) -> Result<u32, Infallible> {
            Ok(self.try_next_u64()? as u32)
        }
        fn try_next_u64(&mut self) -> Result<u64, Infallible> {
            Ok(if self.0.is_empty() {
                0
            } else {
                self.0.remove(0)
            })
        }
        fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
            dst.fill(0);
            Ok(())
        }
    }
    impl TryCryptoRng for Script {}

    fn coin(p: f64) -> Bernoulli {
        Bernoulli::new(Probability::new("p", p).unwrap())
    }

    #[test]
    fn expansion_is_exact() {
        for p in [
            0.0,
            0.5,
            0.25,
            0.1,
            1e-30,
            0.999_999,
            5e-324,
            0.268_941_421_369_995_1,
        ] {
            assert_eq!(coin(p).probability().to_bits(), p.to_bits(), "{p}");
        }
        assert_eq!(coin(1.0).probability(), 1.0);
        assert_eq!(coin(0.5).first_word, 1u64 << 63);
        assert_eq!(coin(0.5).words, 1);
        // 1e-30 ≈ 2^-99.6: the first word is zero and the expansion spans three words.
        let tiny = coin(1e-30);
        assert_eq!(tiny.first_word, 0);
        assert_eq!(tiny.words, 3);
        assert_eq!(coin(5e-324).words, 17);
    }

    #[test]
    fn first_unequal_word_decides() {
        let half = coin(0.5);
        assert!(half.sample(&mut Script(vec![(1 << 63) - 1])));
        assert!(!half.sample(&mut Script(vec![1 << 63])));
        // p = 1e-30: U < p needs a zero first word and a second word below p's.
        let tiny = coin(1e-30);
        let w1 = tiny.word(1);
        assert!(w1 > 0);
        assert!(tiny.sample(&mut Script(vec![0, w1 - 1])));
        assert!(!tiny.sample(&mut Script(vec![0, w1 + 1])));
        assert!(!tiny.sample(&mut Script(vec![1])));
        // Equal on every word of p: U ≥ p, tails.
        let all: Vec<u64> = (0..tiny.words).map(|i| tiny.word(i)).collect();
        assert!(!tiny.sample(&mut Script(all)));
    }

    #[test]
    fn certain_and_impossible_coins() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        assert!((0..1000).all(|_| coin(1.0).sample(&mut rng)));
        assert!((0..1000).all(|_| !coin(0.0).sample(&mut rng)));
        assert!(!coin(0.0).sample(&mut Script(vec![0])));
    }

    /// Frequency check with a fixed seed at α = 1e-6 (|z| > 4.89), with a negative
    /// control: the same sample must reject a coin whose bias is off by 1 %.
    #[test]
    fn frequency_matches_bias() {
        let n = 1_000_000u32;
        let z_crit = 4.89;
        for (seed, p) in [(7u64, 0.5), (8, 0.731_058_578_630_004_9), (9, 0.0066928509)] {
            let mut rng = ChaCha20Rng::seed_from_u64(seed);
            let c = coin(p);
            let heads = (0..n).filter(|_| c.sample(&mut rng)).count() as f64;
            let z = |q: f64| (heads - n as f64 * q) / (n as f64 * q * (1.0 - q)).sqrt();
            assert!(z(p).abs() < z_crit, "p={p} z={}", z(p));
            let wrong = if p >= 0.5 { p * 0.99 } else { p * 1.2 };
            assert!(
                z(wrong).abs() > z_crit,
                "negative control p={wrong} z={}",
                z(wrong)
            );
        }
    }

    /// uniform_below is uniform (chi-square at α = 1e-6 with a fixed seed) and a tilted
    /// law is rejected on the same counts (negative control).
    #[test]
    fn uniform_below_is_uniform() {
        use fl_stats::{Alpha, HypothesisTest, chi_square_gof};
        let alpha = Alpha::new(1e-6).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(31);
        for n in [2u64, 7, 10, 1000] {
            let mut counts = vec![0u64; n as usize];
            for _ in 0..200_000 {
                counts[uniform_below(&mut rng, n) as usize] += 1;
            }
            let uniform = vec![1.0 / n as f64; n as usize];
            let t = chi_square_gof(&counts, &uniform).unwrap();
            assert!(!t.rejects(alpha), "n = {n}: p = {}", t.p_value);
            // Negative control: 5 % more mass on the lower half.
            let tilted: Vec<f64> = (0..n)
                .map(|i| if i < n / 2 { 1.05 } else { 0.95 } / n as f64)
                .collect();
            let s: f64 = tilted.iter().sum();
            let tilted: Vec<f64> = tilted.iter().map(|x| x / s).collect();
            let bad = chi_square_gof(&counts, &tilted).unwrap();
            assert!(bad.rejects(alpha), "n = {n}: control p = {}", bad.p_value);
        }
    }

    /// Edge cases: n ≤ 1 draws nothing; the rejection step discards the biased low
    /// products (scripted words); the full range works.
    #[test]
    fn uniform_below_edges_and_rejection() {
        let mut empty = Script(vec![]);
        assert_eq!(uniform_below(&mut empty, 0), 0);
        let mut one = Script(vec![u64::MAX]);
        assert_eq!(uniform_below(&mut one, 1), 0);
        assert_eq!(one.0, vec![u64::MAX], "n = 1 must not draw");
        // n = 3: threshold = 2^64 mod 3 = 1; the word 0 gives low product 0 < 1 and is
        // rejected; the next word u64::MAX gives ⌊3·(2^64 − 1)/2^64⌋ = 2.
        let mut script = Script(vec![0, u64::MAX]);
        assert_eq!(uniform_below(&mut script, 3), 2);
        assert!(script.0.is_empty());
        let mut script = Script(vec![u64::MAX]);
        assert_eq!(uniform_below(&mut script, u64::MAX), u64::MAX - 1);
    }

    #[test]
    fn fill_bits_uses_the_same_coin() {
        let c = coin(0.25);
        let mut a = ChaCha20Rng::seed_from_u64(3);
        let mut b = ChaCha20Rng::seed_from_u64(3);
        let mut out = [0u64; 4];
        c.fill_bits(&mut a, &mut out);
        for (i, w) in out.iter().enumerate() {
            for j in 0..64 {
                assert_eq!((w >> j) & 1 == 1, c.sample(&mut b), "coin {}", 64 * i + j);
            }
        }
    }
}
