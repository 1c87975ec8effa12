//! Every fl-ldp sampler with arbitrary inputs (NaN, ±∞, empty, wrong shapes, out-of-range
//! classes, malformed reports): each returns an output of the right shape or a typed error,
//! never panics and never returns the raw input on error.
#![no_main]

use fl_ldp::{
    Bernoulli, BinaryRandomizedResponse, Categorical, DiscreteLaplace, EmbeddingDp, Epsilon,
    ExponentialForm, ExponentialMechanism, FrequencyOracle, FrequencyProtocol,
    KaryRandomizedResponse, LabelDp, LaplaceOptions, OlhReport, OptimizedLocalHashing, Probability,
    ProbabilityVectorLaplace, Report, RrWithPrior, TimingMode,
};
use libfuzzer_sys::fuzz_target;
use rand::{SeedableRng, rngs::ChaCha8Rng};

#[path = "ldp_input.rs"]
mod ldp_input;
use ldp_input::Input;

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let Ok(eps) = Epsilon::new(input.param()) else {
        return;
    };
    let mut rng = ChaCha8Rng::seed_from_u64(input.seed());

    // Binary RR: batch, buffer with a possibly wrong length.
    let rr = BinaryRandomizedResponse::new(eps);
    let bits: Vec<bool> = input.vector(64).iter().map(|&x| x > 0.5).collect();
    assert_eq!(rr.randomize_bits(&bits, &mut rng).len(), bits.len());
    let mut out = vec![false; input.count(64)];
    assert_eq!(
        rr.randomize_into(&bits, &mut out, &mut rng).is_ok(),
        out.len() == bits.len()
    );
    let _ = rr.estimate_ones(input.u64(), input.u64());

    // k-ary RR: index and one-hot forms with arbitrary values.
    let k = input.count(12);
    if let Ok(m) = KaryRandomizedResponse::new(eps, k) {
        let classes: Vec<usize> = (0..input.count(32)).map(|_| input.count(15)).collect();
        if let Ok(out) = m.randomize_classes(&classes, &mut rng) {
            assert!(out.len() == classes.len() && out.iter().all(|&c| c < k));
        }
        let one_hot = input.vector(64);
        if let Ok(out) = m.randomize_one_hot(&one_hot, &mut rng) {
            assert_eq!(out.len(), one_hot.len());
            for row in out.chunks(k) {
                assert_eq!(row.iter().filter(|&&v| v == 1.0).count(), 1);
            }
        }
        let _ = m.randomize(input.count(15), &mut rng);
    }

    // LabelDP with an arbitrary shape (rank 0..=3) over arbitrary data.
    let dp = LabelDp::new(eps);
    let rank = input.count(3);
    let shape: Vec<usize> = (0..rank)
        .map(|_| match input.byte() % 4 {
            0 => usize::MAX,
            _ => input.count(8),
        })
        .collect();
    let labels = input.vector(64);
    if let Ok(out) = dp.privatize(&labels, &shape, &mut rng) {
        assert_eq!(out.len(), labels.len());
        assert!(out.iter().all(|&v| v == 0.0 || v == 1.0));
    }
    let labels32: Vec<f32> = labels.iter().map(|&v| v as f32).collect();
    let _ = dp.privatize(&labels32, &shape, &mut rng);

    // EmbeddingDP: NaN must be an error, never partial output.
    let embedding = input.vector(64);
    for m in [EmbeddingDp::new(Some(eps)), EmbeddingDp::quantise_only()] {
        match m.privatize(&embedding, &mut rng) {
            Ok(out) => {
                assert!(!embedding.iter().any(|x| x.is_nan()));
                assert_eq!(out.len(), embedding.len());
                assert!(out.iter().all(|&b| b <= 1));
            }
            Err(_) => assert!(embedding.iter().any(|x| x.is_nan())),
        }
    }

    // Laplace: fail-closed on any invalid vector.
    let d = input.count(8);
    let timing = if input.byte() % 8 == 0 {
        TimingMode::Bounded
    } else {
        TimingMode::Exact
    };
    if let Ok(m) =
        ProbabilityVectorLaplace::new(eps, d, LaplaceOptions::default().with_timing(timing))
    {
        let x = input.vector(9);
        match m.privatize(&x, &mut rng) {
            Ok(y) => {
                assert_eq!(y.len(), d);
                assert!(x.iter().all(|v| v.is_finite() && *v >= 0.0));
                assert!(y.iter().all(|v| !v.is_nan()));
            }
            Err(_) => {}
        }
        let _ = m.coordinate_law(&x, input.count(9));
    }

    // The exact coin's batch APIs and the raw discrete Laplace with arbitrary scales.
    if let Ok(p) = Probability::new("p", input.f64()) {
        let coin = Bernoulli::new(p);
        let mut flips = vec![false; input.count(64)];
        coin.fill(&mut rng, &mut flips);
        let mut words = vec![0u64; input.count(2)];
        coin.fill_bits(&mut rng, &mut words);
    }
    let numerator = if input.byte() % 2 == 0 {
        input.u64()
    } else {
        u64::from(input.byte())
    };
    let denominator = if input.byte() % 2 == 0 {
        input.u64()
    } else {
        u64::from(input.byte())
    };
    if let Ok(noise) = DiscreteLaplace::new(numerator, denominator) {
        let z = noise.sample(&mut rng);
        assert!(noise.pmf(z) >= 0.0 && !noise.cdf(z).is_nan() && !noise.sf(z).is_nan());
        if input.byte() % 16 == 0 {
            let _ = noise.sample_bounded(&mut rng);
        }
    }

    // Exponential mechanism and raw log-weights.
    if let Ok(m) = ExponentialMechanism::new(eps, input.param(), ExponentialForm::Standard) {
        let utilities = input.vector(16);
        if let Ok(o) = m.select(&utilities, &mut rng) {
            assert!(o < utilities.len());
            let p = m.probabilities(&utilities).unwrap_or_default();
            assert!(p.iter().all(|x| (0.0..=1.0).contains(x)));
        }
    }
    let logs = input.vector(16);
    if let Ok(c) = Categorical::from_log_weights(&logs) {
        let i = c.sample(&mut rng);
        assert!(i < logs.len() && logs[i] != f64::NEG_INFINITY);
    }
    if let Ok(c) = Categorical::from_weights(&logs) {
        let counts = c.sample_counts(u64::from(input.byte() % 8), &mut rng);
        assert_eq!(counts.len(), logs.len());
    }

    // RR with prior and the frequency oracles, including malformed reports.
    let prior = input.vector(10);
    if let Ok(m) = RrWithPrior::new(eps, &prior) {
        if let Ok(y) = m.randomize(input.count(12), &mut rng) {
            assert!(m.top_labels().contains(&y));
        }
    }
    if let Ok(olh) = OptimizedLocalHashing::new(eps, input.count(40)) {
        let _ = olh.bucket_law(input.count(40), u128::from(input.u64()));
        let _ = olh.hash(u128::from(input.u64()), input.count(40));
    }
    let categories = input.count(20);
    for protocol in [
        FrequencyProtocol::Grr,
        FrequencyProtocol::Oue,
        FrequencyProtocol::Olh,
    ] {
        if let Ok(o) = FrequencyOracle::new(eps, categories, protocol) {
            let mut counter = o.support_counter();
            if let Ok(r) = o.randomize(input.count(24), &mut rng) {
                assert!(counter.add(&r).is_ok());
            }
            let junk = match input.byte() % 3 {
                0 => Report::Grr(input.count(255)),
                1 => Report::Oue(vec![true; input.count(30)]),
                _ => Report::Olh(OlhReport {
                    seed: u128::from(input.u64()),
                    bucket: input.u64(),
                }),
            };
            let _ = counter.add(&junk);
            assert!(counter.estimate().iter().all(|v| !v.is_nan()));
        }
    }
});
