//! Reuse at any lag: does an input's output depend on an output drawn any number of
//! outputs earlier in the run (a pool of coins that wraps and replays after 2²⁰ draws, a
//! cache of responses replayed much later)? The serial tests look at lags 1 to 8 of each
//! input's own stream; this looks at every lag of the run's whole output stream, in the
//! order the mechanism answered (all inputs interleaved, as the schedule asked).
//!
//! Each input i gets a random projection of its batch symbols, wᵢ(s) uniform in (−1, 1)
//! from the run's seed, centred by its mean over the input's outputs; on the run's stream
//! xₜ is that projection where the output is input i's and 0 elsewhere. For every lag ℓ,
//! C(ℓ) = Σₜ xₜ xₜ₊ℓ (FFTs: O(N log N) for all lags at once). Under the contract the
//! outputs are independent given the inputs and the schedule, so for each lag C(ℓ) is a
//! martingale in t with increments bounded by b = max x² and predictable variation
//! V(ℓ) = σ²·Σₜ xₜ²·[input at t + ℓ] (σ² the projection's variance), and Freedman's
//! inequality bounds P(|C(ℓ)| ≥ c) by 2·exp(−(V/b²)·h(b·c/V)) — close to the normal tail
//! for a balanced law, and still valid for a skewed one, whose variation comes from a few
//! rare outputs (the normal tail is then far too small: a false alarm). Two outputs of the
//! same input that share a coin or are copies give E[C(ℓ)] = (pairs)·Var(w(Y)) > 0,
//! positive for any non-constant projection. The test is the largest exponent over the
//! lags with at least [`MIN_PAIRS`] expected same-input pairs, Bonferroni over those lags.
//!
//! Stream pieces of at most [`PIECE`] outputs are tested separately (memory: a few
//! buffers of 2·[`PIECE`] floats), at most [`MAX_PIECES`] of them spread over the run
//! (cost: a few seconds whatever the run's length); lags longer than a piece are not
//! tested (stated in the report's note).

use rand::{RngExt, SeedableRng, rngs::ChaCha20Rng};
use realfft::RealFftPlanner;

use crate::{schedule::Request, seeds::mix, tally::ReuseStat};

/// Outputs per tested piece of the run's stream (2²³).
pub(crate) const PIECE: usize = 1 << 23;

/// The fewest expected same-input pairs at a tested lag.
pub(crate) const MIN_PAIRS: f64 = 1000.0;

/// Domain separation of the projections' seeds.
const REUSE_DOMAIN: u64 = 0x5245_5553_455F_414E; // "REUSE_AN"

/// The most pieces tested in one run: longer runs are tested on this many pieces spread
/// evenly from the first output to the last (the cost stays bounded; reuse at lags up to a
/// piece is looked for at the start, the end and in between).
pub(crate) const MAX_PIECES: u64 = 4;

/// The pieces of a run of `total` outputs that are tested, as (start, length): the whole
/// run cut into pieces of [`PIECE`] when it has at most [`MAX_PIECES`] of them, else
/// [`MAX_PIECES`] pieces of [`PIECE`] spread evenly over it.
pub(crate) fn tested_pieces(total: u64) -> Vec<(u64, u64)> {
    let piece = PIECE as u64;
    let count = total.div_ceil(piece);
    if count <= MAX_PIECES {
        (0..count)
            .map(|k| (k * piece, piece.min(total - k * piece)))
            .collect()
    } else {
        (0..MAX_PIECES)
            .map(|k| {
                let start = u128::from(k) * u128::from(total - piece) / u128::from(MAX_PIECES - 1);
                (u64::try_from(start).unwrap_or(total - piece), piece)
            })
            .collect()
    }
}

/// The reuse statistics of each input: `requests` in the order sent, `logs[i]` input i's
/// batch symbols in the order received, `seed` the run's seed.
pub(crate) fn reuse_stats(requests: &[Request], logs: &[Vec<u8>], seed: u64) -> Vec<ReuseStat> {
    let inputs = logs.len();
    let total: u64 = requests.iter().map(|r| r.size).fold(0, u64::saturating_add);
    let pieces = tested_pieces(total);
    // Each tested piece of the run's stream: whose output each position is, and its symbol.
    let mut streams: Vec<(Vec<u32>, Vec<u8>)> = pieces
        .iter()
        .map(|&(_, len)| {
            let len = usize::try_from(len).unwrap_or(0);
            (Vec::with_capacity(len), Vec::with_capacity(len))
        })
        .collect();
    let mut cursor = vec![0u64; inputs];
    let mut at = 0u64;
    for r in requests {
        let (from, to) = (at, at.saturating_add(r.size));
        if let (Some(log), Some(c)) = (logs.get(r.input), cursor.get(r.input).copied()) {
            for (&(start, len), (who, symbol)) in pieces.iter().zip(streams.iter_mut()) {
                let (lo, hi) = (from.max(start), to.min(start + len));
                if lo >= hi {
                    continue;
                }
                let a = usize::try_from(c + (lo - from)).unwrap_or(usize::MAX);
                let b = usize::try_from(c + (hi - from)).unwrap_or(usize::MAX);
                for &s in log.get(a..b.min(log.len())).unwrap_or(&[]) {
                    who.push(r.input as u32);
                    symbol.push(s);
                }
            }
        }
        if let Some(c) = cursor.get_mut(r.input) {
            *c += r.size;
        }
        at = to;
    }
    let weights: Vec<[f64; 256]> = (0..inputs)
        .map(|i| {
            let mut rng = ChaCha20Rng::seed_from_u64(mix(mix(seed, REUSE_DOMAIN), i as u64));
            let mut w = [0.0; 256];
            for x in &mut w {
                *x = rng.random::<f64>() * 2.0 - 1.0;
            }
            w
        })
        .collect();
    let mut stats = vec![ReuseStat::default(); inputs];
    let mut planner = RealFftPlanner::<f64>::new();
    for (who, symbol) in &streams {
        for (i, stat) in stats.iter_mut().enumerate() {
            stat.merge(&piece(who, symbol, i as u32, &weights[i], &mut planner));
        }
    }
    stats
}

/// The statistic of input `input` on one piece of the stream.
fn piece(
    who: &[u32],
    symbol: &[u8],
    input: u32,
    w: &[f64; 256],
    planner: &mut RealFftPlanner<f64>,
) -> ReuseStat {
    let n = who.len();
    let mine = who.iter().filter(|&&x| x == input).count();
    let share = if n == 0 { 0.0 } else { mine as f64 / n as f64 };
    // The longest lag with MIN_PAIRS expected same-input pairs: (n − ℓ)·share² ≥ MIN_PAIRS.
    let needed = if share > 0.0 {
        (MIN_PAIRS / (share * share)).ceil()
    } else {
        f64::INFINITY
    };
    if mine < 2 || needed >= n as f64 {
        return ReuseStat {
            short_pieces: 1,
            ..ReuseStat::default()
        };
    }
    let longest = n - needed as usize;
    let mut present = [false; 256];
    let mut sum = 0.0;
    for (_, &s) in who.iter().zip(symbol).filter(|(x, _)| **x == input) {
        present[usize::from(s)] = true;
        sum += w[usize::from(s)];
    }
    let mean = sum / mine as f64;
    let x: Vec<f64> = who
        .iter()
        .zip(symbol)
        .map(|(&x, &s)| {
            if x == input {
                w[usize::from(s)] - mean
            } else {
                0.0
            }
        })
        .collect();
    // σ² of the centred projection and the bound b on every product's magnitude.
    let squares: Vec<f64> = x.iter().map(|v| v * v).collect();
    let sigma2 = squares.iter().sum::<f64>() / mine as f64;
    let bound = (0..256)
        .filter(|&s| present[s])
        .map(|s| (w[s] - mean).abs())
        .fold(0.0f64, f64::max)
        .powi(2);
    let mut stat = ReuseStat {
        pieces: 1,
        longest_lag: longest as u64,
        ..ReuseStat::default()
    };
    if sigma2 <= 0.0 || bound <= 0.0 {
        // One symbol only: nothing can be correlated.
        return stat;
    }
    let mine_at: Vec<f64> = who
        .iter()
        .map(|&x| if x == input { 1.0 } else { 0.0 })
        .collect();
    let c = correlation(&x, &x, planner);
    // The predictable variation of C(ℓ) as a martingale in t: σ² Σₜ xₜ² [input at t + ℓ].
    let v = correlation(&squares, &mine_at, planner);
    for lag in 1..=longest {
        let (Some(&cl), Some(&vl)) = (c.get(lag), v.get(lag)) else {
            break;
        };
        let variation = sigma2 * vl;
        if variation <= 1e-12 * bound {
            continue;
        }
        stat.lags += 1;
        let e = bennett_exponent(cl.abs(), variation, bound);
        if e.is_finite() && e > stat.max_exponent {
            stat.max_exponent = e;
            stat.at_lag = lag as u64;
        }
    }
    stat
}

/// The exponent of Freedman's (Bennett's) inequality for a martingale with increments
/// bounded by `bound` and predictable variation `variation`: P(|S| ≥ s) ≤ 2·e^(−E) with
/// E = (v/b²)·h(b·s/v), h(u) = (1 + u)·ln(1 + u) − u. Close to the normal tail s²/2v when
/// the increments are many and balanced; much more conservative when the variation comes
/// from a few rare outputs (a skewed law), where the normal tail is wrong.
pub(crate) fn bennett_exponent(s: f64, variation: f64, bound: f64) -> f64 {
    let u = bound * s / variation;
    let h = (1.0 + u) * u.ln_1p() - u;
    variation / (bound * bound) * h
}

/// Σₜ aₜ bₜ₊ℓ for every ℓ in 0..len (zero-padded FFTs: no wrap-around).
fn correlation(a: &[f64], b: &[f64], planner: &mut RealFftPlanner<f64>) -> Vec<f64> {
    let n = a.len().min(b.len());
    let len = (2 * n).next_power_of_two().max(2);
    let forward = planner.plan_fft_forward(len);
    let inverse = planner.plan_fft_inverse(len);
    let spectrum = |x: &[f64]| {
        let mut buf = forward.make_input_vec();
        buf[..n].copy_from_slice(&x[..n]);
        let mut out = forward.make_output_vec();
        forward.process(&mut buf, &mut out).map(|()| out)
    };
    let (Ok(fa), Ok(mut fb)) = (spectrum(a), spectrum(b)) else {
        return Vec::new();
    };
    for (y, x) in fb.iter_mut().zip(&fa) {
        *y *= x.conj();
    }
    // The inverse of a real signal's spectrum: the imaginary parts of the first and last
    // bins are zero up to rounding.
    if let Some(first) = fb.first_mut() {
        first.im = 0.0;
    }
    if let Some(last) = fb.last_mut() {
        last.im = 0.0;
    }
    let mut out = inverse.make_output_vec();
    if inverse.process(&mut fb, &mut out).is_err() {
        return Vec::new();
    }
    let scale = 1.0 / len as f64;
    out.truncate(n);
    out.iter_mut().for_each(|v| *v *= scale);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::schedule;

    /// Symbols of a 3-symbol law for each input (input i: symbol 0 below `cuts[i].0`,
    /// 1 below `cuts[i].1`, else 2), drawn independently, optionally with a pool of coins
    /// that wraps after `pool` draws of the whole run.
    fn run(cuts: [(f64, f64); 2], pool: Option<usize>, seed: u64) -> Vec<ReuseStat> {
        let requests = schedule(2, 60_000, 1000, seed);
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let mut coins: Vec<f64> = Vec::new();
        let mut logs = vec![Vec::new(), Vec::new()];
        for r in &requests {
            for _ in 0..r.size {
                let t = coins.len();
                let u = match pool {
                    Some(p) if t >= p => coins[t - p],
                    _ => rng.random::<f64>(),
                };
                coins.push(u);
                let (a, b) = cuts[r.input];
                logs[r.input].push(u8::from(u >= a) + u8::from(u >= b));
            }
        }
        reuse_stats(&requests, &logs, seed)
    }

    fn p(s: &ReuseStat) -> f64 {
        (s.lags as f64 * 2.0 * (-s.max_exponent).exp()).min(1.0)
    }

    /// Balanced: P = (0.5, 0.3, 0.2) and (0.2, 0.3, 0.5).
    const BALANCED: [(f64, f64); 2] = [(0.5, 0.8), (0.2, 0.5)];
    /// Skewed: a symbol of probability 0.005 (where a normal tail would give false alarms).
    const SKEWED: [(f64, f64); 2] = [(0.995, 0.999), (0.001, 0.006)];

    #[test]
    fn a_pool_that_wraps_is_caught_and_fresh_coins_are_not() {
        // α = 10⁻⁶ per input: fresh coins pass for every seed tried, balanced or skewed.
        for seed in 1..=4 {
            for cuts in [BALANCED, SKEWED] {
                for s in run(cuts, None, seed) {
                    assert!(s.pieces == 1 && s.lags > 100_000, "{s:?}");
                    assert!(p(&s) > 1e-6, "seed {seed}: {s:?}");
                }
            }
        }
        // Negative control: coins replayed after 50 000 draws (of 120 000) are caught at
        // that lag, balanced or skewed.
        for cuts in [BALANCED, SKEWED] {
            for s in run(cuts, Some(50_000), 9) {
                assert!(p(&s) < 1e-9, "{s:?}");
                assert_eq!(s.at_lag, 50_000);
            }
        }
    }

    #[test]
    fn long_runs_are_tested_on_pieces_spread_over_them() {
        let p = PIECE as u64;
        assert_eq!(tested_pieces(0), vec![]);
        assert_eq!(tested_pieces(10), vec![(0, 10)]);
        assert_eq!(tested_pieces(2 * p + 5), vec![(0, p), (p, p), (2 * p, 5)]);
        let long = tested_pieces(40 * p + 7);
        assert_eq!(long.len() as u64, MAX_PIECES);
        assert_eq!(long.first(), Some(&(0, p)));
        assert_eq!(long.last(), Some(&(39 * p + 7, p)));
        assert!(long.windows(2).all(|w| w[0].0 + w[0].1 <= w[1].0));
    }

    #[test]
    fn the_fft_correlation_is_the_direct_sum() {
        let x: Vec<f64> = (0..37).map(|t| ((t * 7 % 11) as f64) - 5.0).collect();
        let y: Vec<f64> = (0..37).map(|t| ((t * 5 % 13) as f64) - 6.0).collect();
        let c = correlation(&x, &y, &mut RealFftPlanner::new());
        for lag in 0..x.len() {
            let direct: f64 = (0..x.len() - lag).map(|t| x[t] * y[t + lag]).sum();
            assert!((c[lag] - direct).abs() < 1e-9, "lag {lag}");
        }
    }
}
