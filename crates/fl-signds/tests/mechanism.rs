//! The selection through fl-ldp's mechanism contract (`Mechanism`, `FiniteOutputs`,
//! `FiniteInputs`): the law over whole output sets agrees with P(ν), realises at most the
//! claimed ε (`law_epsilon`), and the sampler follows it (chi-square at a stated level,
//! with a negative control).

// Test helpers outside #[test] functions: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use fl_ldp::{FiniteInputs, FiniteOutputs, Mechanism, Neighbouring, law_epsilon};
use fl_signds::{Profile, SelectionLaw};
use fl_stats::{Alpha, HypothesisTest, chi_square_gof};
use rand::{SeedableRng, rngs::ChaCha20Rng};

fn law(d: usize, k: usize, h: usize, eps: f64) -> SelectionLaw {
    let t = fl_signds::law::threshold(k, d, h, eps, Profile::Exact).unwrap();
    SelectionLaw::new(k, d, h, t, eps, Profile::Exact).unwrap()
}

#[test]
fn the_set_law_agrees_with_nu_and_realises_the_claim() {
    for (d, k, h, eps) in [(8, 2, 2, 1.0), (9, 3, 3, 2.5), (6, 2, 4, 0.5)] {
        let m = law(d, k, h, eps);
        let claim = m.privacy();
        assert_eq!(claim.epsilon, m.realised_epsilon());
        assert_eq!(claim.requested_epsilon, eps);
        assert_eq!(claim.delta, 0.0);
        assert_eq!(claim.neighbouring, Neighbouring::AnyTwoInputs);
        let inputs = m.inputs().unwrap();
        assert_eq!(inputs.len(), binomial(d, k));
        for s in inputs.iter().take(5) {
            let p = m.output_probabilities(s).unwrap();
            let total: f64 = p.iter().sum();
            assert!((total - 1.0).abs() < 1e-12, "{total}");
            // Marginal over ν = |J ∩ S| is P(ν).
            let mut by_nu = vec![0.0; h + 1];
            let mut set: Vec<u32> = (0..h as u32).collect();
            for (r, &q) in p.iter().enumerate() {
                assert_eq!(m.output_index(&set).unwrap(), r);
                by_nu[set.iter().filter(|j| s.contains(j)).count()] += q;
                if r + 1 < p.len() {
                    set = next_set(&set, d);
                }
            }
            for (a, b) in by_nu.iter().zip(m.probabilities()) {
                assert!(
                    (a - b).abs() < 1e-12,
                    "{by_nu:?} vs {:?}",
                    m.probabilities()
                );
            }
        }
        // The law realises at most the claim, and (the utility being {0, 1}) reaches it.
        let worst = law_epsilon(&m).unwrap();
        assert!(
            worst <= claim.epsilon + 1e-12,
            "{worst} > {}",
            claim.epsilon
        );
        assert!(worst > eps - 1e-9, "{worst} vs {eps}");
    }
}

/// The next h-subset of 0..d in colex order (test-side reference).
fn next_set(set: &[u32], d: usize) -> Vec<u32> {
    let mut s = set.to_vec();
    for i in 0..s.len() {
        let limit = if i + 1 < s.len() { s[i + 1] } else { d as u32 };
        if s[i] + 1 < limit {
            s[i] += 1;
            for (t, v) in s[..i].iter_mut().enumerate() {
                *v = t as u32;
            }
            return s;
        }
    }
    s
}

/// The sampler's histogram over the 28 sets of d = 8, h = 2 follows the set law (α =
/// 1e-4); the same counts are rejected against the law at ε = 1.2 (negative control).
#[test]
fn sampled_sets_follow_the_set_law() {
    let alpha = Alpha::new(1e-4).unwrap();
    let m = law(8, 2, 2, 1.0);
    let s: Vec<u32> = vec![1, 6];
    let mut rng = ChaCha20Rng::seed_from_u64(12);
    let counts = m.sample_counts(&s, 200_000, &mut rng).unwrap();
    assert_eq!(counts.len(), 28);
    let p = m.output_probabilities(&s).unwrap();
    let t = chi_square_gof(&counts, &p).unwrap();
    assert!(!t.rejects(alpha), "p = {}", t.p_value);
    let wrong = law(8, 2, 2, 1.2).output_probabilities(&s).unwrap();
    let t = chi_square_gof(&counts, &wrong).unwrap();
    assert!(t.rejects(alpha), "control p = {}", t.p_value);
    // Mechanism::sample is the same sampler.
    let mut a = ChaCha20Rng::seed_from_u64(3);
    let mut b = ChaCha20Rng::seed_from_u64(3);
    assert_eq!(
        Mechanism::sample(&m, &s, &mut a).unwrap(),
        m.sample(&s, &mut b).unwrap()
    );
}

#[test]
fn malformed_sets_and_huge_laws_are_errors() {
    let m = law(8, 2, 2, 1.0);
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    for bad in [vec![1u32], vec![1, 1], vec![1, 8]] {
        assert!(Mechanism::sample(&m, &bad, &mut rng).is_err(), "{bad:?}");
        assert!(m.output_probabilities(&bad).is_err(), "{bad:?}");
    }
    for bad in [
        vec![1u32],
        vec![2, 1],
        vec![3, 3],
        vec![1, 8],
        vec![0, 1, 2],
    ] {
        assert!(m.output_index(&bad).is_err(), "{bad:?}");
    }
    assert_eq!(m.output_index(&vec![6, 7]).unwrap(), 27);
    // d = 1000, h = 20: C(d, h) is far above 2^24 — sampling works, explicit laws are refused.
    let big = law(1000, 100, 20, 2.0);
    let s: Vec<u32> = (0..100).collect();
    assert!(big.output_count(&s).is_err());
    assert!(big.output_probabilities(&s).is_err());
    assert!(big.output_index(&(0..20).collect()).is_err());
    assert!(big.inputs().is_err());
    assert_eq!(Mechanism::sample(&big, &s, &mut rng).unwrap().len(), 20);
}

fn binomial(n: usize, r: usize) -> usize {
    (0..r).fold(1, |c, i| c * (n - i) / (i + 1))
}
