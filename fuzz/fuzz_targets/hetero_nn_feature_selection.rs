//! fl-hetero-nn: the host's features chosen privately (`feature_selection`: the probe, the
//! guest's selection, `FeatureSelection::host_defence`, the stage-2 randomisation and
//! `spread_over_columns`) on arbitrary configurations, matrices, labels and received
//! messages.
//!
//! Bytes 0..24 give ε₁, ε₂ and ε_sel as f64 (any bits), bytes 24..27 the number of
//! features, levels and the count; the rest fills the host matrix, the labels and a
//! received probe release and selection. Whatever the input, every call returns or fails
//! with a typed error, never a panic; when the configuration is valid and the input well
//! formed (finite matrix, binary labels, count ≤ features) the whole pipeline
//! **succeeds** (no error can depend on a label's value or a feature's size), and the
//! defence's ε per row never exceeds ε₁ + ε₂ (up to the float sum's last bits).
#![no_main]

use fl_hetero_nn::Matrix;
use fl_hetero_nn::feature_selection::{
    FeatureProbe, FeatureSelection, FeatureSelector, ProbeRelease,
};
use fl_hetero_nn::host_features::FeatureRandomizer;
use fl_ldp::Epsilon;
use libfuzzer_sys::fuzz_target;
use rand::{SeedableRng, rngs::ChaCha8Rng};

const ROWS: usize = 6;

fn f64_at(data: &[u8], i: usize) -> f64 {
    let mut b = [0u8; 8];
    for (k, x) in b.iter_mut().enumerate() {
        *x = data.get(i * 8 + k).copied().unwrap_or(0);
    }
    f64::from_le_bytes(b)
}

fuzz_target!(|data: &[u8]| {
    let (e1, e2, esel) = (f64_at(data, 0), f64_at(data, 1), f64_at(data, 2));
    let byte = |i: usize| data.get(i).copied().unwrap_or(0);
    let d = usize::from(byte(24) % 6);
    let levels = usize::from(byte(25) % 9);
    let count = usize::from(byte(26) % 7);
    let rest = data.get(27..).unwrap_or(&[]);
    let x = Matrix::from_fn(ROWS, d, |i, j| f64_at(rest, i * d.max(1) + j));
    let labels: Vec<f64> = (0..ROWS)
        .map(|i| f64::from(rest.get(400 + i).copied().unwrap_or(0) & 1))
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(u64::from(byte(0)));

    // Received messages with arbitrary contents never panic.
    let tail = |i: usize| usize::from(rest.get(300 + i).copied().unwrap_or(0));
    let received = ProbeRelease::new(
        d,
        levels,
        (0..ROWS).map(|i| tail(i) % 8).collect(),
        (0..ROWS).map(|i| tail(ROWS + i) % 10).collect(),
    );
    if let (Ok(r), Ok(e)) = (&received, Epsilon::new(esel)) {
        if let Ok(s) = FeatureSelector::new(count, e) {
            let _ = s.select(r, &labels, &mut rng);
        }
    }
    let _ = FeatureSelection::new(d, (0..count).map(|i| tail(20 + i) % 8).collect());

    // The pipeline.
    let (Ok(eps1), Ok(eps2), Ok(epsel)) = (Epsilon::new(e1), Epsilon::new(e2), Epsilon::new(esel))
    else {
        return;
    };
    let config_ok = d >= 1
        && (2..=8).contains(&levels)
        && count >= 1
        && count <= d
        && esel > 0.0
        && FeatureRandomizer::new(-2.0, 2.0, levels, eps1).is_ok();
    let well_formed = x.as_slice().iter().all(|v| v.is_finite());
    let run = || -> Result<f64, fl_hetero_nn::Error> {
        let probe = FeatureProbe::new(d, FeatureRandomizer::new(-2.0, 2.0, levels, eps1)?)?;
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let (release, receipt) = probe.probe(&x, &mut rng)?;
        let selection = FeatureSelector::new(count, epsel)?.select(&release, &labels, &mut rng)?;
        let defence = selection.host_defence(receipt, -2.0, 2.0, levels, eps2)?;
        let out = defence.privatize_host_features(&x, &mut rng)?;
        let _ = selection.spread_over_columns(out.features())?;
        Ok(out.randomization().epsilon_per_row())
    };
    let r = run();
    if config_ok && well_formed {
        let e = r.unwrap_or_else(|err| panic!("a valid pipeline failed: {err:?}"));
        // The shares are rounded down; the float sum may round up by a few ulps
        // (reporting more ε than spent, never less).
        assert!(
            e <= (e1 + e2) * (1.0 + 1e-12),
            "ε per row {e} above ε₁ + ε₂ = {}",
            e1 + e2
        );
    }
});
