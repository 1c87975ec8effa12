//! fl-audit's parsers of untrusted text: suite files (written by auditors) and responses
//! of external mechanisms (written by any program). Both must return a value or a one-line
//! error, never panic; a parsed suite's grid must expand within its documented bound.
#![no_main]

use fl_audit::{
    protocol::{OutputKind, Outputs, parse_response},
    suite::{MAX_GRID_POINTS, Suite},
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Suite::parse("fuzz", text) {
        Ok(suite) => {
            let points = suite.points();
            assert!(!points.is_empty() && points.len() <= MAX_GRID_POINTS);
            for p in &points {
                let _ = suite.sampler_params(p);
            }
        }
        Err(e) => assert!(!e.to_string().contains('\n') || text.contains('\n')),
    }
    for (n, kind) in [
        (1, OutputKind::Class(2)),
        (2, OutputKind::Class(5)),
        (2, OutputKind::Bits(3)),
        (1, OutputKind::Reals(2)),
        (2, OutputKind::IndexSet { dim: 8, size: 2 }),
        (1, OutputKind::ClientReport { dim: 8, size: 2 }),
        (
            2,
            OutputKind::OlhSeeded {
                seeds: 25,
                buckets: 5,
            },
        ),
        (
            1,
            OutputKind::OlhHashed {
                values: 3,
                buckets: 5,
            },
        ),
    ] {
        match parse_response(text, n, kind) {
            Ok(Outputs::Classes(v)) => assert!(
                v.len() == n
                    && v.iter().all(|&c| match kind {
                        OutputKind::Class(k) => c < k,
                        OutputKind::OlhSeeded { seeds, buckets } => (c as u64) < seeds * buckets,
                        _ => false,
                    })
            ),
            Ok(Outputs::Bits(v)) => assert_eq!(v.len(), n * 3),
            Ok(Outputs::Reals(v)) => assert!(v.len() == n * 2 && v.iter().all(|x| x.is_finite())),
            Ok(Outputs::Sets(v)) => {
                assert!(v.len() == n && v.iter().all(|s| s.len() == 2 && s.iter().all(|&j| j < 8)))
            }
            Ok(Outputs::Reports(v)) => {
                assert!(v.len() == n && v.iter().all(|r| r.indices.len() == 2))
            }
            Ok(Outputs::Hashed(v)) => {
                assert!(v.len() == n && v.iter().all(|r| r.bucket < 5 && r.hashes.len() == 3))
            }
            Err(e) => assert!(!e.is_empty()),
        }
    }
});
