//! The order and sizes in which an external mechanism is asked for outputs: drawn from the
//! run's seed, so that the program under test cannot predict them.
//!
//! A real client asks for one output at a time, for one user after another. An audit that
//! asks for 10⁴ outputs of one input, then 10⁴ of the next, never exercises a mechanism
//! whose law depends on the request size, or whose output for one caller depends on what
//! the previous caller asked (a buffer that keeps the previous user's value). So each
//! input's outputs are split into requests of random sizes — a fixed share of the outputs
//! in requests of one output ([`SINGLE_SHARE`]), a share in requests of 2 to 15 outputs
//! ([`SMALL_SHARE`], odd and even sizes alike), the rest in sizes drawn log-uniformly
//! between 16 and the batch size — and the requests of all inputs are shuffled together
//! (Fisher–Yates on a ChaCha20 stream of the run's seed). The schedule depends on the seed,
//! the inputs and the sizes only, never on an output: whatever it makes the conditional
//! tables and the autocorrelation hold, it holds under the null hypothesis too.

use rand::{RngExt, SeedableRng, rngs::ChaCha20Rng};

use crate::seeds::mix;

/// Domain separation of the schedule's stream from the other seeds derived from a point's.
const SCHEDULE_DOMAIN: u64 = 0x5343_4845_4455_4C45; // "SCHEDULE"

/// The share of each input's outputs asked for in requests of one output.
pub(crate) const SINGLE_SHARE: u64 = 32; // 1/32

/// The share of each input's outputs asked for in requests of 2 to 15 outputs.
pub(crate) const SMALL_SHARE: u64 = 32; // 1/32

/// The smallest size of the log-uniform requests.
const LARGE_FROM: u64 = 16;

/// One request of the schedule: `size` outputs of input number `input`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Request {
    /// The input's number.
    pub input: usize,
    /// Outputs asked for (at least 1, at most the batch size).
    pub size: u64,
}

/// The requests for `n` outputs of each of `inputs` inputs, at most `batch` per request,
/// in the order they are sent (see the module docs). Every input gets exactly `n` outputs.
#[must_use]
pub(crate) fn schedule(inputs: usize, n: u64, batch: u64, seed: u64) -> Vec<Request> {
    let batch = batch.max(1);
    let mut rng = ChaCha20Rng::seed_from_u64(mix(seed, SCHEDULE_DOMAIN));
    let mut requests = Vec::new();
    for input in 0..inputs {
        let mut left = n;
        let mut push = |size: u64, left: &mut u64| {
            let size = size.clamp(1, batch).min(*left);
            if size > 0 {
                requests.push(Request { input, size });
                *left -= size;
            }
        };
        // Requests of one output.
        let singles = n / SINGLE_SHARE;
        for _ in 0..singles {
            push(1, &mut left);
        }
        // Requests of 2 to 15 outputs, until their share is asked for.
        let small_target = left.saturating_sub(n / SMALL_SHARE);
        while left > small_target {
            push(rng.random_range(2..=15), &mut left);
        }
        // The rest: log-uniform sizes between 16 and the batch size.
        let (lo, hi) = if batch > LARGE_FROM {
            ((LARGE_FROM as f64).ln(), (batch as f64).ln())
        } else {
            (0.0, (batch as f64).ln())
        };
        while left > 0 {
            let size = (lo + (hi - lo) * rng.random::<f64>()).exp().round() as u64;
            push(size, &mut left);
        }
    }
    // Fisher–Yates: every interleaving of the inputs' requests is equally likely.
    for i in (1..requests.len()).rev() {
        let j = rng.random_range(0..=i);
        requests.swap(i, j);
    }
    requests
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_input_gets_its_outputs_in_sizes_of_every_class() {
        let s = schedule(3, 100_000, 10_000, 7);
        for input in 0..3 {
            let sizes: Vec<u64> = s
                .iter()
                .filter(|r| r.input == input)
                .map(|r| r.size)
                .collect();
            assert_eq!(sizes.iter().sum::<u64>(), 100_000);
            assert!(sizes.iter().all(|&k| (1..=10_000).contains(&k)));
            let ones = sizes.iter().filter(|&&k| k == 1).count();
            assert_eq!(ones, 100_000 / 32);
            for odd in [3, 5, 7, 13] {
                assert!(sizes.contains(&odd), "size {odd} missing");
            }
            assert!(sizes.iter().any(|&k| k > 1000));
        }
        // Interleaved: the inputs alternate often, not in three runs.
        let switches = s.windows(2).filter(|w| w[0].input != w[1].input).count();
        assert!(switches > s.len() / 2, "{switches} of {}", s.len());
        // Reproducible from the seed, different across seeds.
        assert_eq!(s, schedule(3, 100_000, 10_000, 7));
        assert_ne!(s, schedule(3, 100_000, 10_000, 8));
    }

    #[test]
    fn small_runs_and_small_batches_are_scheduled_exactly() {
        for (n, batch) in [(0, 10), (1, 10), (5, 1), (31, 3), (1000, 16), (777, 10_000)] {
            let s = schedule(2, n, batch, 1);
            for input in 0..2 {
                let total: u64 = s.iter().filter(|r| r.input == input).map(|r| r.size).sum();
                assert_eq!(total, n, "n = {n}, batch = {batch}");
            }
            assert!(s.iter().all(|r| (1..=batch).contains(&r.size)));
        }
    }
}
