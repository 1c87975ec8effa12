//! The error-feedback state is zeroized, proven by scanning freed memory: this test binary
//! replaces the global allocator with fl-paillier's `FreeHookAllocator` (feature
//! `insecure-free-hook`, a test-only allocator that shows every freed block to a hook
//! before freeing it) and looks, in every block freed while armed, for 16 consecutive bytes
//! of the state (four f32 values the test knows the state holds). Dropping a `Feedback`,
//! calling `reset`, and the temporary v = update + state that each report replaces must
//! leave no copy. Negative control: an unwiped `Vec<f32>` copy of the same values must be
//! found, so a scan that cannot see is a failure too.
#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use fl_signds::{Broadcast, Client, Feedback, Params, Phase};
use rand::{SeedableRng, rngs::ChaCha20Rng};

static ARMED: AtomicBool = AtomicBool::new(false);
static HITS: AtomicUsize = AtomicUsize::new(0);
/// The pattern (16 bytes), fixed before arming; read in the hook without allocating.
static PATTERN: Mutex<[u8; 16]> = Mutex::new([0; 16]);

fn on_free(block: &[u8]) {
    if !ARMED.load(Ordering::SeqCst) || block.len() < 16 {
        return;
    }
    let Ok(pattern) = PATTERN.try_lock() else {
        return;
    };
    if block.windows(16).any(|w| w == &pattern[..]) {
        HITS.fetch_add(1, Ordering::SeqCst);
    }
}

#[global_allocator]
static ALLOCATOR: fl_paillier::FreeHookAllocator = fl_paillier::FreeHookAllocator::new(on_free);

/// Runs `f` armed and returns the number of freed blocks holding the pattern.
fn scan(f: impl FnOnce()) -> usize {
    HITS.store(0, Ordering::SeqCst);
    ARMED.store(true, Ordering::SeqCst);
    f();
    ARMED.store(false, Ordering::SeqCst);
    HITS.load(Ordering::SeqCst)
}

fn set_pattern(values: &[f32; 4]) {
    let mut p = PATTERN.lock().unwrap();
    for (i, v) in values.iter().enumerate() {
        p[4 * i..4 * i + 4].copy_from_slice(&v.to_ne_bytes());
    }
}

#[test]
fn feedback_state_leaves_no_copy_in_freed_memory() {
    let d = 256;
    let params = Params::default()
        .with_top_k_fraction(0.05)
        .unwrap()
        .with_epsilon(5.0)
        .unwrap();
    let client = Client::new(params, d).unwrap();
    let b = Broadcast {
        r_est: 1e-3,
        phase: Phase::Growth,
    };
    // Coordinates 0..4 hold small distinctive values that no top-k set of size 12 picks (the
    // others are ±0.5), so the state keeps them exactly unless a random index of the
    // selection hits them; then the pattern is what the state holds anyway, so pick the
    // pattern after the report.
    let mut update = vec![0.5f32; d];
    for (i, u) in update.iter_mut().enumerate() {
        if i % 2 == 1 {
            *u = -0.5;
        }
    }
    let secret = [1.234_567e-7f32, -7.654_321e-7, 3.141_592e-7, -2.718_281e-7];
    update[..4].copy_from_slice(&secret);
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let mut feedback = Feedback::new(d);
    let out = client
        .encode_with_feedback(&update, &b, &mut feedback, &mut rng)
        .unwrap();
    // The state at 0..4: v − credit where selected.
    let credit = (b.r_est * f64::from(out.report.sign().value())) as f32;
    let mut held = secret;
    for &j in out.report.indices() {
        if (j as usize) < 4 {
            held[j as usize] -= credit;
        }
    }
    // Wipe the caller's copy (ours to manage, not the crate's).
    update.iter_mut().for_each(|u| *u = 0.0);
    set_pattern(&held);

    // Control: an unwiped copy is found.
    let control = scan(|| {
        let copy: Vec<f32> = held.iter().copied().chain([0.0; 12]).collect();
        drop(std::hint::black_box(copy));
    });
    assert!(control >= 1, "the scan does not see an unwiped copy");

    // A second report: the temporary v and the old state are replaced and must be wiped.
    // (The new state holds held + 0 at 0..4 again, so look for it after the drop only.)
    let zero = vec![0.0f32; d];
    let hits = scan(|| {
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        let _ = client.encode_with_feedback(&zero, &b, &mut feedback, &mut rng);
    });
    assert_eq!(hits, 0, "a report left a copy of the state in freed memory");
    let hits = scan(|| {
        let mut copy = feedback.clone();
        copy.reset();
        drop(copy);
        drop(feedback);
    });
    assert_eq!(
        hits, 0,
        "dropping or resetting the state left a copy in freed memory"
    );
}
