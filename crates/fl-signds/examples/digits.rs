//! SignDS against plaintext FedAvg on the scikit-learn digits data.
//!
//! ```sh
//! cargo run --release -p fl-signds --example digits [-- --rounds 100 --epochs 1 --seed 1 --out DIR]
//! ```
//!
//! Softmax regression (64 pixels → 10 classes, d = 650 parameters), 10 clients, IID
//! (random equal shards) and non-IID (label-sorted rows cut into 20 shards, 2 per client),
//! the index split of `datasets-and-baselines.md` §3 (test = rows with i % 5 == 4). Every
//! round all 10 clients train locally (SGD, lr 0.1, batch 32) from the global model; FedAvg
//! uploads the full float32 update, SignDS uploads one encoded report. Prints test accuracy
//! at round checkpoints and bytes uploaded per client per round, and writes
//! `accuracy.svg` (accuracy vs round) to the output directory (default
//! `target/fl-signds-digits`).

use std::error::Error;
use std::fmt::Write as _;

use fl_signds::{Client, Params, Server};
use rand::{SeedableRng, rngs::ChaCha20Rng};

const FEATURES: usize = 64;
const CLASSES: usize = 10;
const DIM: usize = CLASSES * FEATURES + CLASSES;
const CLIENTS: usize = 10;
const LOCAL_LR: f32 = 0.1;
const BATCH: usize = 32;
const DATA: &str = include_str!("../data/digits/digits.csv");

type Dataset = (Vec<[f32; FEATURES]>, Vec<u8>);

fn load() -> Result<(Dataset, Dataset), Box<dyn Error>> {
    let (mut train, mut test): (Dataset, Dataset) = Default::default();
    for (i, line) in DATA.lines().enumerate() {
        let values: Vec<u8> = line
            .split(',')
            .map(|v| v.trim().parse::<u8>())
            .collect::<Result<_, _>>()?;
        if values.len() != FEATURES + 1 || values[FEATURES] >= CLASSES as u8 {
            return Err(format!("digits.csv line {}: malformed row", i + 1).into());
        }
        let mut x = [0f32; FEATURES];
        for (xi, &v) in x.iter_mut().zip(&values) {
            *xi = f32::from(v) / 16.0;
        }
        let target = if i % 5 == 4 { &mut test } else { &mut train };
        target.0.push(x);
        target.1.push(values[FEATURES]);
    }
    // 1797 rows: i % 5 == 4 gives 359 test rows (the reference note says 360).
    if train.0.len() != 1438 || test.0.len() != 359 {
        return Err("digits.csv: expected 1797 rows".into());
    }
    Ok((train, test))
}

/// Softmax regression: weights row-major (class, feature), then the 10 biases.
fn logits(w: &[f32], x: &[f32; FEATURES]) -> [f32; CLASSES] {
    let mut z = [0f32; CLASSES];
    for (c, zc) in z.iter_mut().enumerate() {
        let row = &w[c * FEATURES..(c + 1) * FEATURES];
        *zc = w[CLASSES * FEATURES + c] + row.iter().zip(x).map(|(a, b)| a * b).sum::<f32>();
    }
    z
}

fn accuracy(w: &[f32], data: &Dataset) -> f64 {
    let correct = data
        .0
        .iter()
        .zip(&data.1)
        .filter(|&(x, &y)| {
            let z = logits(w, x);
            let best = (0..CLASSES).fold(0, |b, c| if z[c] > z[b] { c } else { b });
            best == y as usize
        })
        .count();
    correct as f64 / data.0.len() as f64
}

fn shuffle<T>(v: &mut [T], rng: &mut ChaCha20Rng) {
    use rand::RngExt;
    for i in (1..v.len()).rev() {
        let j = rng.random_range(0..=i);
        v.swap(i, j);
    }
}

/// Local minibatch SGD on the cross-entropy loss.
fn train_local(
    w: &mut [f32],
    rows: &[usize],
    data: &Dataset,
    epochs: usize,
    rng: &mut ChaCha20Rng,
) {
    let mut order = rows.to_vec();
    let mut grad = vec![0f32; DIM];
    for _ in 0..epochs {
        shuffle(&mut order, rng);
        for batch in order.chunks(BATCH) {
            grad.iter_mut().for_each(|g| *g = 0.0);
            for &r in batch {
                let (x, y) = (&data.0[r], data.1[r] as usize);
                let z = logits(w, x);
                let m = z.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let e: Vec<f32> = z.iter().map(|v| (v - m).exp()).collect();
                let s: f32 = e.iter().sum();
                for c in 0..CLASSES {
                    let delta = e[c] / s - if c == y { 1.0 } else { 0.0 };
                    for (g, xi) in grad[c * FEATURES..(c + 1) * FEATURES].iter_mut().zip(x) {
                        *g += delta * xi;
                    }
                    grad[CLASSES * FEATURES + c] += delta;
                }
            }
            let scale = LOCAL_LR / batch.len() as f32;
            for (wi, g) in w.iter_mut().zip(&grad) {
                *wi -= scale * g;
            }
        }
    }
}

fn partitions(train: &Dataset, iid: bool, rng: &mut ChaCha20Rng) -> Vec<Vec<usize>> {
    let n = train.0.len();
    let mut rows: Vec<usize> = (0..n).collect();
    if iid {
        shuffle(&mut rows, rng);
        return (0..CLIENTS)
            .map(|c| rows[c * n / CLIENTS..(c + 1) * n / CLIENTS].to_vec())
            .collect();
    }
    rows.sort_by_key(|&r| (train.1[r], r));
    let shards = 2 * CLIENTS;
    let mut ids: Vec<usize> = (0..shards).collect();
    shuffle(&mut ids, rng);
    (0..CLIENTS)
        .map(|c| {
            ids[2 * c..2 * c + 2]
                .iter()
                .flat_map(|&s| rows[s * n / shards..(s + 1) * n / shards].iter().copied())
                .collect()
        })
        .collect()
}

struct Run {
    label: String,
    accuracy: Vec<f64>,
    bytes_per_client: f64,
}

fn fedavg(
    train: &Dataset,
    test: &Dataset,
    parts: &[Vec<usize>],
    rounds: usize,
    epochs: usize,
    seed: u64,
) -> Vec<f64> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut global = vec![0f32; DIM];
    let total: usize = parts.iter().map(Vec::len).sum();
    let mut acc = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let mut next = vec![0f64; DIM];
        for rows in parts {
            let mut local = global.clone();
            train_local(&mut local, rows, train, epochs, &mut rng);
            let weight = rows.len() as f64 / total as f64;
            for (n, l) in next.iter_mut().zip(&local) {
                *n += weight * f64::from(*l);
            }
        }
        global = next.iter().map(|&v| v as f32).collect();
        acc.push(accuracy(&global, test));
    }
    acc
}

fn signds(
    train: &Dataset,
    test: &Dataset,
    parts: &[Vec<usize>],
    rounds: usize,
    epochs: usize,
    params: Params,
    seed: u64,
) -> Result<(Vec<f64>, f64), Box<dyn Error>> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let client = Client::new(params, DIM)?;
    let mut server = Server::new(params, DIM, CLIENTS as f64)?;
    let mut global = vec![0f32; DIM];
    let mut acc = Vec::with_capacity(rounds);
    let mut bytes = 0usize;
    for _ in 0..rounds {
        let broadcast = server.broadcast();
        let mut round = server.begin_round();
        for rows in parts {
            let mut local = global.clone();
            train_local(&mut local, rows, train, epochs, &mut rng);
            let update: Vec<f32> = local.iter().zip(&global).map(|(a, b)| a - b).collect();
            let out = client.encode(&update, &broadcast, &mut rng)?;
            let wire = out.report.encode();
            bytes += wire.len();
            round.ingest_bytes(&wire, rows.len() as u64)?;
        }
        server.finish_round(round, &mut global)?;
        acc.push(accuracy(&global, test));
    }
    Ok((acc, bytes as f64 / (rounds * parts.len()) as f64))
}

fn svg(runs: &[Run], rounds: usize, title: &str) -> String {
    let (w, h, left, top, right, bottom) = (760.0, 440.0, 60.0, 40.0, 240.0, 50.0);
    let pw = w - left - right;
    let ph = h - top - bottom;
    let x = |r: usize| left + pw * (r as f64 - 1.0) / (rounds.max(2) as f64 - 1.0);
    let y = |a: f64| top + ph * (1.0 - a);
    let colors = [
        "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    ];
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{left}" y="22" font-size="14">{title}</text>"#
    );
    for i in 0..=10 {
        let a = i as f64 / 10.0;
        let _ = writeln!(
            s,
            r##"<line x1="{left}" x2="{}" y1="{y0:.1}" y2="{y0:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{a:.1}</text>"##,
            left + pw,
            left - 6.0,
            y(a) + 4.0,
            y0 = y(a)
        );
    }
    for r in (0..=rounds).step_by((rounds / 10).max(1)) {
        let r = r.max(1);
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{r}</text>"#,
            x(r),
            top + ph + 18.0
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">round</text><text x="16" y="{:.1}" transform="rotate(-90 16 {:.1})" text-anchor="middle">test accuracy</text>"#,
        left + pw / 2.0,
        h - 10.0,
        top + ph / 2.0,
        top + ph / 2.0
    );
    for (i, run) in runs.iter().enumerate() {
        let color = colors[i % colors.len()];
        let points: Vec<String> = run
            .accuracy
            .iter()
            .enumerate()
            .map(|(r, &a)| format!("{:.1},{:.1}", x(r + 1), y(a)))
            .collect();
        let dash = if run.label.starts_with("FedAvg") {
            ""
        } else {
            r#" stroke-dasharray="6 3""#
        };
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{color}" stroke-width="1.8"{dash} points="{}"/>"#,
            points.join(" ")
        );
        let ly = top + 16.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<line x1="{:.1}" x2="{:.1}" y1="{ly:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="2"{dash}/><text x="{:.1}" y="{:.1}">{}</text>"#,
            left + pw + 12.0,
            left + pw + 36.0,
            left + pw + 42.0,
            ly + 4.0,
            run.label
        );
    }
    s.push_str("</svg>\n");
    s
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut rounds = 100usize;
    let mut seed = 1u64;
    let mut epochs = 1usize;
    let mut out_dir = std::path::PathBuf::from("target/fl-signds-digits");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let value = args.next().ok_or(format!("{a} needs a value"))?;
        match a.as_str() {
            "--rounds" => rounds = value.parse()?,
            "--seed" => seed = value.parse()?,
            "--epochs" => epochs = value.parse()?,
            "--out" => out_dir = value.into(),
            _ => {
                return Err(format!(
                    "unknown option {a} (known: --rounds, --epochs, --seed, --out)"
                )
                .into());
            }
        }
    }
    if rounds == 0 || epochs == 0 {
        return Err("--rounds and --epochs must be >= 1".into());
    }
    let (train, test) = load()?;
    let configs: Vec<(String, Params)> = [100.0, 10.0]
        .iter()
        .map(|&eps| -> Result<(String, Params), fl_signds::Error> {
            let p = Params::default()
                .with_top_k_fraction(0.2)?
                .with_epsilon(eps)?
                .with_threshold_ratio(0.6)?;
            Ok((format!("SignDS eps={eps}"), p))
        })
        .collect::<Result<_, _>>()?;
    println!(
        "digits: {} train / {} test rows, softmax regression d = {DIM}, {CLIENTS} clients, {epochs} local epoch(s), lr {LOCAL_LR}, batch {BATCH}, {rounds} rounds, seed {seed}",
        train.0.len(),
        test.0.len()
    );
    for (label, p) in &configs {
        let law = Client::new(*p, DIM)?.law().clone();
        println!(
            "{label}: k = {}, K = {}, h = {}, nu_th = {}, E[nu] = {:.2}, privacy per report and round = {} (selection) + {} (MagRR)",
            p.top_k_fraction(),
            law.top_k(),
            law.output_dimension(),
            law.threshold(),
            law.expectation(),
            p.epsilon().value(),
            p.magrr_epsilon().value()
        );
    }
    let mut runs = Vec::new();
    for iid in [true, false] {
        let part_label = if iid { "IID" } else { "non-IID" };
        let mut prng = ChaCha20Rng::seed_from_u64(seed ^ 0x5eed);
        let parts = partitions(&train, iid, &mut prng);
        runs.push(Run {
            label: format!("FedAvg {part_label}"),
            accuracy: fedavg(&train, &test, &parts, rounds, epochs, seed),
            bytes_per_client: (DIM * 4) as f64,
        });
        for (label, p) in &configs {
            let (accuracy, bytes) = signds(&train, &test, &parts, rounds, epochs, *p, seed)?;
            runs.push(Run {
                label: format!("{label} {part_label}"),
                accuracy,
                bytes_per_client: bytes,
            });
        }
    }
    let checkpoints: Vec<usize> = [1, 5, 10, 20, 50, 100, 200, 500]
        .into_iter()
        .filter(|&c| c <= rounds)
        .chain((!([1, 5, 10, 20, 50, 100, 200, 500].contains(&rounds))).then_some(rounds))
        .collect();
    let mut header = format!("{:<26}", "method / clients");
    for c in &checkpoints {
        let _ = write!(header, " {:>7}", format!("@{c}"));
    }
    let _ = write!(header, " {:>14}", "bytes/client");
    println!(
        "\ntest accuracy of the global model per round checkpoint; bytes uploaded per client per round\n{header}"
    );
    for run in &runs {
        let mut line = format!("{:<26}", run.label);
        for &c in &checkpoints {
            let _ = write!(line, " {:>7.3}", run.accuracy[c - 1]);
        }
        let _ = write!(line, " {:>14.1}", run.bytes_per_client);
        println!("{line}");
    }
    println!(
        "\nreference plaintext FedAvg (datasets-and-baselines.md §3, softmax, 10 clients, index split):"
    );
    println!(
        "  1 local epoch:  IID 0.855 / 0.886 / 0.925, non-IID 0.855 / 0.880 / 0.922 at rounds 10 / 20 / 50"
    );
    println!(
        "  5 local epochs: IID 0.930 / 0.950 / 0.953, non-IID 0.919 / 0.933 / 0.944 at rounds 20 / 50 / 100"
    );
    std::fs::create_dir_all(&out_dir)?;
    let path = out_dir.join("accuracy.svg");
    std::fs::write(
        &path,
        svg(
            &runs,
            rounds,
            &format!(
                "digits: SignDS vs plaintext FedAvg (softmax regression, 10 clients, {epochs} local epoch(s))"
            ),
        ),
    )?;
    println!("plot: {}", path.display());
    Ok(())
}
