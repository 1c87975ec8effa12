//! Property tests over arbitrary parameters (threat D6): for every ε that `Epsilon`
//! accepts (any finite value ≥ 0, from raw bit patterns), every mechanism's probabilities
//! are in [0, 1] and never NaN, no randomisation probability is 0, and the realised ε is
//! never above the request; invalid ε is always a typed error.

// Test helpers outside #[test] functions: a failing unwrap is a failing test.
#![allow(clippy::unwrap_used)]

use fl_ldp::{
    BinaryRandomizedResponse, EmbeddingDp, Epsilon, Error, ExponentialForm, ExponentialMechanism,
    FrequencyOracle, FrequencyProtocol, KaryRandomizedResponse, LaplaceCalibration, LaplaceOptions,
    ProbabilityVectorLaplace, RrWithPrior,
};
use proptest::prelude::*;

fn valid(p: f64) -> bool {
    (0.0..=1.0).contains(&p)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn epsilon_domain(bits in any::<u64>()) {
        let x = f64::from_bits(bits);
        match Epsilon::new(x) {
            Ok(e) => prop_assert!(e.value().is_finite() && e.value() >= 0.0),
            Err(err) => {
                prop_assert!(!(x.is_finite() && x >= 0.0));
                prop_assert!(matches!(err, Error::InvalidEpsilon { .. }), "{err}");
            }
        }
    }

    #[test]
    fn randomized_response_family(bits in any::<u64>(), k in 2usize..2000) {
        let x = f64::from_bits(bits).abs();
        prop_assume!(x.is_finite());
        let eps = Epsilon::new(x).unwrap();
        let rr = BinaryRandomizedResponse::new(eps);
        prop_assert!(rr.flip_probability() > 0.0 && rr.flip_probability() <= 0.5);
        prop_assert!(valid(rr.keep_probability()));
        prop_assert!(rr.realised_epsilon() >= 0.0 && rr.realised_epsilon() <= x);

        let kr = KaryRandomizedResponse::new(eps, k).unwrap();
        prop_assert!(kr.randomisation_probability() > 0.0);
        prop_assert!(valid(kr.keep_probability()) && valid(kr.other_probability()));
        prop_assert!(kr.keep_probability() >= kr.other_probability());
        prop_assert!(kr.realised_epsilon() >= 0.0 && kr.realised_epsilon() <= x);

        let em = EmbeddingDp::new(Some(eps));
        prop_assert!(em.per_coordinate_epsilon() <= x / 2.0);
        prop_assert!(em.zero_to_one_probability().unwrap() > 0.0);

        for protocol in [FrequencyProtocol::Grr, FrequencyProtocol::Oue, FrequencyProtocol::Olh] {
            let o = FrequencyOracle::new(eps, k, protocol).unwrap();
            let (p, q) = o.support_probabilities();
            prop_assert!(valid(p) && valid(q) && q > 0.0);
            prop_assert!(o.privacy().epsilon <= x);
            prop_assert!(!o.variance(100, 10.0).is_nan());
        }
    }

    #[test]
    fn laplace_and_exponential(bits in any::<u64>(), d in 1usize..64, s in any::<u64>()) {
        let x = f64::from_bits(bits).abs();
        prop_assume!(x.is_finite());
        let eps = Epsilon::new(x).unwrap();
        for calibration in [LaplaceCalibration::Simplex, LaplaceCalibration::MindSporeCompatible] {
            let options = LaplaceOptions::default().with_calibration(calibration);
            match ProbabilityVectorLaplace::new(eps, d, options) {
                Ok(m) => {
                    let cap = if calibration == LaplaceCalibration::Simplex { x } else { 2.0 * x };
                    prop_assert!(m.realised_epsilon() > 0.0 && m.realised_epsilon() <= cap);
                    prop_assert!(m.noise_scale() > 0.0 && m.noise_scale().is_finite());
                }
                Err(e) => prop_assert!(
                    matches!(e, Error::InvalidParameter { .. } | Error::PrecisionLimit { .. }),
                    "{e}"
                ),
            }
        }
        let sensitivity = f64::from_bits(s).abs();
        match ExponentialMechanism::new(eps, sensitivity, ExponentialForm::Standard) {
            Ok(m) => {
                prop_assert!(m.realised_epsilon() <= x);
                let p = m.probabilities(&[0.0, sensitivity, -sensitivity]);
                if let Ok(p) = p {
                    prop_assert!(p.iter().all(|v| valid(*v)));
                }
            }
            Err(e) => prop_assert!(!(sensitivity.is_finite() && sensitivity > 0.0), "{e}"),
        }
    }

    #[test]
    fn rr_with_prior_any_prior(bits in any::<u64>(), prior in prop::collection::vec(0.0f64..10.0, 2..12)) {
        let x = f64::from_bits(bits).abs();
        prop_assume!(x.is_finite());
        let m = RrWithPrior::new(Epsilon::new(x).unwrap(), &prior).unwrap();
        prop_assert!(m.realised_epsilon() <= x);
        for label in 0..prior.len() {
            let mut total = 0.0;
            for o in 0..prior.len() {
                let p = m.probability(label, o).unwrap();
                prop_assert!(valid(p));
                total += p;
            }
            prop_assert!((total - 1.0).abs() < 1e-9);
        }
    }
}
