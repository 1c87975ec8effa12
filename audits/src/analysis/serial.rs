//! Dependence in time, without the law: serial independence of each output stream at
//! every lag 1..=L, and over-dispersion of the counts across batches of outputs.
//!
//! - `serial-independence` (lag ℓ): the pairs (Yₜ, Yₜ₊ℓ) of a stream's symbols over all t,
//!   tested for independence (fl-stats' `chi_square_independence`). For i.i.d. outputs the
//!   centred products of overlapping pairs are uncorrelated (martingale differences), so
//!   Pearson's statistic keeps its χ²((a − 1)²) limit whatever the marginal law; a
//!   mechanism that reuses randomness ℓ calls later fails at lag ℓ.
//! - `batch-dispersion` (scale s): the outputs' symbols counted per batch (a response of
//!   an external mechanism, or a block of the project's sampler), consecutive batches
//!   grouped s at a time, and the groups × symbols table tested for homogeneity: a fresh,
//!   independent sampler gives every group a multinomial count vector, so the table's
//!   Pearson statistic has the χ² law; a mechanism that replays a batch doubles the
//!   variation of the group that holds both copies, which shows at the scale of the
//!   replayed unit (every second batch replayed: scale 2).

use serde_json::json;

use super::{Outcome, about};
use crate::{
    error::Result,
    tally::{BatchCounts, SERIAL_LAGS, SerialLags},
};

/// The fewest outputs in one unit of the dispersion tests: consecutive batches (responses)
/// are merged up to it.
pub(crate) const MIN_UNIT: u64 = 1024;

/// The group sizes (in batches) of the over-dispersion tests.
pub(crate) const DISPERSION_SCALES: [usize; 4] = [1, 2, 4, 8];

/// Serial tests per input of a law with `streams` streams.
pub(crate) fn serial_test_count(streams: usize) -> usize {
    streams * SERIAL_LAGS
}

/// Over-dispersion tests per input.
pub(crate) fn dispersion_test_count() -> usize {
    DISPERSION_SCALES.len()
}

/// Serial independence of one input's streams at every lag. A stream of a vector output
/// is named by its coordinate, or by `stream_names` when given.
pub(crate) fn serial_outcomes(
    label: &str,
    lags: &SerialLags,
    stream_names: &[&str],
) -> Result<Vec<Outcome>> {
    let a = lags.alphabet();
    let streams = lags.streams();
    let mut out = Vec::with_capacity(streams * SERIAL_LAGS);
    for s in 0..streams {
        for lag in 1..=SERIAL_LAGS {
            let t = fl_stats::chi_square_independence(lags.table(s, lag), a, a)?;
            let mut ab = about(&[("input", json!(label)), ("lag", json!(lag))]);
            if let Some(name) = stream_names.get(s) {
                ab.insert("stream".into(), json!(name));
            } else if streams > 1 {
                ab.insert("coordinate".into(), json!(s));
            }
            out.push(Outcome {
                test: "serial-independence".into(),
                about: ab,
                samples: t.samples,
                statistic: t.statistic,
                p_value: t.p_value,
            });
        }
    }
    Ok(out)
}

/// Over-dispersion of one input's batch counts at every scale.
pub(crate) fn dispersion_outcomes(label: &str, batches: &BatchCounts) -> Result<Vec<Outcome>> {
    let a = batches.alphabet();
    // Consecutive batches merged until each unit holds at least MIN_UNIT outputs (an
    // external run's schedule sends many requests of one output; Pearson's statistic
    // needs counts, and pooling millions of one-output rows would cost O(rows²)). The
    // project's batches (2¹⁴ outputs) are units by themselves.
    let mut units: Vec<Vec<u64>> = Vec::new();
    let mut open = vec![0u64; a];
    for row in batches.rows().chunks_exact(a) {
        for (o, &c) in open.iter_mut().zip(row) {
            *o = o.saturating_add(c);
        }
        if open.iter().sum::<u64>() >= MIN_UNIT {
            units.push(std::mem::replace(&mut open, vec![0u64; a]));
        }
    }
    if open.iter().any(|&c| c > 0) {
        match units.last_mut() {
            Some(last) => {
                for (l, &c) in last.iter_mut().zip(&open) {
                    *l = l.saturating_add(c);
                }
            }
            None => units.push(open),
        }
    }
    let rows: Vec<&[u64]> = units.iter().map(Vec::as_slice).collect();
    let mut out = Vec::with_capacity(DISPERSION_SCALES.len());
    for scale in DISPERSION_SCALES {
        let mut table = Vec::with_capacity(rows.len().div_ceil(scale) * a);
        for group in rows.chunks(scale) {
            let start = table.len();
            table.resize(start + a, 0);
            for row in group {
                for (t, &c) in table[start..].iter_mut().zip(row.iter()) {
                    *t += c;
                }
            }
        }
        let groups = table.len() / a;
        let t = fl_stats::chi_square_independence(&table, groups.max(1), a)?;
        out.push(Outcome {
            test: "batch-dispersion".into(),
            about: about(&[
                ("input", json!(label)),
                ("batches_per_group", json!(scale)),
                ("groups", json!(groups)),
            ]),
            samples: t.samples,
            statistic: t.statistic,
            p_value: two_sided(&t)?,
        });
    }
    Ok(out)
}

/// The two-sided p-value of a homogeneity test: 2·min(upper, lower tail), capped at 1.
/// The upper tail is over-dispersion (a replayed batch, a drifting law); the lower tail is
/// counts more regular than independent draws allow (a sampler that hands out exactly
/// ⌊np⌋ keepers per batch: each output's law exact, the batch's far from multinomial).
pub(crate) fn two_sided(t: &fl_stats::IndependenceTest) -> Result<f64> {
    if t.degrees_of_freedom == 0 {
        return Ok(t.p_value);
    }
    let lower = fl_stats::chi_square_cdf(t.statistic, t.degrees_of_freedom as f64)?;
    Ok((2.0 * t.p_value.min(lower)).min(1.0))
}

/// The report's sentence on what the serial and over-dispersion tests compare.
pub(crate) fn serial_note(lags: &SerialLags, batches: &BatchCounts, external: bool) -> String {
    let per = if lags.streams() == 1 {
        "the output".to_string()
    } else {
        format!("each of the {} streams", lags.streams())
    };
    format!(
        "serial-independence: for every input, {per} as a stream of at most {} symbols; the \
         pairs (Y_t, Y_t+l) at every lag l = 1..{SERIAL_LAGS} tested for independence \
         (chi-square; a mechanism that reuses randomness l calls later fails at lag l); \
         batch-dispersion: one symbol of at most {} per output counted per {}, groups of \
         {:?} consecutive batches tested for homogeneity, two-sided (a replayed batch \
         over-disperses the groups that hold it and its copy; counts forced towards their \
         expectation under-disperse)",
        lags.alphabet(),
        batches.alphabet(),
        if external {
            "response of the mechanism"
        } else {
            "block of the sampler's outputs"
        },
        DISPERSION_SCALES
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replayed_batches_over_disperse_at_their_scale() {
        use rand::{Rng, SeedableRng, rngs::ChaCha20Rng};
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let fresh = |rng: &mut ChaCha20Rng, b: &mut BatchCounts| {
            for _ in 0..2000 {
                b.push((rng.next_u64() % 4) as usize);
            }
            b.end_batch();
        };
        let mut good = BatchCounts::new(4);
        let mut replayed = BatchCounts::new(4);
        for _ in 0..200 {
            fresh(&mut rng, &mut good);
            // The same batch twice.
            let mut one = BatchCounts::new(4);
            fresh(&mut rng, &mut one);
            for _ in 0..2 {
                for (s, &c) in one.rows().iter().enumerate() {
                    for _ in 0..c {
                        replayed.push(s);
                    }
                }
                replayed.end_batch();
            }
        }
        let p = |b: &BatchCounts| -> Vec<f64> {
            dispersion_outcomes("x", b)
                .unwrap()
                .iter()
                .map(|o| o.p_value)
                .collect()
        };
        // α = 10⁻⁶ here: the fresh batches pass every scale, the replayed ones fail at
        // scale 2 (and above), not at scale 1 (the copies are in different groups).
        assert!(p(&good).iter().all(|&x| x > 1e-6), "{:?}", p(&good));
        let bad = p(&replayed);
        assert!(bad[0] > 1e-6 && bad[1] < 1e-12, "{bad:?}");
    }
}
