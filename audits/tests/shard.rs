//! Sharded runs: the merge of a run's N shards equals the run drawn as N shards in one
//! process (`--shards N`), count table for count table and byte for byte in `report.json`
//! (so the verdicts are equal), for correct and mis-calibrated samplers; serial pairs
//! never straddle two shards; and every way a set of counts files can be wrong (a shard
//! missing or given twice, another seed, sample size, shard count, suite, format or tool
//! version, a corrupted or tampered file) is a typed error, exit status 2 with one line.
// Test helpers outside #[test] functions: a failing unwrap is a failing test.
#![allow(clippy::unwrap_used)]

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use fl_audit::{
    engine::{self, RunOptions, Shard},
    shard::{self, Counts, Merge, ShardError},
    suite::{self, Suite},
};
use serde_json::{Value, json};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fl-audit-shard-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The built-in suite `name` reduced to its first grid point (the sampler's ε scaled by
/// `factor`: 1 is the correct sampler).
fn suite(name: &str, factor: f64) -> Suite {
    let s = suite::builtin()
        .unwrap()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap();
    let point = s.points().remove(0);
    let mut v = s;
    v.params = point.clone();
    v.grid.clear();
    if factor != 1.0 {
        let eps = point["eps"].as_f64().unwrap();
        v.sampler = Some([("eps".to_string(), json!(eps * factor))].into());
    }
    v
}

fn options(samples: u64, shards: u64) -> RunOptions {
    RunOptions {
        samples: Some(samples),
        seed: 7,
        shards,
        ..RunOptions::default()
    }
}

/// Draws every shard of `suites` through a counts file (written and read back).
fn shard_files(suites: &[Suite], samples: u64, count: u64, dir: &Path) -> Vec<(String, Counts)> {
    Shard::all(count)
        .map(|s| {
            let counts = shard::run_shard(suites, &options(samples, 1), s).unwrap();
            let path = dir.join(format!("shard-{}.json", s.index()));
            counts.write(&path).unwrap();
            (path.display().to_string(), Counts::read(&path).unwrap())
        })
        .collect()
}

/// The per-point, per-input count tables of a `tables()` JSON.
fn inputs(tables: &Value) -> Vec<&Value> {
    tables
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p.as_array().unwrap())
        .collect()
}

/// The number of serial pairs of stream 0 at lag `lag` in one input's tables.
fn pairs(input: &Value, lag: usize) -> u64 {
    let lags = &input["streams"]["lags"];
    let a = lags["alphabet"].as_u64().unwrap() as usize;
    lags["table"].as_array().unwrap()[(lag - 1) * a * a..lag * a * a]
        .iter()
        .map(|v| v.as_u64().unwrap())
        .sum()
}

#[test]
fn merged_shards_equal_the_run_drawn_in_one_process() {
    let dir = scratch("equal");
    // A histogram law, a k-ary law, bit vectors with a learned event, real outputs (KS),
    // and a mis-calibrated sampler (the verdict must be a FAIL both ways).
    let cases = [
        ("rr-binary", 1.0, 30_000),
        ("rr-kary", 1.0, 30_000),
        ("frequency-oue", 1.0, 30_000),
        ("laplace", 1.0, 6_000),
        ("rr-binary", 1.5, 60_000),
    ];
    for (name, factor, samples) in cases {
        let suites = [suite(name, factor)];
        let files = shard_files(&suites, samples, 3, &dir);
        // The shards are different draws (their seeds differ).
        assert_ne!(files[0].1.tables(), files[1].1.tables(), "{name}");
        let merge = Merge::of(files.clone()).unwrap();
        let single = engine::run_tables(&suites, &options(samples, 3)).unwrap();
        assert_eq!(merge.tables(), single, "{name}: merged counts");
        // No serial pair straddles two shards: each input has Σ over shards of
        // (its share − ℓ) pairs at lag ℓ; and the histograms are the shards' sums.
        let shard_tables: Vec<Value> = files.iter().map(|(_, c)| c.tables()).collect();
        for (k, input) in inputs(&single).into_iter().enumerate() {
            for lag in [1, 8] {
                let expected: u64 = Shard::all(3)
                    .map(|s| s.samples(samples).saturating_sub(lag as u64))
                    .sum();
                assert_eq!(pairs(input, lag), expected, "{name} input {k} lag {lag}");
                let per_shard: u64 = shard_tables.iter().map(|t| pairs(inputs(t)[k], lag)).sum();
                assert_eq!(per_shard, expected, "{name} input {k} lag {lag}");
            }
            if let Some(counts) = input["data"]["Counts"].as_array() {
                for (c, v) in counts.iter().enumerate() {
                    let sum: u64 = shard_tables
                        .iter()
                        .map(|t| inputs(t)[k]["data"]["Counts"][c].as_u64().unwrap())
                        .sum();
                    assert_eq!(v.as_u64().unwrap(), sum, "{name} input {k} cell {c}");
                }
            }
        }
        let merged = merge.report().unwrap();
        let one = engine::run(&suites, &options(samples, 3)).unwrap();
        assert_eq!(merged.to_json(), one.to_json(), "{name}: report");
        assert_eq!(merged.to_json()["shards"], 3);
        assert_eq!(merged.passed(), factor == 1.0, "{name} x{factor}: verdict");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn one_shard_is_the_plain_run() {
    let suites = [suite("rr-kary", 1.0)];
    let plain = options(20_000, 1);
    assert_eq!(Shard::WHOLE.seed(12345), 12345);
    assert_eq!(Shard::WHOLE.samples(20_000), 20_000);
    let counts = shard::run_shard(&suites, &plain, Shard::WHOLE).unwrap();
    let merge = Merge::of(vec![("whole".into(), counts)]).unwrap();
    assert_eq!(merge.tables(), engine::run_tables(&suites, &plain).unwrap());
    assert_eq!(
        merge.report().unwrap().to_json(),
        engine::run(&suites, &RunOptions { shards: 1, ..plain })
            .unwrap()
            .to_json()
    );
}

#[test]
fn shard_shares_and_seeds() {
    // The shares add up to the total, differ by at most one, and the seeds are distinct.
    for (n, count) in [(10u64, 3u64), (2, 5), (1_000_003, 7), (5, 1)] {
        let shares: Vec<u64> = Shard::all(count).map(|s| s.samples(n)).collect();
        assert_eq!(shares.iter().sum::<u64>(), n);
        assert!(shares.iter().max().unwrap() - shares.iter().min().unwrap() <= 1);
        let mut seeds: Vec<u64> = Shard::all(count).map(|s| s.seed(42)).collect();
        seeds.sort_unstable();
        seeds.dedup();
        assert_eq!(seeds.len() as u64, count);
    }
    // Shard i of 2 and shard i of 3 draw different streams.
    assert_ne!(
        Shard::new(0, 2).unwrap().seed(1),
        Shard::new(0, 3).unwrap().seed(1)
    );
    assert_eq!(Shard::parse("2/3").unwrap(), Shard::new(2, 3).unwrap());
    for bad in ["3/3", "0/0", "1", "a/3", "-1/3", "1/3/4", ""] {
        assert!(Shard::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn wrong_sets_of_counts_files_are_typed_errors() {
    let dir = scratch("wrong");
    let suites = [suite("rr-binary", 1.0)];
    let files = shard_files(&suites, 3_000, 3, &dir);
    let set = |picks: &[usize]| -> Vec<(String, Counts)> {
        picks.iter().map(|&i| files[i].clone()).collect()
    };
    let err = |files: Vec<(String, Counts)>| Merge::of(files).err().unwrap();
    assert_eq!(err(Vec::new()), ShardError::NoFiles);
    assert!(matches!(
        err(set(&[0, 2])),
        ShardError::Missing { ref missing, count: 3 } if missing == &[1]
    ));
    assert!(matches!(
        err(set(&[0, 1, 1, 2])),
        ShardError::Duplicate { index: 1, .. }
    ));
    // Another seed, another sample size, another shard count, another suite.
    let other = |opts: RunOptions, suites: &[Suite], s: Shard| {
        (
            "other".to_string(),
            shard::run_shard(suites, &opts, s).unwrap(),
        )
    };
    let mut seeded = options(3_000, 1);
    seeded.seed = 8;
    let cases = [
        (other(seeded, &suites, Shard::new(1, 3).unwrap()), "seed"),
        (
            other(options(3_001, 1), &suites, Shard::new(1, 3).unwrap()),
            "samples",
        ),
        (
            other(options(3_000, 1), &suites, Shard::new(1, 4).unwrap()),
            "number of shards",
        ),
        (
            other(
                options(3_000, 1),
                &[suite("rr-binary", 1.2)],
                Shard::new(1, 3).unwrap(),
            ),
            "suites",
        ),
    ];
    for (odd, what) in cases {
        let mut v = set(&[0, 2]);
        v.push(odd);
        match err(v) {
            ShardError::Mismatch { what: w, path, .. } => {
                assert!(w.contains(what), "{what}: {w}");
                assert_eq!(path, "other");
            }
            e => panic!("{what}: {e:?}"),
        }
    }
    // Corrupted files: not JSON, truncated, another format, another version, tampered
    // counts, an impossible shard.
    let text = std::fs::read_to_string(&files[1].0).unwrap();
    let value: Value = serde_json::from_str(&text).unwrap();
    let edit = |f: &dyn Fn(&mut Value)| {
        let mut v = value.clone();
        f(&mut v);
        serde_json::to_vec(&v).unwrap()
    };
    let corrupt = [
        b"not json".to_vec(),
        text.as_bytes()[..text.len() / 2].to_vec(),
        edit(&|v| v["format"] = json!("something-else")),
        edit(&|v| {
            let c = &mut v["points"][0]["inputs"][0]["data"]["Counts"][0];
            *c = json!(c.as_u64().unwrap() + 1);
            v["points"][0]["inputs"][0]["streams"]["position"] = json!(1);
        }),
        edit(&|v| v["shard"]["index"] = json!(3)),
        edit(&|v| v["surprise"] = json!(1)),
    ];
    for (k, bytes) in corrupt.iter().enumerate() {
        assert!(
            matches!(Counts::parse("f", bytes), Err(ShardError::Corrupt { .. })),
            "case {k}: {:?}",
            Counts::parse("f", bytes).map(|_| ())
        );
    }
    assert!(matches!(
        Counts::parse("f", &edit(&|v| v["format_version"] = json!(99))),
        Err(ShardError::FormatVersion { found: 99, .. })
    ));
    assert!(matches!(
        Counts::parse("f", &edit(&|v| v["fl_audit_version"] = json!("0.0.1"))),
        Err(ShardError::ToolVersion { .. })
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_fl-audit"));
    c.env_remove("CI").env_remove(suite::SUITE_DIR_ENV);
    c
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().unwrap()
}

fn ok(o: &Output) {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The command line: `run --shard` three times and `merge` (files in any order) give the
/// report of `run --shards 3`; an external mechanism's shards (seeded through `{seed}`)
/// merge into a passing report; a missing shard is exit status 2 with one line.
#[test]
fn the_command_line_shards_and_merges() {
    let dir = scratch("cli");
    let d = |p: &str| dir.join(p).display().to_string();
    let base = ["run", "--suite", "rr-kary", "--samples", "20000"];
    for i in 0..3 {
        let (shard, out) = (format!("{i}/3"), d(&format!("c{i}.json")));
        ok(&run(&[
            &base[..],
            &["--shard", &shard, "--counts-out", &out],
        ]
        .concat()));
    }
    let single = d("single");
    ok(&run(
        &[&base[..], &["--shards", "3", "--out", &single]].concat()
    ));
    ok(&run(&[
        "merge",
        &d("c2.json"),
        &d("c0.json"),
        &d("c1.json"),
        "--out",
        &d("merged"),
    ]));
    for file in ["report.json", "report.md", "report.html", "rr-kary.svg"] {
        assert_eq!(
            std::fs::read(dir.join("single").join(file)).unwrap(),
            std::fs::read(dir.join("merged").join(file)).unwrap(),
            "{file}"
        );
    }
    // The merged report follows the report schema and says it was sharded.
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("report.schema.json"))
            .unwrap(),
    )
    .unwrap();
    let report: Value =
        serde_json::from_slice(&std::fs::read(dir.join("merged").join("report.json")).unwrap())
            .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(validator.is_valid(&report));
    assert_eq!(report["shards"], 3);
    let md = std::fs::read_to_string(dir.join("merged").join("report.md")).unwrap();
    assert!(md.contains("drawn as 3 shards"), "{md}");
    let missing = run(&["merge", &d("c0.json"), &d("c2.json"), "--out", &d("x")]);
    assert_eq!(missing.status.code(), Some(2));
    let err = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("missing: 1"), "{err}");
    assert!(!dir.join("x").join("report.json").exists());
    // --shard needs --counts-out, and writes no report.
    let lone = run(&["run", "--suite", "rr-kary", "--shard", "0/3"]);
    assert_eq!(lone.status.code(), Some(2));
    let (counts, out) = (d("z.json"), d("z"));
    let both = ["--shard", "0/3", "--counts-out", &counts, "--out", &out];
    assert_eq!(run(&[&base[..], &both].concat()).status.code(), Some(2));
    assert!(!dir.join("z.json").exists());

    // An external mechanism, seeded per shard through `{seed}`.
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join("mechanism_correct.py")
        .display()
        .to_string();
    // The mechanism's law, as fl-audit's options and as the script's.
    let law = ["--mechanism", "rr-kary", "--eps", "1", "--classes", "4"];
    for i in 0..3 {
        let (shard, out) = (format!("{i}/3"), d(&format!("e{i}.json")));
        let audit = [
            "external",
            "--samples",
            "30000",
            "--shard",
            &shard,
            "--counts-out",
            &out,
        ];
        let child = ["--", "python3", &script];
        ok(&run(&[
            &audit[..],
            &law,
            &child,
            &law,
            &["--seed", "{seed}"],
        ]
        .concat()));
    }
    let e: Vec<String> = (0..3).map(|i| d(&format!("e{i}.json"))).collect();
    let merged = run(&["merge", &e[0], &e[1], &e[2], "--out", &d("external")]);
    ok(&merged);
    assert!(String::from_utf8_lossy(&merged.stdout).contains("PASS"));
    // The three shards got three different seeds: different counts.
    let tables: Vec<Value> = e
        .iter()
        .map(|p| Counts::read(Path::new(p)).unwrap().tables())
        .collect();
    assert_ne!(tables[0], tables[1]);
    // An external shard and a run shard are not one run.
    let mixed = run(&["merge", &e[0], &e[1], &d("c2.json"), "--out", &d("y")]);
    assert_eq!(mixed.status.code(), Some(2));
    std::fs::remove_dir_all(&dir).unwrap();
}
