//! The Rust side of the Rust-client / Python-server interoperability test: three clients
//! encode reports with this crate (fixed seed), and the committed fixture
//! `python/tests/data/signds_rust_reports.json` must be exactly what they produce today.
//! `python/tests/test_flower.py` feeds those bytes to `fl_privacy.flower.SignDSStrategy`
//! through Flower messages and checks the aggregate. Regenerate after a deliberate change
//! of the wire format or the sampler with `FL_SIGNDS_WRITE_FIXTURE=1 cargo test -p fl-signds
//! --test python_fixture`.

use std::fmt::Write as _;
use std::path::PathBuf;

use fl_signds::{Broadcast, Client, Params};
use rand::{SeedableRng, rngs::ChaCha20Rng};

const DIMENSION: usize = 40;
const TOP_K_FRACTION: f64 = 0.25;
const EPSILON: f64 = 5.0;
const WEIGHTS: [u64; 3] = [30, 45, 25];

fn fixture() -> Result<String, fl_signds::Error> {
    let params = Params::default()
        .with_top_k_fraction(TOP_K_FRACTION)?
        .with_epsilon(EPSILON)?;
    let client = Client::new(params, DIMENSION)?;
    let broadcast = Broadcast::default();
    let mut rng = ChaCha20Rng::seed_from_u64(24);
    let mut json = String::new();
    let _ = write!(
        json,
        "{{\n \"dimension\": {DIMENSION},\n \"top_k_fraction\": {TOP_K_FRACTION},\n \"epsilon\": {EPSILON},\n \"output_dimension\": {},\n \"broadcast\": {{\"r_est\": {:e}, \"phase\": \"growth\"}},\n \"clients\": [",
        client.law().output_dimension(),
        broadcast.r_est
    );
    for (c, weight) in WEIGHTS.iter().enumerate() {
        let update: Vec<f32> = (0..DIMENSION)
            .map(|i| ((i * 7 + c * 3) % 11) as f32 * 0.01 - 0.05)
            .collect();
        let out = client.encode(&update, &broadcast, &mut rng)?;
        let hex: String = out
            .report
            .encode()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let indices: Vec<String> = out
            .report
            .indices()
            .iter()
            .map(ToString::to_string)
            .collect();
        let _ = write!(
            json,
            "{}\n  {{\"weight\": {weight}, \"report\": \"{hex}\", \"indices\": [{}], \"sign\": {}, \"magrr_bit\": {}}}",
            if c == 0 { "" } else { "," },
            indices.join(", "),
            out.report.sign().value(),
            u8::from(out.report.magrr_bit())
        );
    }
    json.push_str("\n ]\n}\n");
    Ok(json)
}

#[test]
fn python_fixture_is_what_this_crate_encodes() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../python/tests/data/signds_rust_reports.json");
    let json = fixture().unwrap_or_else(|e| panic!("encoding failed: {e}"));
    if std::env::var_os("FL_SIGNDS_WRITE_FIXTURE").is_some() {
        std::fs::write(&path, &json).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    let committed =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        committed, json,
        "the committed fixture is not what fl-signds encodes (see this file's header)"
    );
}
