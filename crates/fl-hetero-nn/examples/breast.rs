//! FATE's `hetero_nn-binary-0` on the breast vertical split: plaintext (f64), plaintext
//! fixed point, FateFaithful and Hardened, same seed, side by side.
//!
//! ```text
//! cargo run --release -p fl-hetero-nn --example breast                 # full run (100 epochs)
//! cargo run --release -p fl-hetero-nn --example breast -- --quick      # CI: 2 epochs, 1024-bit test key
//! cargo run --release -p fl-hetero-nn --example breast -- --transport tcp   # parties over loopback TCP
//! # two processes:
//! cargo run --release -p fl-hetero-nn --example breast -- --role host  --addr 127.0.0.1:7878
//! cargo run --release -p fl-hetero-nn --example breast -- --role guest --addr 127.0.0.1:7878
//! ```
//!
//! Randomness: the in-process runs (the default, and `--transport tcp`) are reproducible: one
//! `--seed` draws the data order, the models' initial weights, both parties' shares of W₀,
//! the keys and the masks. The two-process mode (`--role`) is a deployment sketch: each
//! process draws its Paillier key (host), its share of W₀ and every mask from the OS CSPRNG
//! and never from the seed, which then fixes only the data order and the bottom and top
//! models' initial weights; its AUC therefore differs from the in-process run's.
//!
//! Options: `--epochs N`, `--seed S`, `--key-bits B`, `--transport memory|tcp`,
//! `--profiles plain,fixed,fate,hardened`, `--label-dp EPS` (the guest trains on labels
//! randomised once by LabelDP; in-process only; AUC and loss against the true labels),
//! `--dp-sgd EPS` (DP-SGD with randomised error labels at whole-run label ε EPS, δ = 10⁻⁵:
//! the labels randomised once at ε_RR for the host's error rows, the guest's parameters
//! trained on a discrete-Gaussian release at ε_G = min(0.3·EPS, 1), ε_RR = EPS − ε_G; the
//! privacy table's breast schedule — full batch, C = 0.5, guest SGD 3, host SGD 0.1 (0.01
//! below ε = 1), Gaussian share 1/4 up to ε = 1, 1/2 above — over `--epochs`; in-process
//! and over TCP; the plaintext run is then the fixed-point twin with coins of its own, not
//! compared bit for bit; AUC and loss against the true labels),
//! `--embedding-dp EPS` (the host sends EmbeddingDP bits of its bottom output; the secure
//! runs are then not compared bit for bit with the plaintext ones, which do not randomise),
//! `--encryption textbook|crt|djn` (default: key-owner CRT for FateFaithful, whose protocol
//! and leaks are FATE's while its ciphertexts have the textbook distribution, and DJN for
//! Hardened; see `fl_hetero_nn::Encryption`), `--no-prefill` (over TCP, the guest does not
//! precompute its re-randomizers while it waits for the host,
//! `TcpConfig::prefill_randomizers`: for comparing the time per epoch).

// An example program: errors end it with a message.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use fl_hetero_nn::data::{VerticalData, parse_csv};
use fl_hetero_nn::nn::weight_share;
use fl_hetero_nn::split::{
    GuestModel, HostModel, HostPart, LabelDefence, PlainTwin, SplitConfig, SplitInit,
    TrainingLabels, evaluate, train_epoch_with_error_labels,
};
use fl_hetero_nn::transport::memory::{Pair, TrafficStats};
use fl_hetero_nn::transport::tcp::{FramedStream, TcpConfig};
use fl_hetero_nn::{
    Encryption, Error, Guest, Host, Matrix, Paillier, PlainInteractiveLayer, Profile,
    ProtocolConfig,
};
use rand::SeedableRng;
use rand::rngs::{ChaCha20Rng, SysRng};

const GUEST_CSV: &str = include_str!("../data/breast_hetero_guest.csv");
/// δ of the label guarantee in the privacy reports.
const DELTA: f64 = 1e-5;
const HOST_CSV: &str = include_str!("../data/breast_hetero_host.csv");

struct Args {
    epochs: usize,
    seed: u64,
    key_bits: u32,
    tcp: bool,
    role: Option<Role>,
    addr: String,
    profiles: Vec<RunKind>,
    encryption: Option<Encryption>,
    label_dp: Option<f64>,
    /// DP-SGD with randomised error labels at this whole-run label ε.
    dp_sgd: Option<f64>,
    embedding_dp: Option<f64>,
    /// `TcpConfig::prefill_randomizers` for the TCP runs.
    prefill: bool,
}

impl Args {
    /// The TCP transport's settings for this run.
    fn tcp_config(&self) -> TcpConfig {
        let mut c = TcpConfig::default();
        c.prefill_randomizers = self.prefill;
        c
    }
}

/// Which party a `--role` process plays.
#[derive(Clone, Copy)]
enum Role {
    Host,
    Guest,
}

/// One of the four runs `--profiles` selects.
#[derive(Clone, Copy, PartialEq)]
enum RunKind {
    /// Plaintext f64 interactive layer.
    Plain,
    /// Plaintext fixed point at scale 2^-23.
    Fixed,
    /// The secure protocol, FateFaithful profile.
    Fate,
    /// The secure protocol, Hardened profile.
    Hardened,
}

impl RunKind {
    fn parse(s: &str) -> Result<Self, String> {
        match s {
            "plain" => Ok(Self::Plain),
            "fixed" => Ok(Self::Fixed),
            "fate" => Ok(Self::Fate),
            "hardened" => Ok(Self::Hardened),
            other => Err(format!(
                "--profiles takes plain,fixed,fate,hardened, not {other:?}"
            )),
        }
    }
}

/// Parses the command line; a bad option is a usage error (message, exit status 2).
fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        epochs: 100,
        // Seed 101: under the jointly drawn W₀, seed 100 (the earlier default) leaves both
        // interactive ReLUs dead on breast (AUC 0.5 in every run, plaintext included).
        seed: 101,
        key_bits: 2048,
        tcp: false,
        role: None,
        addr: "127.0.0.1:7878".into(),
        profiles: vec![
            RunKind::Plain,
            RunKind::Fixed,
            RunKind::Fate,
            RunKind::Hardened,
        ],
        encryption: None,
        label_dp: None,
        dp_sgd: None,
        embedding_dp: None,
        prefill: true,
    };
    let mut profiles_given = false;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    let val = |i: usize| args.get(i + 1).cloned().unwrap_or_default();
    while i < args.len() {
        match args[i].as_str() {
            "--quick" => {
                a.epochs = 2;
                a.key_bits = 1024;
            }
            "--epochs" => {
                a.epochs = number(&val(i), "--epochs N (a positive integer)")?;
                i += 1;
            }
            "--seed" => {
                a.seed = number(&val(i), "--seed S (an unsigned integer)")?;
                i += 1;
            }
            "--key-bits" => {
                a.key_bits = number(&val(i), "--key-bits B (bits of n, e.g. 2048)")?;
                i += 1;
            }
            "--transport" => {
                a.tcp = match val(i).as_str() {
                    "tcp" => true,
                    "memory" => false,
                    other => return Err(format!("--transport tcp|memory, not {other:?}")),
                };
                i += 1;
            }
            "--role" => {
                a.role = Some(match val(i).as_str() {
                    "host" => Role::Host,
                    "guest" => Role::Guest,
                    other => return Err(format!("--role must be host or guest, not {other:?}")),
                });
                i += 1;
            }
            "--addr" => {
                a.addr = val(i);
                i += 1;
            }
            "--encryption" => {
                a.encryption = Some(match val(i).as_str() {
                    "textbook" => Encryption::Textbook,
                    "crt" => Encryption::KeyOwnerCrt,
                    "djn" => Encryption::Djn,
                    other => return Err(format!("--encryption textbook|crt|djn, not {other:?}")),
                });
                i += 1;
            }
            "--label-dp" => {
                a.label_dp = Some(number(&val(i), "--label-dp EPS (a non-negative number)")?);
                i += 1;
            }
            "--dp-sgd" => {
                a.dp_sgd = Some(number(&val(i), "--dp-sgd EPS (a positive number)")?);
                i += 1;
            }
            "--embedding-dp" => {
                a.embedding_dp = Some(number(
                    &val(i),
                    "--embedding-dp EPS (a non-negative number)",
                )?);
                i += 1;
            }
            "--no-prefill" => a.prefill = false,
            "--profiles" => {
                a.profiles = val(i)
                    .split(',')
                    .map(RunKind::parse)
                    .collect::<Result<_, _>>()?;
                profiles_given = true;
                i += 1;
            }
            other => {
                return Err(format!(
                    "unknown option {other:?}; see the example's doc comment"
                ));
            }
        }
        i += 1;
    }
    if a.epochs == 0 {
        return Err("--epochs must be at least 1".into());
    }
    if a.label_dp.is_some() && (a.tcp || a.role.is_some()) {
        // The TCP modes evaluate on the labels they train on; in-process runs train on the
        // randomised labels and measure against the true ones.
        return Err("--label-dp runs in-process only (without --transport tcp or --role)".into());
    }
    if let Some(eps) = a.dp_sgd {
        if !(eps.is_finite() && eps > 0.0) {
            return Err(format!("--dp-sgd EPS must be a positive number, not {eps}"));
        }
        if a.label_dp.is_some() {
            return Err("--dp-sgd randomises the labels itself: drop --label-dp".into());
        }
        // DP-SGD's release needs the guest's coins: the f64 run has none.
        if profiles_given && a.profiles.contains(&RunKind::Plain) {
            return Err("--dp-sgd runs fixed, fate and hardened, not plain".into());
        }
        a.profiles.retain(|&p| p != RunKind::Plain);
    }
    Ok(a)
}

/// A privacy report as one line (or why there is none).
fn report_line(r: Result<fl_hetero_nn::defences::PrivacyReport, Error>) -> String {
    r.map_or_else(|e| format!("no report: {e}"), |r| r.to_string())
}

fn number<T: std::str::FromStr>(v: &str, what: &str) -> Result<T, String> {
    v.parse().map_err(|_| format!("{what}, not {v:?}"))
}

fn checkpoints(epochs: usize) -> Vec<usize> {
    let mut c: Vec<usize> = [1, 10, 25, 50, 75, 100]
        .into_iter()
        .filter(|&e| e <= epochs)
        .collect();
    if c.last() != Some(&epochs) {
        c.push(epochs);
    }
    c
}

struct Run {
    name: String,
    points: Vec<(usize, f64, f64)>,
    seconds_per_epoch: f64,
    traffic_per_step: Option<(f64, f64)>,
    predictions: Vec<f64>,
}

fn progress(name: &str, epoch: usize, total: usize, start: Instant) {
    let width = 30;
    let filled = epoch * width / total.max(1);
    eprint!(
        "\r{name:>10} [{}{}] {epoch}/{total} epochs, {:.0}s   ",
        "#".repeat(filled),
        "-".repeat(width - filled),
        start.elapsed().as_secs_f64()
    );
    let _ = std::io::stderr().flush();
    if epoch == total {
        eprintln!();
    }
}

fn encryption(profile: Profile, chosen: Option<Encryption>) -> Encryption {
    chosen.unwrap_or(match profile {
        Profile::Hardened => Encryption::Djn,
        _ => Encryption::KeyOwnerCrt,
    })
}

/// A party's protocol configuration: the host's (`labels = None`), or the guest's with the
/// evidence of its label randomisation (`SplitConfig::guest_protocol_config`).
fn config(
    cfg: &SplitConfig,
    profile: Profile,
    key_bits: u32,
    chosen: Option<Encryption>,
    labels: Option<&TrainingLabels>,
) -> Result<ProtocolConfig, Error> {
    let mut c = match labels {
        Some(l) => cfg.guest_protocol_config(profile, l)?,
        None => cfg.protocol_config(profile),
    };
    // The demo runs undefended by default: accept, by name, exactly the leaks of the
    // defences that are off (the run's report below says what each party got).
    c.accepted_leaks.host_recovers_exact_error_and_labels = c.label_defence.is_none();
    c.accepted_leaks.guest_recovers_exact_activations = c.embedding_dp.is_none();
    c.min_key_bits = u64::from(key_bits.min(2048));
    c.encryption = encryption(profile, chosen);
    Ok(c)
}

#[allow(clippy::too_many_arguments)]
fn run_in_process(
    name: &str,
    cfg: &SplitConfig,
    data: &VerticalData,
    train: &VerticalData,
    error_labels: Option<&TrainingLabels>,
    init: &SplitInit,
    part: &mut dyn HostPart,
    epochs: usize,
) -> Result<Run, Error> {
    let mut host = HostModel::new(init);
    let mut guest = GuestModel::new(init, cfg);
    let cps = checkpoints(epochs);
    let mut points = Vec::new();
    let mut preds = Vec::new();
    let start = Instant::now();
    let mut train_time = Duration::ZERO;
    let mut train_traffic = TrafficStats::default();
    let steps_per_epoch = cfg.batches(data.len()).len() as f64;
    for epoch in 1..=epochs {
        let t0 = Instant::now();
        let before = part.traffic();
        train_epoch_with_error_labels(cfg, train, error_labels, &mut host, &mut guest, part)?;
        let after = part.traffic();
        train_time += t0.elapsed();
        train_traffic.host_to_guest_messages +=
            after.host_to_guest_messages - before.host_to_guest_messages;
        train_traffic.guest_to_host_messages +=
            after.guest_to_host_messages - before.guest_to_host_messages;
        train_traffic.host_to_guest_bytes += after.host_to_guest_bytes - before.host_to_guest_bytes;
        train_traffic.guest_to_host_bytes += after.guest_to_host_bytes - before.guest_to_host_bytes;
        if cps.contains(&epoch) {
            let (auc, loss, p) = evaluate(cfg, data, &mut host, &mut guest, part)?;
            points.push((epoch, auc, loss));
            preds = p;
        }
        progress(name, epoch, epochs, start);
    }
    let steps = steps_per_epoch * epochs as f64;
    let traffic = (train_traffic.messages() > 0).then(|| {
        (
            train_traffic.messages() as f64 / steps,
            train_traffic.bytes() as f64 / steps,
        )
    });
    Ok(Run {
        name: name.into(),
        points,
        seconds_per_epoch: train_time.as_secs_f64() / epochs as f64,
        traffic_per_step: traffic,
        predictions: preds,
    })
}

/// The host-part in f64 (no fixed point): a plain torch-like Linear with SGD(η).
struct FloatPart {
    lin: fl_hetero_nn::nn::Linear,
    eta: f64,
}

impl HostPart for FloatPart {
    fn forward(
        &mut self,
        _p: fl_hetero_nn::Purpose,
        a: &Matrix<f64>,
        _row_ids: &[u64],
    ) -> Result<Matrix<f64>, Error> {
        self.lin.forward(a)
    }
    fn backward(
        &mut self,
        delta: &Matrix<f64>,
        _row_ids: &[u64],
    ) -> Result<(Matrix<f64>, Option<Matrix<f64>>), Error> {
        let g = self.lin.backward(delta)?;
        self.lin
            .step(fl_hetero_nn::nn::Optimizer::Sgd { lr: self.eta });
        Ok((g, None))
    }
    fn traffic(&self) -> TrafficStats {
        TrafficStats::default()
    }
}

fn key(bits: u32, seed: u64) -> Result<fl_paillier::DecryptionKey, Error> {
    let t = Instant::now();
    let dk = fl_paillier::keygen(bits, &mut ChaCha20Rng::seed_from_u64(seed ^ 0xC0FFEE))
        .map_err(fl_hetero_nn::error::SchemeError::from)?;
    eprintln!(
        "generated a {bits}-bit Paillier key in {:.1}s",
        t.elapsed().as_secs_f64()
    );
    Ok(dk)
}

fn secure_parties(
    cfg: &SplitConfig,
    init: &SplitInit,
    labels: &TrainingLabels,
    profile: Profile,
    key_bits: u32,
    seed: u64,
    chosen: Option<Encryption>,
) -> Result<(Host<Paillier>, Guest<Paillier>, ChaCha20Rng, ChaCha20Rng), Error> {
    let pc = config(cfg, profile, key_bits, chosen, None)?;
    let guest_pc = config(cfg, profile, key_bits, chosen, Some(labels))?;
    let mut host_rng = ChaCha20Rng::seed_from_u64(seed ^ 1);
    let guest_rng = ChaCha20Rng::seed_from_u64(seed ^ 2);
    // Hardened: each party holds its own share of W₀ (neither is sent); FateFaithful: the
    // guest holds W₀.
    let (hw, gw) = match profile {
        Profile::Hardened => (
            Some(&init.host_part_host_share),
            &init.host_part_guest_share,
        ),
        _ => (None, &init.host_part_weight),
    };
    let host = Host::<Paillier>::new(pc, key(key_bits, seed)?, hw, &mut host_rng)?;
    let guest = Guest::<Paillier>::new(guest_pc, &init.host_part_bias, gw)?;
    Ok((host, guest, host_rng, guest_rng))
}

fn run_tcp(
    name: &str,
    cfg: &SplitConfig,
    data: &VerticalData,
    init: &SplitInit,
    labels: &TrainingLabels,
    profile: Profile,
    args: &Args,
) -> Result<Run, Error> {
    let (mut host, mut guest, mut host_rng, mut guest_rng) = secure_parties(
        cfg,
        init,
        labels,
        profile,
        args.key_bits,
        args.seed,
        args.encryption,
    )?;
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(fl_hetero_nn::error::TransportError::from)?;
    let addr = listener
        .local_addr()
        .map_err(fl_hetero_nn::error::TransportError::from)?;
    let cps = checkpoints(args.epochs);
    let tcp_config = args.tcp_config();
    let (cfg2, host_x, row_ids, cps2) =
        (*cfg, data.host.clone(), data.row_ids.clone(), cps.clone());
    let mut host_model = HostModel::new(init);
    let host_thread = std::thread::spawn(move || -> Result<(TrafficStats, String), Error> {
        let (sock, _) = listener
            .accept()
            .map_err(fl_hetero_nn::error::TransportError::from)?;
        let mut stream = FramedStream::new(sock, tcp_config, true)?;
        fl_hetero_nn::split::tcp::run_host(
            &cfg2,
            &host_x,
            &row_ids,
            &mut host_model,
            &mut host,
            &mut stream,
            &cps2,
            &mut host_rng,
        )?;
        Ok((stream.stats, report_line(host.privacy_report(DELTA))))
    });
    let sock = TcpStream::connect(addr).map_err(fl_hetero_nn::error::TransportError::from)?;
    let mut stream = FramedStream::new(sock, tcp_config, false)?;
    let mut model = GuestModel::new(init, cfg);
    let mut points = Vec::new();
    let start = Instant::now();
    fl_hetero_nn::split::tcp::run_guest_with_error_labels(
        cfg,
        &data.guest,
        &data.labels,
        cfg.dp_sgd.is_some().then_some(labels),
        &data.row_ids,
        &mut model,
        &mut guest,
        &mut stream,
        &cps,
        &mut guest_rng,
        &mut |epoch, _loss, cp| {
            if let Some(cp) = cp {
                points.push((cp.epoch, cp.auc, cp.loss));
            }
            progress(name, epoch, args.epochs, start);
        },
    )?;
    // A panic in the host thread is a bug: re-raise it with its own message.
    let (stats, host_report) = host_thread
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))?;
    println!("{name} over TCP, host's report: {host_report}");
    println!(
        "{name} over TCP, guest's report: {}",
        report_line(guest.privacy_report(DELTA))
    );
    let steps = (cfg.batches(data.len()).len() * args.epochs) as f64;
    Ok(Run {
        name: name.into(),
        points,
        seconds_per_epoch: start.elapsed().as_secs_f64() / args.epochs as f64,
        // Over TCP the counters include the prediction passes and the 4-byte frame headers.
        traffic_per_step: Some((
            stats.messages() as f64 / steps,
            stats.bytes() as f64 / steps,
        )),
        predictions: Vec::new(),
    })
}

fn run_role(
    role: Role,
    cfg: &SplitConfig,
    data: &VerticalData,
    init: &SplitInit,
    labels: &TrainingLabels,
    args: &Args,
) -> Result<(), Error> {
    let cps = checkpoints(args.epochs);
    let tio = fl_hetero_nn::error::TransportError::from;
    // Two processes: keys, shares of W₀ and masks come from the OS CSPRNG, never the seed.
    let mut rng = ChaCha20Rng::try_from_rng(&mut SysRng).map_err(|e| {
        fl_hetero_nn::error::ApiMisuse::InvalidConfig {
            reason: format!("the OS random number generator failed: {e}"),
        }
    })?;
    let pc = config(cfg, Profile::Hardened, args.key_bits, args.encryption, None)?;
    let own_share = weight_share(
        &mut rng,
        cfg.bottom_width,
        cfg.bottom_width,
        cfg.interactive_width,
    )
    .map(|&x| pc.fixed_point.to_grid(x, 2));
    match role {
        Role::Host => {
            let t = Instant::now();
            let dk = fl_paillier::keygen(args.key_bits, &mut rng)
                .map_err(fl_hetero_nn::error::SchemeError::from)?;
            eprintln!(
                "generated a {}-bit Paillier key from the OS CSPRNG in {:.1}s",
                args.key_bits,
                t.elapsed().as_secs_f64()
            );
            let mut host = Host::<Paillier>::new(pc, dk, Some(&own_share), &mut rng)?;
            let listener = TcpListener::bind(&args.addr).map_err(tio)?;
            eprintln!("host listening on {}", args.addr);
            let (sock, _) = listener.accept().map_err(tio)?;
            let mut stream = FramedStream::new(sock, args.tcp_config(), true)?;
            fl_hetero_nn::split::tcp::run_host(
                cfg,
                &data.host,
                &data.row_ids,
                &mut HostModel::new(init),
                &mut host,
                &mut stream,
                &cps,
                &mut rng,
            )?;
            eprintln!("host done: {:?}", stream.stats);
            println!("host's report: {}", report_line(host.privacy_report(DELTA)));
        }
        Role::Guest => {
            let guest_pc = config(
                cfg,
                Profile::Hardened,
                args.key_bits,
                args.encryption,
                Some(labels),
            )?;
            let mut guest = Guest::<Paillier>::new(guest_pc, &init.host_part_bias, &own_share)?;
            let mut sock = None;
            for _ in 0..600 {
                if let Ok(s) = TcpStream::connect(&args.addr) {
                    sock = Some(s);
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let sock = sock.ok_or(fl_hetero_nn::error::TransportError::Closed)?;
            let mut stream = FramedStream::new(sock, args.tcp_config(), false)?;
            fl_hetero_nn::split::tcp::run_guest_with_error_labels(
                cfg,
                &data.guest,
                &data.labels,
                cfg.dp_sgd.is_some().then_some(labels),
                &data.row_ids,
                &mut GuestModel::new(init, cfg),
                &mut guest,
                &mut stream,
                &cps,
                &mut rng,
                &mut |epoch, loss, cp| {
                    if let Some(cp) = cp {
                        println!(
                            "epoch {epoch:>3}: train loss {loss:.5}, AUC {:.6}, loss {:.6}",
                            cp.auc, cp.loss
                        );
                    }
                },
            )?;
            eprintln!("guest done: {:?}", stream.stats);
            println!(
                "guest's report: {}",
                report_line(guest.privacy_report(DELTA))
            );
        }
    }
    Ok(())
}

fn main() -> Result<(), Error> {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let mut cfg = SplitConfig::hetero_nn_binary_0();
    cfg.epochs = args.epochs;
    let epsilon = |e: Option<f64>| e.map(fl_ldp::Epsilon::new).transpose();
    let dp_error = |e: fl_ldp::Error| fl_hetero_nn::error::ApiMisuse::InvalidConfig {
        reason: format!("--label-dp / --embedding-dp: {e}"),
    };
    cfg.label_dp = epsilon(args.label_dp)
        .map_err(dp_error)?
        .map(LabelDefence::RandomizedResponse);
    cfg.embedding_dp = epsilon(args.embedding_dp).map_err(dp_error)?;
    let data = VerticalData::align(parse_csv(GUEST_CSV, true)?, parse_csv(HOST_CSV, false)?)?;
    if let Some(eps) = args.dp_sgd {
        dp_sgd_schedule(&mut cfg, eps, data.len())?;
    }
    // LabelDP: the guest randomises its training labels once (every run trains on the same
    // randomised labels); AUC and loss are measured against the true labels.
    // The randomised labels come with the evidence the guest's configuration needs.
    let labels =
        cfg.privatize_labels(&data.labels, &mut ChaCha20Rng::seed_from_u64(args.seed ^ 3))?;
    // DP-SGD: the guest trains on the true labels, the host's error rows come from the
    // randomised ones.
    let mut train = data.clone();
    let error_labels = cfg.dp_sgd.is_some().then_some(&labels);
    if error_labels.is_none() {
        train.labels = labels.labels().to_vec();
    }
    let init = SplitInit::new(&cfg, args.seed)?;
    if let Some(role) = args.role {
        return run_role(role, &cfg, &data, &init, &labels, &args);
    }
    println!(
        "FATE hetero_nn-binary-0 on breast ({} rows; guest 10 + host 20 features), {} epochs, batch {}, seed {}, {}-bit Paillier, transport: {}",
        data.len(),
        cfg.epochs,
        cfg.batch_size,
        args.seed,
        args.key_bits,
        if args.tcp {
            "TCP loopback"
        } else {
            "in-process"
        }
    );
    println!(
        "encryption: FateFaithful {:?}, Hardened {:?} (fl_hetero_nn::Encryption)",
        encryption(Profile::FateFaithful, args.encryption),
        encryption(Profile::Hardened, args.encryption)
    );
    let mut runs = Vec::new();
    for &p in &args.profiles {
        let run = match p {
            RunKind::Plain => {
                let lin = fl_hetero_nn::nn::Linear::from_parameters(
                    init.host_part_weight.clone(),
                    init.host_part_bias.clone(),
                )?;
                let mut part = FloatPart {
                    lin,
                    eta: cfg.learning_rate,
                };
                run_in_process(
                    "plain f64",
                    &cfg,
                    &data,
                    &train,
                    error_labels,
                    &init,
                    &mut part,
                    cfg.epochs,
                )?
            }
            RunKind::Fixed => {
                let pc = config(&cfg, Profile::Hardened, args.key_bits, None, None)?;
                let layer =
                    PlainInteractiveLayer::new(pc, &init.host_part_weight, &init.host_part_bias)?;
                // DP-SGD's noise needs coins: the twin draws its own (not the secure runs').
                let mut part = PlainTwin {
                    layer,
                    rng: ChaCha20Rng::seed_from_u64(args.seed ^ 2),
                };
                run_in_process(
                    "plain 2^-23",
                    &cfg,
                    &data,
                    &train,
                    error_labels,
                    &init,
                    &mut part,
                    cfg.epochs,
                )?
            }
            RunKind::Fate | RunKind::Hardened => {
                let (profile, name) = if p == RunKind::Fate {
                    (Profile::FateFaithful, "FateFaithful")
                } else {
                    (Profile::Hardened, "Hardened")
                };
                if args.tcp {
                    run_tcp(name, &cfg, &data, &init, &labels, profile, &args)?
                } else {
                    let (host, guest, hr, gr) = secure_parties(
                        &cfg,
                        &init,
                        &labels,
                        profile,
                        args.key_bits,
                        args.seed,
                        args.encryption,
                    )?;
                    let mut pair = Pair::new(host, guest, hr, gr);
                    pair.drive().map_err(|e| e.error)?;
                    let _ = pair.poll_guest_event();
                    let run = run_in_process(
                        name,
                        &cfg,
                        &data,
                        &train,
                        error_labels,
                        &init,
                        &mut pair,
                        cfg.epochs,
                    )?;
                    // The guarantee each party got, counted per row by the parties.
                    println!(
                        "{name}, host's report: {}",
                        report_line(pair.host.privacy_report(DELTA))
                    );
                    println!(
                        "{name}, guest's report: {}",
                        report_line(pair.guest.privacy_report(DELTA))
                    );
                    run
                }
            }
        };
        runs.push(run);
    }
    if cfg.label_dp.is_some() || cfg.embedding_dp.is_some() {
        println!(
            "defences: LabelDP ε = {}, DP-SGD with randomised error labels ε = {}, EmbeddingDP ε = {} (train AUC / loss against the true labels)",
            args.label_dp.map_or("off".into(), |e| e.to_string()),
            args.dp_sgd.map_or("off".into(), |e| e.to_string()),
            args.embedding_dp.map_or("off".into(), |e| e.to_string())
        );
    }
    // EmbeddingDP randomises the secure runs' activations with coins the plaintext runs do
    // not share, and DP-SGD's guest draws its noise from the stream that also draws its
    // masks, so they are not compared bit for bit then.
    if !print_table(&runs, cfg.embedding_dp.is_none() && cfg.dp_sgd.is_none()) {
        eprintln!(
            "error: a secure run's AUC, loss or predictions differ from plaintext fixed point"
        );
        std::process::exit(1);
    }
    Ok(())
}

/// DP-SGD with randomised error labels at whole-run label ε `eps` (δ = [`DELTA`]) over
/// `cfg.epochs` full-batch epochs of `rows` rows: ε_G = min(0.3·ε, 1) for the Gaussian
/// release of the guest's parameters, ε_RR = ε − ε_G for the labels randomised once
/// (`cfg.label_dp`), C = 0.5, guest SGD 3, host SGD 0.1 (0.01 below ε = 1, where the
/// de-biased labels are large), Gaussian share 1/4 up to ε = 1 and 1/2 above (the privacy
/// table's breast schedule).
fn dp_sgd_schedule(cfg: &mut SplitConfig, eps: f64, rows: usize) -> Result<(), Error> {
    use fl_hetero_nn::config::{DpSgd, RandomizedLabels};
    use fl_hetero_nn::nn::Optimizer;
    let gauss = (0.3 * eps).min(1.0);
    let rr = fl_ldp::Epsilon::new(eps - gauss).map_err(|e| {
        fl_hetero_nn::error::ApiMisuse::InvalidConfig {
            reason: format!("--dp-sgd {eps}: {e}"),
        }
    })?;
    let share = if eps <= 1.0 { 0.25 } else { 0.5 };
    cfg.batch_size = rows;
    cfg.label_dp = Some(LabelDefence::RandomizedResponse(rr));
    cfg.dp_sgd = Some(
        DpSgd::for_target(0.5, gauss, DELTA, 1.0, cfg.epochs as u64)?
            .with_randomized_error_labels(RandomizedLabels::announced_by_guest(rr), share)?,
    );
    cfg.guest_optimizer = Some(Optimizer::Sgd { lr: 3.0 });
    cfg.host_optimizer = Some(Optimizer::Sgd {
        lr: if eps < 1.0 { 0.01 } else { 0.1 },
    });
    Ok(())
}

/// Prints the side-by-side table; returns whether every secure run matched the plaintext
/// fixed-point run bit for bit (vacuously true when that run was not requested).
fn print_table(runs: &[Run], compare: bool) -> bool {
    print!("\n{:>7}", "epoch");
    for r in runs {
        print!(" | {:>24}", format!("{} AUC / loss", r.name));
    }
    println!();
    let n = runs.first().map_or(0, |r| r.points.len());
    for k in 0..n {
        print!("{:>7}", runs[0].points[k].0);
        for r in runs {
            let (_, auc, loss) = r.points.get(k).copied().unwrap_or((0, f64::NAN, f64::NAN));
            print!(" | {:>24}", format!("{auc:.6} / {loss:.6}"));
        }
        println!();
    }
    print!("{:>7}", "s/epoch");
    for r in runs {
        print!(" | {:>24}", format!("{:.3}", r.seconds_per_epoch));
    }
    println!();
    print!("{:>7}", "msg/step");
    for r in runs {
        print!(
            " | {:>24}",
            r.traffic_per_step
                .map_or("-".into(), |(m, _)| format!("{m:.1}"))
        );
    }
    println!();
    print!("{:>7}", "KB/step");
    for r in runs {
        print!(
            " | {:>24}",
            r.traffic_per_step
                .map_or("-".into(), |(_, b)| format!("{:.1}", b / 1024.0))
        );
    }
    println!();
    let fixed = runs.iter().find(|r| r.name == "plain 2^-23");
    let mut all_identical = true;
    for r in runs
        .iter()
        .filter(|r| compare && (r.name == "FateFaithful" || r.name == "Hardened"))
    {
        if let Some(f) = fixed {
            let same_points = r
                .points
                .iter()
                .zip(&f.points)
                .all(|(a, b)| a.1.to_bits() == b.1.to_bits() && a.2.to_bits() == b.2.to_bits());
            let same_preds = r.predictions.is_empty() || r.predictions == f.predictions;
            all_identical &= same_points && same_preds;
            println!(
                "{}: AUC and loss {} the plaintext fixed-point run{}",
                r.name,
                if same_points {
                    "bit-identical to"
                } else {
                    "DIFFER from"
                },
                if r.predictions.is_empty() {
                    ""
                } else if same_preds {
                    " (all predictions identical)"
                } else {
                    " (predictions differ!)"
                }
            );
        }
    }
    if let (Some(p), Some(f)) = (runs.iter().find(|r| r.name == "plain f64"), fixed)
        && let (Some(a), Some(b)) = (p.points.last(), f.points.last())
    {
        println!(
            "fixed point vs f64 final AUC: relative difference {:.2e} (FATE accepts ≤ 1e-2)",
            ((a.1 - b.1) / a.1).abs()
        );
    }
    all_identical
}
