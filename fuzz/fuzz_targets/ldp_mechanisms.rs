//! Every fl-ldp constructor with arbitrary parameters: it returns a mechanism or a typed
//! error, never panics, and a mechanism it returns has valid probabilities and a realised
//! ε that is not NaN and not above the request (2ε for MindSpore's Laplace scale).
#![no_main]

use fl_ldp::{
    BinaryRandomizedResponse, Categorical, DiscreteLaplace, EmbeddingDp, Epsilon, ExponentialForm,
    ExponentialMechanism, FiniteInputs, FiniteOutputs, FrequencyOracle, FrequencyProtocol,
    KaryRandomizedResponse, LabelDp, LabelKind, LaplaceCalibration, LaplaceOptions, Mechanism,
    ProbabilityVectorLaplace, RrWithPrior, TimingMode, law_epsilon,
};
use libfuzzer_sys::fuzz_target;

#[path = "ldp_input.rs"]
mod ldp_input;
use ldp_input::Input;

fn probability_ok(p: f64) -> bool {
    (0.0..=1.0).contains(&p)
}

fn claim_ok(requested: f64, realised: f64) {
    assert!(!realised.is_nan(), "NaN realised epsilon");
    assert!(
        realised >= 0.0 && realised <= requested,
        "{realised} > {requested}"
    );
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let raw_eps = input.param();
    let Ok(eps) = Epsilon::new(raw_eps) else {
        assert!(!(raw_eps.is_finite() && raw_eps >= 0.0));
        return;
    };
    let e = eps.value();

    let rr = BinaryRandomizedResponse::new(eps);
    assert!(probability_ok(rr.flip_probability()) && rr.flip_probability() > 0.0);
    assert!(probability_ok(rr.keep_probability()));
    claim_ok(e, rr.realised_epsilon());
    assert!(law_epsilon(&rr).is_ok_and(|l| !l.is_nan()));

    let k = match input.byte() % 4 {
        0 => input.count(3),
        1 => input.count(64),
        2 => 1 << 32,
        _ => input.u64() as usize,
    };
    if let Ok(m) = KaryRandomizedResponse::new(eps, k) {
        assert!(probability_ok(m.keep_probability()) && probability_ok(m.other_probability()));
        assert!(m.other_probability() > 0.0 || m.keep_probability() == 1.0);
        claim_ok(e, m.realised_epsilon());
        if k <= 64 {
            let law = m.output_probabilities(&0).unwrap_or_default();
            assert!(law.iter().all(|&p| probability_ok(p)));
            assert!(m.inputs().is_ok_and(|i| i.len() == k));
        }
    }

    let embedding = EmbeddingDp::new(if input.byte() % 2 == 0 {
        Some(eps)
    } else {
        None
    });
    if let (Some(p), Some(q)) = (
        embedding.one_to_one_probability(),
        embedding.zero_to_one_probability(),
    ) {
        assert!(probability_ok(p) && probability_ok(q));
        claim_ok(e / 2.0, embedding.per_coordinate_epsilon());
    }
    let _ = embedding.per_vector_epsilon(input.count(255));

    let labels = LabelDp::new(eps);
    let classes = input.count(40);
    if let Ok(claim) = labels.privacy(LabelKind::OneHot { classes }) {
        claim_ok(e, claim.epsilon);
    }

    let options = LaplaceOptions::default()
        .with_calibration(if input.byte() % 2 == 0 {
            LaplaceCalibration::Simplex
        } else {
            LaplaceCalibration::MindSporeCompatible
        })
        .with_tolerance(if input.byte() % 2 == 0 {
            1e-4
        } else {
            input.param()
        })
        .with_timing(if input.byte() % 2 == 0 {
            TimingMode::Exact
        } else {
            TimingMode::Bounded
        });
    let options = if input.byte() % 2 == 0 {
        options.with_granularity_exponent(i32::from(input.byte() as i8))
    } else {
        options
    };
    let dimension = match input.byte() % 3 {
        0 => input.count(16),
        1 => input.u64() as usize,
        _ => 1 << 40,
    };
    if let Ok(m) = ProbabilityVectorLaplace::new(eps, dimension, options) {
        let claim = m.privacy();
        let cap = match options.calibration {
            LaplaceCalibration::Simplex => e,
            _ => (2.0 * e).min(f64::MAX),
        };
        claim_ok(cap, claim.epsilon);
        assert!(probability_ok(claim.delta));
        assert!(m.noise_scale() > 0.0 && !m.noise_scale().is_nan());
        let d = m.noise();
        let _ = (d.pmf(0), d.cdf(-3), d.sf(7));
        assert!(probability_ok(d.pmf(0)));
    }
    let _ = DiscreteLaplace::new(input.u64(), input.u64());

    let form = if input.byte() % 2 == 0 {
        ExponentialForm::Standard
    } else {
        ExponentialForm::Monotone
    };
    if let Ok(m) = ExponentialMechanism::new(eps, input.param(), form) {
        claim_ok(e, m.privacy().epsilon);
        assert!(m.scale() >= 0.0 && !m.scale().is_nan());
    }

    let prior = input.vector(12);
    if let Ok(m) = RrWithPrior::new(eps, &prior) {
        claim_ok(e, m.realised_epsilon());
        assert!(!m.top_labels().is_empty());
        assert!(law_epsilon(&m).is_ok_and(|l| !l.is_nan()));
    }

    let categories = input.count(300);
    for protocol in [
        FrequencyProtocol::Grr,
        FrequencyProtocol::Oue,
        FrequencyProtocol::Olh,
    ] {
        if let Ok(o) = FrequencyOracle::new(eps, categories, protocol) {
            let (p, q) = o.support_probabilities();
            assert!(probability_ok(p) && probability_ok(q));
            claim_ok(e, o.privacy().epsilon);
            assert!(!o.variance(10, 1.0).is_nan());
        }
    }
    let _ = FrequencyOracle::best(eps, categories);

    let logs = input.vector(40);
    if let Ok(c) = Categorical::from_log_weights(&logs) {
        let p = c.probabilities();
        assert!(p.iter().all(|&x| probability_ok(x)));
    }
    let _ = Categorical::from_weights(&logs);
});
