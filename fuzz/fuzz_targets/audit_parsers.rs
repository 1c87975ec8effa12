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
    ] {
        match parse_response(text, n, kind) {
            Ok(Outputs::Classes(v)) => assert!(
                v.len() == n
                    && v.iter().all(|&c| match kind {
                        OutputKind::Class(k) => c < k,
                        _ => false,
                    })
            ),
            Ok(Outputs::Bits(v)) => assert_eq!(v.len(), n * 3),
            Ok(Outputs::Reals(v)) => assert!(v.len() == n * 2 && v.iter().all(|x| x.is_finite())),
            Err(e) => assert!(!e.is_empty()),
        }
    }
});
