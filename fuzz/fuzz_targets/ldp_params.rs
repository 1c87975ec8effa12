//! fl-ldp parameter constructors and the exact coin on arbitrary bit patterns: they must
//! return values or typed errors, never panic, and a valid coin must report its bias exactly.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rand::{SeedableRng, rngs::ChaCha8Rng};

fuzz_target!(|data: &[u8]| {
    for chunk in data.chunks_exact(8) {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(chunk);
        let x = f64::from_le_bytes(bytes);
        match fl_ldp::Epsilon::new(x) {
            Ok(e) => assert!(e.value().is_finite() && e.value() >= 0.0),
            Err(err) => assert!(!err.to_string().is_empty()),
        }
        if let Ok(p) = fl_ldp::Probability::new("p", x) {
            let coin = fl_ldp::Bernoulli::new(p);
            assert_eq!(coin.probability().to_bits(), p.value().to_bits());
            let mut rng = ChaCha8Rng::seed_from_u64(u64::from_le_bytes(bytes));
            let _ = coin.sample(&mut rng);
        }
        let _ = fl_ldp::logistic(x.abs());
        let _ = fl_ldp::logistic_complement(x.abs());
    }
});
