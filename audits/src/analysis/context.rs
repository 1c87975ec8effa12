//! Whether an input's outputs depend on anything but the input: where in the run they
//! were drawn (every source), and, for an external mechanism asked on a random schedule
//! (`schedule`), which input the previous request was for and how many outputs the
//! request asked for. Under the contract (fresh, independent draws) every one of these
//! contexts gives the same law, so each is a homogeneity test of the contexts × batch
//! symbols table (fl-stats' `chi_square_independence`, valid whatever the law: it never
//! reads the claimed law), and, for the position in the run, two-sided, so a run whose
//! counts drift and one whose counts are held too close to their expectation both fail.
//! The reuse-at-any-lag result of an external run (`reuse`) is reported here too.

use serde_json::json;

use super::{Outcome, about, serial::two_sided};
use crate::{
    error::Result,
    tally::{BatchCounts, Contexts, ReuseStat, SIZE_CLASSES},
};

/// The segments of the run-position tests: the halves (early against late) and 16
/// segments of equal numbers of outputs (a change anywhere in the run).
pub(crate) const POSITION_SEGMENTS: [usize; 2] = [2, 16];

/// Context tests per input: the position tests for every source; for an external one the
/// previous-input, request-size, place-in-response and reuse-at-any-lag tests as well.
pub(crate) fn context_test_count(external: bool) -> usize {
    POSITION_SEGMENTS.len() + if external { 4 } else { 0 }
}

/// The run-position tests of one input: its batches (in stream order) cut into segments
/// of about equal numbers of outputs, the segments × symbols table tested for homogeneity.
pub(crate) fn position_outcomes(label: &str, batches: &BatchCounts) -> Result<Vec<Outcome>> {
    let a = batches.alphabet();
    let rows: Vec<&[u64]> = batches.rows().chunks_exact(a).collect();
    let total: u64 = rows.iter().flat_map(|r| r.iter()).sum();
    let mut out = Vec::with_capacity(POSITION_SEGMENTS.len());
    for segments in POSITION_SEGMENTS {
        let mut table = vec![0u64; segments * a];
        let mut before = 0u64;
        for row in &rows {
            // The segment of the batch's first output.
            let seg = if total == 0 {
                0
            } else {
                ((u128::from(before) * segments as u128) / u128::from(total)) as usize
            };
            let seg = seg.min(segments - 1);
            for (c, &x) in table[seg * a..(seg + 1) * a].iter_mut().zip(row.iter()) {
                *c = c.saturating_add(x);
            }
            before = before.saturating_add(row.iter().sum::<u64>());
        }
        let t = fl_stats::chi_square_independence(&table, segments, a)?;
        out.push(Outcome {
            test: "run-position".into(),
            about: about(&[("input", json!(label)), ("segments", json!(segments))]),
            samples: t.samples,
            statistic: t.statistic,
            p_value: two_sided(&t)?,
        });
    }
    Ok(out)
}

/// The previous-input, request-size and place-in-response tests of one input of an
/// external run (the last: the law of the first, the in-between and the last output of
/// each response, so an order within a response that carries information fails).
pub(crate) fn schedule_outcomes(label: &str, contexts: &Contexts) -> Result<Vec<Outcome>> {
    let a = contexts.alphabet.max(1);
    let mut out = Vec::with_capacity(3);
    for (test, table, rows) in [
        (
            "previous-input",
            &contexts.previous_input,
            contexts.previous_input.len() / a,
        ),
        ("request-size", &contexts.request_size, SIZE_CLASSES),
        ("place-in-response", &contexts.place, 3),
    ] {
        let t = fl_stats::chi_square_independence(table, rows.max(1), a)?;
        out.push(Outcome {
            test: test.into(),
            about: about(&[("input", json!(label))]),
            samples: t.samples,
            statistic: t.statistic,
            p_value: t.p_value,
        });
    }
    Ok(out)
}

/// The reuse-at-any-lag test of one input of an external run: Bonferroni over every lag
/// tested of the smallest per-lag tail bound 2·e^(−exponent).
pub(crate) fn reuse_outcome(label: &str, stat: &ReuseStat) -> Outcome {
    let p = if stat.lags == 0 {
        1.0
    } else {
        (stat.lags as f64 * 2.0 * (-stat.max_exponent).exp()).min(1.0)
    };
    Outcome {
        test: "reuse-any-lag".into(),
        about: about(&[
            ("input", json!(label)),
            ("lag", json!(stat.at_lag)),
            ("lags_tested", json!(stat.lags)),
        ]),
        samples: stat.lags,
        statistic: stat.max_exponent,
        p_value: p,
    }
}

/// The report's sentence on the context tests.
pub(crate) fn context_note(external: bool, reuse: Option<&ReuseStat>) -> String {
    let mut note = format!(
        "run-position: each input's outputs cut, in stream order, into {:?} segments of equal \
         size, the segments x symbols table tested for homogeneity, two-sided (a law that \
         changes during the run, or counts held to their expectation)",
        POSITION_SEGMENTS
    );
    if external {
        note.push_str(&format!(
            "; schedule: requests of random sizes (1/{} of each input's outputs in requests \
             of one, 1/{} in requests of 2 to 15, the rest log-uniform up to the batch size), \
             the inputs' requests shuffled together from the seed; previous-input: the \
             outputs of each input by the input of the request before theirs, and \
             request-size: by the request's size class (1, 2-15, 16-255, 256+), each \
             tested for homogeneity (memory across callers, a law that depends on how many \
             are asked for), and place-in-response: by the output's place in its response \
             (first, in between, last: an order that carries information); reuse-any-lag: the autocorrelation of a random projection of \
             each input's outputs along the whole output stream of the run (every input, in \
             the order answered) at every lag with at least {} expected same-input pairs",
            crate::schedule::SINGLE_SHARE,
            crate::schedule::SMALL_SHARE,
            super::reuse::MIN_PAIRS
        ));
        if let Some(r) = reuse {
            note.push_str(&format!(
                " (lags 1 to {} in {} piece(s) of at most {} outputs, at most {} spread over \
                 the run{})",
                r.longest_lag,
                r.pieces,
                super::reuse::PIECE,
                super::reuse::MAX_PIECES,
                if r.short_pieces > 0 {
                    format!("; {} piece(s) too short to test", r.short_pieces)
                } else {
                    String::new()
                }
            ));
        }
        note.push_str(
            "; still assumed (docs/AUDIT_PROTOCOL.md, \"The auditor's assumptions\"): the \
             program does not know the schedule's seed (the default seed is public: use \
             --seed random against an adversarial program), it behaves after the run as \
             during it and under other request mixes as under this one, outputs of \
             different inputs share no randomness, only pairs of outputs depend, reuse farther apart than one tested piece shows only in the \
             run-position test, requests are sent one at a time to one process, and \
             response times and stderr are not read",
        );
    } else {
        note.push_str(
            "; the project's samplers draw every chunk of 2^18 outputs from its own ChaCha20 \
             stream, so the external schedule's tests (request sizes, callers, reuse at any \
             lag) are not run on them",
        );
    }
    note
}
