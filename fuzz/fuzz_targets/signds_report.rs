//! fl-signds report decoding and server ingestion on arbitrary input: decoding returns a
//! report or a typed error, never panics; a decoded report re-encodes to the same bytes;
//! a report the round rejects leaves the round's aggregate untouched. The same holds for
//! reports built from arbitrary parts with `Report::new`.
#![no_main]

use fl_signds::{Params, Report, Server};
use libfuzzer_sys::fuzz_target;

fn snapshot(round: &fl_signds::Round) -> (Vec<(u32, f64)>, u64, (u64, u64), usize) {
    (
        round.update(1.0),
        round.total_weight(),
        round.magrr_counts(),
        round.accepted(),
    )
}

fuzz_target!(|data: &[u8]| {
    // A server for d = 16 whose h is 1..=3 depending on the first byte's ε.
    let eps = 1.0 + f64::from(data.first().copied().unwrap_or(0) % 8);
    let Ok(params) = Params::default()
        .with_top_k_fraction(0.25)
        .and_then(|p| p.with_epsilon(eps))
    else {
        return;
    };
    let Ok(mut server) = Server::new(params, 16, 4.0) else {
        return;
    };
    let mut round = server.begin_round();
    let weight = u64::from(data.get(1).copied().unwrap_or(1));

    // 1. The bytes as an encoded report.
    match Report::decode(data) {
        Ok(report) => {
            assert_eq!(report.encode(), data);
            assert_eq!(report.encoded_len(), data.len());
            let before = snapshot(&round);
            if round.ingest(&report, weight).is_err() {
                assert_eq!(before, snapshot(&round));
            }
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    let before = snapshot(&round);
    if round.ingest_bytes(data, weight).is_err() {
        assert_eq!(before, snapshot(&round));
    }

    // 2. The bytes as raw parts: d, sign, bit, then indices (little-endian u64 words).
    let words: Vec<u64> = data
        .chunks_exact(8)
        .map(|c| {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            u64::from_le_bytes(b)
        })
        .collect();
    if words.len() >= 3 {
        let d = words[0] % 64;
        let sign = (words[1] % 5) as i64 - 2;
        let bit = words[2] % 3;
        let indices: Vec<u64> = words[3..].iter().map(|w| w % 80).collect();
        if let Ok(report) = Report::new(d, &indices, sign, bit) {
            assert!(report.indices().windows(2).all(|w| w[0] < w[1]));
            assert_eq!(Report::decode(&report.encode()).ok(), Some(report.clone()));
            let before = snapshot(&round);
            if round.ingest(&report, weight).is_err() {
                assert_eq!(before, snapshot(&round));
            }
        }
    }
    let mut weights = vec![0.0f32; 16];
    assert!(server.finish_round(round, &mut weights).is_ok());
    assert!(weights.iter().all(|w| w.is_finite()));
});
