//! fl-hetero-nn: one training step (forward + backward, all 7 messages) at n = 256,
//! d_A = 64, m = 32 with a 2048-bit key: FateFaithful unpacked (FATE's cost structure:
//! textbook encryption, one value per ciphertext, no re-randomisation) against Hardened
//! packed with DJN encryption (`Encryption::Djn`) and with key-owner CRT encryption
//! (`Encryption::KeyOwnerCrt`, the default), side by side in one run.
//! `docs/PERFORMANCE.md` reports the ratios.
//!
//! A FateFaithful step at this size takes many minutes, more than criterion's minimum of 10
//! samples allows, so the default run times it **once** (printed before the criterion
//! group, with messages and bytes per step) and runs the criterion group (10 flat samples)
//! for the hardened variants only. `FL_HETERO_ONESHOT=1` times one step of every variant
//! and skips criterion. `FL_HETERO_VARIANTS=djn,crt,fate` picks the variants (default
//! `djn,fate`: a CRT step takes minutes too);
//! `FL_HETERO_ROWS`, `FL_HETERO_DA`, `FL_HETERO_M`, `FL_HETERO_KEY_BITS` override the sizes.

use std::time::Instant;

use criterion::{Criterion, SamplingMode};
use fl_hetero_nn::transport::memory::Pair;
use fl_hetero_nn::{
    Encryption, Guest, GuestEvent, Host, Matrix, Paillier, Profile, ProtocolConfig, Purpose,
};
use rand::rngs::ChaCha20Rng;
use rand::{RngExt, SeedableRng};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Setup {
    n: usize,
    d_a: usize,
    m: usize,
    key_bits: u32,
    a: Matrix<f64>,
    delta: Matrix<f64>,
    w: Matrix<f64>,
    b: Vec<f64>,
    p: num_bigint::BigUint,
    q: num_bigint::BigUint,
}

fn setup() -> Option<Setup> {
    let (n, d_a, m) = (
        env("FL_HETERO_ROWS", 256),
        env("FL_HETERO_DA", 64),
        env("FL_HETERO_M", 32),
    );
    let key_bits = env("FL_HETERO_KEY_BITS", 2048) as u32;
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let dk = fl_paillier::keygen(key_bits, &mut rng).ok()?;
    let (p, q) = dk.expose_primes();
    let bound = 1.0 / (d_a as f64).sqrt();
    Some(Setup {
        n,
        d_a,
        m,
        key_bits,
        a: Matrix::from_fn(n, d_a, |_, _| rng.random_range(0.0..2.0)),
        delta: Matrix::from_fn(n, m, |_, _| rng.random_range(-0.01..0.01)),
        w: Matrix::from_fn(d_a, m, |_, _| rng.random_range(-bound..bound)),
        b: (0..m).map(|_| rng.random_range(-bound..bound)).collect(),
        p: num_bigint::BigUint::from_bytes_be(&p),
        q: num_bigint::BigUint::from_bytes_be(&q),
    })
}

/// A benchmarked configuration.
struct Variant {
    name: &'static str,
    key: &'static str,
    profile: Profile,
    encryption: Encryption,
}

const VARIANTS: [Variant; 3] = [
    Variant {
        name: "Hardened packed, DJN",
        key: "djn",
        profile: Profile::Hardened,
        encryption: Encryption::Djn,
    },
    Variant {
        name: "Hardened packed, CRT",
        key: "crt",
        profile: Profile::Hardened,
        encryption: Encryption::KeyOwnerCrt,
    },
    Variant {
        name: "FateFaithful unpacked",
        key: "fate",
        profile: Profile::FateFaithful,
        encryption: Encryption::Textbook,
    },
];

fn selected() -> Vec<&'static Variant> {
    let wanted = std::env::var("FL_HETERO_VARIANTS").unwrap_or_else(|_| "djn,fate".into());
    VARIANTS
        .iter()
        .filter(|v| wanted.split(',').any(|w| w == v.key))
        .collect()
}

fn pair(s: &Setup, v: &Variant) -> Option<Pair<Paillier, ChaCha20Rng>> {
    let profile = v.profile;
    let mut c =
        ProtocolConfig::new(profile, s.d_a, s.m).accepting_exact_error_and_activation_leaks();
    c.encryption = v.encryption;
    c.max_batch_rows = s.n;
    c.min_key_bits = u64::from(s.key_bits);
    let dk = fl_paillier::DecryptionKey::from_primes(&s.p, &s.q).ok()?;
    let mut host_rng = ChaCha20Rng::seed_from_u64(1);
    // Hardened: each party brings its own share of W₀ (here the same values); FateFaithful:
    // the guest holds W₀.
    let hw = (profile == Profile::Hardened).then_some(&s.w);
    let gw = &s.w;
    let host = Host::<Paillier>::new(c, dk, hw, &mut host_rng).ok()?;
    let guest = Guest::<Paillier>::new(c, &s.b, gw).ok()?;
    let mut pair = Pair::new(host, guest, host_rng, ChaCha20Rng::seed_from_u64(2));
    pair.drive().ok()?;
    while pair.poll_guest_event().is_some() {}
    Some(pair)
}

/// One training step: all seven messages (the batch is records 0..n).
fn step(pair: &mut Pair<Paillier, ChaCha20Rng>, s: &Setup) -> bool {
    let ids: Vec<u64> = (0..s.a.rows() as u64).collect();
    if pair
        .host
        .start_round(Purpose::Train, &s.a, &ids, &mut pair.host_rng)
        .is_err()
        || pair.drive().is_err()
    {
        return false;
    }
    while let Some(e) = pair.poll_guest_event() {
        let _ = matches!(e, GuestEvent::Forward { .. });
    }
    if pair
        .guest
        .backward(&s.delta, &ids, &mut pair.guest_rng)
        .is_err()
        || pair.drive().is_err()
    {
        return false;
    }
    while pair.poll_host_event().is_some() {}
    true
}

/// User + system CPU seconds of this process (all threads) from `/proc/self/stat`
/// (Linux, 100 ticks per second); `None` elsewhere. On a shared, loaded machine CPU time is
/// a steadier measure than wall-clock time.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let user: f64 = fields.get(11)?.parse().ok()?;
    let system: f64 = fields.get(12)?.parse().ok()?;
    Some((user + system) / 100.0)
}

/// Times one step; prints wall-clock and CPU seconds, messages and bytes. The guest's
/// re-randomizers (textbook sⁿ, one per ciphertext it returns) are precomputed before the
/// step, off its critical path, as `Guest::precompute_randomizers` is meant to be used;
/// that precomputation is timed separately and included in the returned CPU time, which
/// is the step's total work. Returns (wall, CPU) seconds.
fn time_one(s: &Setup, v: &Variant) -> Option<(f64, f64)> {
    let Some(mut p) = pair(s, v) else {
        println!("{}: setup failed", v.name);
        return None;
    };
    let need = p.guest.randomizers_per_step(s.n).ok()?;
    let cpu_pre0 = cpu_seconds().unwrap_or(0.0);
    let t = Instant::now();
    p.guest.precompute_randomizers(need).ok()?;
    let pre_secs = t.elapsed().as_secs_f64();
    let pre_cpu = cpu_seconds().unwrap_or(0.0) - cpu_pre0;
    let before = p.stats;
    let cpu0 = cpu_seconds().unwrap_or(0.0);
    let t = Instant::now();
    let ok = step(&mut p, s);
    let secs = t.elapsed().as_secs_f64();
    let cpu = cpu_seconds().unwrap_or(0.0) - cpu0;
    let msgs = p.stats.messages() - before.messages();
    let bytes = p.stats.bytes() - before.bytes();
    println!(
        "{:>22}: {secs:9.2} s/step wall, {cpu:9.2} s CPU online; precomputed {need} guest randomizers in {pre_secs:.2} s wall, {pre_cpu:.2} s CPU; total {:.2} s CPU; {msgs} messages, {:.1} KiB per step (ok: {ok})",
        v.name,
        cpu + pre_cpu,
        bytes as f64 / 1024.0
    );
    ok.then_some((secs + pre_secs, cpu + pre_cpu))
}

fn oneshot(s: &Setup, variants: &[&Variant]) {
    println!(
        "fl-hetero-nn one training step (one-shot): n = {}, d_A = {}, m = {}, {}-bit key, fl-paillier engine {}",
        s.n,
        s.d_a,
        s.m,
        s.key_bits,
        fl_paillier::default_engine()
    );
    let times: Vec<(&'static str, (f64, f64))> = variants
        .iter()
        .filter_map(|v| time_one(s, v).map(|t| (v.key, t)))
        .collect();
    if let Some((_, (fw, fc))) = times.iter().find(|(k, _)| *k == "fate") {
        for (k, (w, c)) in &times {
            if *k != "fate" {
                println!(
                    "speed-up {k} vs FateFaithful unpacked (one-shot, precomputation included): {:.1}x wall, {:.1}x CPU",
                    fw / w,
                    fc / c
                );
            }
        }
    }
}

fn main() {
    let Some(s) = setup() else {
        eprintln!("benchmark setup failed");
        return;
    };
    let variants = selected();
    if std::env::var("FL_HETERO_ONESHOT").is_ok() {
        oneshot(&s, &variants);
        return;
    }
    // FateFaithful: one step, timed once (criterion would need at least 11).
    let fate: Vec<&Variant> = variants
        .iter()
        .copied()
        .filter(|v| v.key == "fate")
        .collect();
    oneshot(&s, &fate);
    let mut c = Criterion::default().configure_from_args().sample_size(10);
    let mut group = c.benchmark_group("hetero_nn/step_n256_da64_m32_2048");
    group.sampling_mode(SamplingMode::Flat);
    for v in variants.iter().filter(|v| v.key != "fate") {
        let Some(mut p) = pair(&s, v) else {
            return;
        };
        group.bench_function(v.key, |b| b.iter(|| step(&mut p, &s)));
    }
    group.finish();
    c.final_summary();
}
