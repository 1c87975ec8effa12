//! Merged shards you can trust: `fl-audit merge` checks every table of every counts file
//! against what the run's sources draw for that shard before anything is summed or
//! analysed, and refuses (a typed error, exit status 2, one line naming the file, the grid
//! point, the input and the table) a file whose tables have another shape or other totals,
//! shards of two audited commands or two builds, and sums that overflow; no crafted file
//! panics it.
//!
//! Negative controls, one per class of defect, each drawn as a real shard and then edited:
//! all-zero tables at a valid position, a table of another length, a table of another
//! kind, alphabets of 0 and 2³², a zero batch size, overflowing counts, non-finite reals,
//! huge claimed lengths, shards of two mechanisms, of two external programs and of two
//! builds. A seeded mutation loop then requires every mutant of valid files to be merged
//! or refused with a typed error, never to panic.
// Test helpers outside #[test] functions: a failing unwrap or panic is a failing test.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use fl_audit::{
    cli::{ExternalAudit, LawArgs},
    engine::{RunOptions, Shard},
    external::Responder,
    protocol::{OutputKind, Outputs},
    shard::{self, BUILD_ID, Counts, Merge, ShardError},
    suite::{self, Suite},
};
use rand::{Rng, SeedableRng, rngs::ChaCha20Rng};
use serde_json::{Value, json};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fl-audit-valid-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The built-in suite `name` reduced to its first grid point.
fn suite(name: &str) -> Suite {
    let s = suite::builtin()
        .unwrap()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap();
    let point = s.points().remove(0);
    let mut v = s;
    v.params = point;
    v.grid.clear();
    v
}

fn options(samples: u64) -> RunOptions {
    RunOptions {
        samples: Some(samples),
        seed: 11,
        ..RunOptions::default()
    }
}

/// The counts files of every shard of a run of `suites`, as JSON.
fn shards(suites: &[Suite], samples: u64, count: u64) -> Vec<Value> {
    Shard::all(count)
        .map(|s| {
            let c = shard::run_shard(suites, &options(samples), s).unwrap();
            serde_json::to_value(&c).unwrap()
        })
        .collect()
}

fn parse(v: &Value) -> Result<Counts, ShardError> {
    Counts::parse("f.json", &serde_json::to_vec(v).unwrap())
}

/// Parses and merges the files (`Ok` with the merge, or the first error).
fn merge(files: &[Value]) -> Result<Merge, ShardError> {
    let parsed = files
        .iter()
        .enumerate()
        .map(|(i, v)| {
            Counts::parse(&format!("s{i}.json"), &serde_json::to_vec(v).unwrap())
                .map(|c| (format!("s{i}.json"), c))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Merge::of(parsed)
}

/// The table a merge of `files` refuses (panics when it is accepted or refused otherwise).
fn refused_table(files: &[Value]) -> String {
    match merge(files) {
        Err(ShardError::Table {
            path,
            point,
            input,
            table,
            message,
        }) => {
            assert!(
                path.ends_with(".json") && point.starts_with("suite `") && input.contains("input"),
                "{path} {point} {input}"
            );
            assert!(!message.is_empty());
            table
        }
        Err(e) => panic!("refused otherwise: {e}"),
        Ok(_) => panic!("accepted"),
    }
}

/// Every count array of one input's tables set to zero (the position kept).
fn zero_counts(v: &mut Value) {
    match v {
        Value::Array(a) => a.iter_mut().for_each(zero_counts),
        Value::Object(o) => {
            for (k, x) in o.iter_mut() {
                if k != "alphabet" && k != "position" {
                    zero_counts(x);
                }
            }
        }
        Value::Number(_) => *v = json!(0),
        _ => {}
    }
}

#[test]
fn valid_shards_of_every_builtin_suite_pass_the_checks() {
    // Every family's layout (histograms, bit statistics, reals, SignDS, estimators, OLH):
    // real shards validate and merge.
    for s in suite::builtin().unwrap() {
        let suites = [suite(&s.name)];
        let files = shards(&suites, 1_500, 3);
        let parsed = parse(&files[1]).unwrap();
        parsed.validate("s1.json").unwrap();
        assert_eq!(parsed.build(), BUILD_ID);
        assert!(merge(&files).is_ok(), "{}", s.name);
    }
    // A shard of more than one chunk of the sampler (2^18 outputs): pairs restart in each
    // piece, and the check knows it.
    let suites = [suite("rr-binary")];
    let files = shards(&suites, 2 * (1 << 18) + 5, 1);
    assert!(merge(&files).is_ok());
    let mut shifted = files[0].clone();
    // One pair more at lag 1 (as if the chunks were one stream) is refused.
    shifted["points"][0]["inputs"][0]["streams"]["lags"]["table"][0] = json!(
        shifted["points"][0]["inputs"][0]["streams"]["lags"]["table"][0]
            .as_u64()
            .unwrap()
            + 1
    );
    assert!(refused_table(&[shifted]).starts_with("streams.lags (stream 0, lag 1)"));
}

#[test]
fn tables_of_another_shape_or_other_totals_are_refused() {
    let suites = [suite("rr-kary")];
    let files = shards(&suites, 3_000, 3);
    let at = |f: &dyn Fn(&mut Value)| -> Vec<Value> {
        let mut v = files.clone();
        f(&mut v[1]);
        v
    };
    fn input(v: &mut Value) -> &mut Value {
        &mut v["points"][0]["inputs"][0]
    }
    // All-zero tables at a valid position (the shard's outputs, never drawn).
    let zeros = at(&|v| {
        zero_counts(&mut input(v)["data"]);
        zero_counts(&mut input(v)["streams"]);
    });
    assert!(refused_table(&zeros).starts_with("data.Counts"));
    let zero_streams = at(&|v| zero_counts(&mut input(v)["streams"]));
    assert!(refused_table(&zero_streams).starts_with("streams.lags"));
    // A table of another length: one cell more, one cell less, empty.
    for edit in [
        &(|a: &mut Vec<Value>| a.push(json!(0))) as &dyn Fn(&mut Vec<Value>),
        &|a| {
            a.pop();
        },
        &|a| a.clear(),
    ] {
        let longer = at(&|v| edit(input(v)["data"]["Counts"].as_array_mut().unwrap()));
        assert_eq!(refused_table(&longer), "data.Counts");
        let lags = at(&|v| edit(input(v)["streams"]["lags"]["table"].as_array_mut().unwrap()));
        assert_eq!(refused_table(&lags), "streams.lags");
        let fit = at(&|v| edit(input(v)["streams"]["events"]["fit"].as_array_mut().unwrap()));
        assert_eq!(refused_table(&fit), "streams.events");
    }
    // A table of another kind (bit statistics or reals where the law counts classes).
    let n = Shard::new(1, 3).unwrap().samples(3_000);
    for other in [
        json!({"Bits": {"n": n, "ones": [0], "both": [], "full": [n, 0]}}),
        json!({"RealCells": {"cells": [vec![n]], "in_box": 0}}),
    ] {
        let kind = at(&|v| input(v)["data"] = other.clone());
        assert_eq!(refused_table(&kind), "data");
    }
    // Alphabets of 0 and 2^32 (a division by zero or an overflow before these checks),
    // serial and batch; a batch left open; batches of other sizes.
    for a in [0u64, 1 << 32, 17] {
        let lags = at(&|v| input(v)["streams"]["lags"]["alphabet"] = json!(a));
        assert_eq!(refused_table(&lags), "streams.lags");
        let batches = at(&|v| input(v)["streams"]["batches"]["alphabet"] = json!(a));
        assert_eq!(refused_table(&batches), "streams.batches");
    }
    let open = at(&|v| {
        let b = &mut input(v)["streams"]["batches"];
        let a = b["alphabet"].as_u64().unwrap() as usize;
        let last = b["rows"].as_array().unwrap().len() - a;
        let row: Vec<Value> = b["rows"].as_array_mut().unwrap().drain(last..).collect();
        b["open"] = json!(row);
    });
    assert_eq!(refused_table(&open), "streams.batches");
    let more = at(&|v| {
        let rows = input(v)["streams"]["batches"]["rows"]
            .as_array_mut()
            .unwrap();
        rows[0] = json!(rows[0].as_u64().unwrap() + 1);
    });
    assert!(refused_table(&more).starts_with("streams.batches"));
    // Overflowing counts: two cells whose sum wraps around 2^64 to the right total.
    let wrap = at(&|v| {
        let c = input(v)["data"]["Counts"].as_array_mut().unwrap();
        let first = c[0].as_u64().unwrap();
        c[0] = json!(u64::MAX);
        c[1] = json!(c[1].as_u64().unwrap() + first + 1);
    });
    assert_eq!(refused_table(&wrap), "data.Counts");
    // Events in the wrong half.
    let halves = at(&|v| {
        let e = &mut input(v)["streams"]["events"];
        let f = e["fit"][0].as_u64().unwrap();
        e["fit"][0] = json!(0);
        e["certify"][0] = json!(e["certify"][0].as_u64().unwrap() + f);
    });
    assert!(refused_table(&halves).starts_with("streams.events"));
    // Huge claimed lengths: 2^63 samples with a matching position and histogram. Refused
    // on the first table that cannot hold them, without allocating for them.
    let huge = at(&|v| {
        let count = 1u64 << 63;
        v["points"][0]["samples"] = json!(count);
        let share = Shard::new(1, 3).unwrap().samples(count);
        for i in v["points"][0]["inputs"].as_array_mut().unwrap() {
            i["streams"]["position"] = json!(share);
            let c = i["data"]["Counts"].as_array_mut().unwrap();
            c.iter_mut().for_each(|x| *x = json!(0));
            c[0] = json!(share);
        }
    });
    // Another samples field is another run: the files are refused before their tables.
    assert!(matches!(merge(&huge), Err(ShardError::Mismatch { .. })));
    let mut all_huge = files.clone();
    for (k, f) in all_huge.iter_mut().enumerate() {
        let count = 1u64 << 63;
        f["points"][0]["samples"] = json!(count);
        let share = Shard::new(k as u64, 3).unwrap().samples(count);
        for i in f["points"][0]["inputs"].as_array_mut().unwrap() {
            i["streams"]["position"] = json!(share);
            let c = i["data"]["Counts"].as_array_mut().unwrap();
            c.iter_mut().for_each(|x| *x = json!(0));
            c[0] = json!(share);
        }
    }
    assert!(refused_table(&all_huge).starts_with("streams.lags"));
}

#[test]
fn bits_and_reals_are_checked_exactly() {
    let files = shards(&[suite("frequency-oue")], 3_000, 2);
    let input = |v: &mut Value| -> Value { v["points"][0]["inputs"][0]["data"]["Bits"].clone() };
    let with = |f: &dyn Fn(&mut Value)| -> Vec<Value> {
        let mut v = files.clone();
        let mut bits = input(&mut v[0]);
        f(&mut bits);
        v[0]["points"][0]["inputs"][0]["data"]["Bits"] = bits;
        v
    };
    // A one more than the whole vectors give; a pair counted more often than its bits.
    let ones = with(&|b| b["ones"][0] = json!(b["ones"][0].as_u64().unwrap() + 1));
    assert!(refused_table(&ones).starts_with("data.Bits"));
    let both = with(&|b| b["both"][0] = json!(u64::MAX));
    assert!(refused_table(&both).starts_with("data.Bits.both"));
    let dims = with(&|b| b["ones"].as_array_mut().unwrap().push(json!(0)));
    assert_eq!(refused_table(&dims), "data.Bits.ones");
    let nofull = with(&|b| b["full"] = Value::Null);
    assert_eq!(refused_table(&nofull), "data.Bits.full");

    // Real cells: a coordinate one cell short, a cell one output heavy, the box event above
    // the outputs.
    let files = shards(&[suite("laplace")], 600, 2);
    let cells = |v: &mut Vec<Value>| -> Vec<Value> {
        v[1]["points"][0]["inputs"][0]["data"]["RealCells"]["cells"][0]
            .as_array()
            .unwrap()
            .clone()
    };
    let mut short = files.clone();
    let mut c = cells(&mut short);
    c.pop();
    short[1]["points"][0]["inputs"][0]["data"]["RealCells"]["cells"][0] = json!(c);
    assert!(refused_table(&short).starts_with("data.RealCells"));
    let mut heavy = files.clone();
    let mut c = cells(&mut heavy);
    c[0] = json!(c[0].as_u64().unwrap() + 1);
    heavy[1]["points"][0]["inputs"][0]["data"]["RealCells"]["cells"][0] = json!(c);
    assert!(refused_table(&heavy).starts_with("data.RealCells"));
    let mut boxed = files;
    boxed[1]["points"][0]["inputs"][0]["data"]["RealCells"]["in_box"] = json!(1_000_000u64);
    assert!(refused_table(&boxed).starts_with("data.RealCells"));
}

/// An in-process mechanism answering rr-binary requests (fair coins).
struct Coins(ChaCha20Rng);

impl Responder for Coins {
    fn respond(&mut self, _: &Value, n: usize, _: OutputKind) -> fl_audit::Result<Outputs> {
        Ok(Outputs::Classes(
            (0..n).map(|_| (self.0.next_u32() & 1) as usize).collect(),
        ))
    }

    fn take_deviation(&mut self) -> Option<String> {
        None
    }
}

fn external_shard(program: &[String], shard: Shard) -> Value {
    let audit = ExternalAudit {
        mechanism: "rr-binary".into(),
        eps: Some(1.0),
        law: LawArgs::default(),
        samples: Some(2_000),
        alpha: 1e-3,
        batch: 64,
        out: None,
        seed: 0,
    };
    let counts = audit
        .run_shard(
            program,
            || Ok(Box::new(Coins(ChaCha20Rng::seed_from_u64(shard.index()))) as Box<dyn Responder>),
            false,
            shard,
        )
        .unwrap();
    serde_json::to_value(&counts).unwrap()
}

#[test]
fn shards_of_two_commands_or_two_builds_are_refused() {
    // The external program is recorded as given, `{seed}` not substituted.
    let program: Vec<String> = ["python3", "m.py", "--seed", "{seed}"]
        .map(String::from)
        .to_vec();
    let ext: Vec<Value> = Shard::all(2).map(|s| external_shard(&program, s)).collect();
    assert_eq!(ext[0]["run"]["program"], json!(program));
    assert_eq!(ext[0]["fl_audit_build"], json!(BUILD_ID));
    // The merged report records the program and the suite's hash.
    let report = merge(&ext).unwrap().report().unwrap().to_json();
    assert_eq!(report["audited"]["command"], json!("external"));
    assert_eq!(report["audited"]["program"], json!(program));
    assert_eq!(
        report["audited"]["suites"][0]["sha256"],
        ext[0]["run"]["suite_sha256"][0]
    );
    assert_eq!(report["versions"]["fl-audit-build"], json!(BUILD_ID));
    // External batches as the schedule asks: 1000 outputs in requests of at most 64, 1/32
    // of them in requests of one (2 cells per batch: rr-binary's alphabet).
    let rows = ext[0]["points"][0]["inputs"][0]["streams"]["batches"]["rows"]
        .as_array()
        .unwrap()
        .len();
    assert!(
        rows.is_multiple_of(2) && rows / 2 > 1000 / 32 && rows / 2 <= 1000,
        "{rows}"
    );
    // One output moved from the first batch to the second: the totals hold, the batch
    // sizes do not.
    let mut moved = ext.clone();
    let r = moved[0]["points"][0]["inputs"][0]["streams"]["batches"]["rows"]
        .as_array_mut()
        .unwrap();
    let (from, to) = if r[0].as_u64().unwrap() > 0 {
        (0, 2)
    } else {
        (1, 3)
    };
    r[from] = json!(r[from].as_u64().unwrap() - 1);
    r[to] = json!(r[to].as_u64().unwrap() + 1);
    assert_eq!(refused_table(&moved), "streams.batches (batch 0)");
    // Two programs.
    let other: Vec<String> = ["python3", "other.py"].map(String::from).to_vec();
    let two = [
        ext[0].clone(),
        external_shard(&other, Shard::new(1, 2).unwrap()),
    ];
    match merge(&two) {
        Err(ShardError::Mismatch { what, .. }) => assert!(what.contains("program"), "{what}"),
        r => panic!("{:?}", r.map(|_| ())),
    }
    // Zero and absent batch sizes.
    for batch in [json!(0), Value::Null, json!(u64::MAX)] {
        let mut v = ext.clone();
        for f in &mut v {
            f["run"]["batch"] = batch.clone();
        }
        match merge(&v) {
            Err(ShardError::Corrupt { message, .. }) => {
                assert!(message.contains("batch size"), "{message}");
            }
            r => panic!("{batch}: {:?}", r.map(|_| ())),
        }
    }
    // Two mechanisms: shard 0 of an rr-binary run, shard 1 of an rr-kary run.
    let a = shards(&[suite("rr-binary")], 2_000, 2);
    let b = shards(&[suite("rr-kary")], 2_000, 2);
    match merge(&[a[0].clone(), b[1].clone()]) {
        Err(ShardError::Mismatch { what, .. }) => assert!(what.contains("suites"), "{what}"),
        r => panic!("{:?}", r.map(|_| ())),
    }
    // A suite hash that is not the suite's.
    let mut hashed = a.clone();
    hashed[1]["run"]["suite_sha256"][0] = json!("00");
    assert!(matches!(merge(&hashed), Err(ShardError::Corrupt { .. })));
    // Two builds: each file must be of this build, whatever the other files say.
    for build in [json!("git:0000+dirty.1"), json!("unknown"), Value::Null] {
        let mut v = a.clone();
        v[1]["fl_audit_build"] = build.clone();
        assert!(
            matches!(merge(&v), Err(ShardError::Build { .. })),
            "{build}"
        );
        for f in &mut v {
            f["fl_audit_build"] = build.clone();
        }
        assert!(
            matches!(merge(&v), Err(ShardError::Build { .. })),
            "{build}"
        );
    }
    // A counts file of the previous format is refused as such.
    let mut old = a[0].clone();
    old["format_version"] = json!(1);
    old.as_object_mut().unwrap().remove("fl_audit_build");
    assert!(matches!(
        parse(&old),
        Err(ShardError::FormatVersion { found: 1, .. })
    ));
}

/// One random mutation of a counts file: a number changed, an array truncated, extended
/// or emptied, a kind changed, a field removed or its type changed.
fn mutate(v: &mut Value, rng: &mut ChaCha20Rng) {
    // Collect the paths of every node.
    fn walk(v: &Value, path: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
        out.push(path.clone());
        match v {
            Value::Array(a) => {
                // Long arrays: a few elements only (the mutations reach their ends too).
                let n = a.len();
                for i in [0, 1, n / 2, n.saturating_sub(1)] {
                    if i < n {
                        path.push(json!(i));
                        walk(&a[i], path, out);
                        path.pop();
                    }
                }
            }
            Value::Object(o) => {
                for (k, x) in o {
                    path.push(json!(k));
                    walk(x, path, out);
                    path.pop();
                }
            }
            _ => {}
        }
    }
    let mut paths = Vec::new();
    walk(v, &mut Vec::new(), &mut paths);
    let path = &paths[(rng.next_u32() as usize) % paths.len()];
    let mut node = &mut *v;
    for p in path {
        node = match p {
            Value::String(k) => &mut node[k.as_str()],
            Value::Number(i) => &mut node[i.as_u64().unwrap() as usize],
            _ => unreachable!(),
        };
    }
    let numbers = [
        json!(0),
        json!(1),
        json!(u64::MAX),
        json!(1u64 << 32),
        json!(1u64 << 63),
        json!(-1),
        json!(1.5),
        json!(1e300),
    ];
    match (rng.next_u32() % 6, &mut *node) {
        (0 | 1, n @ Value::Number(_)) => {
            *n = match n.as_u64() {
                Some(x) if rng.next_u32().is_multiple_of(2) => json!(x.wrapping_add(1)),
                Some(x) if rng.next_u32().is_multiple_of(2) => json!(x.wrapping_sub(1)),
                _ => numbers[(rng.next_u32() as usize) % numbers.len()].clone(),
            }
        }
        (2, Value::Array(a)) => {
            let keep = (rng.next_u32() as usize) % (a.len() + 1);
            a.truncate(keep);
        }
        (3, Value::Array(a)) => {
            let extra = a.last().cloned().unwrap_or(json!(0));
            for _ in 0..1 + rng.next_u32() % 3 {
                a.push(extra.clone());
            }
        }
        (4, Value::Object(o)) if !o.is_empty() => {
            let keys: Vec<String> = o.keys().cloned().collect();
            let k = &keys[(rng.next_u32() as usize) % keys.len()];
            match k.as_str() {
                "Counts" | "Bits" | "RealCells" => {
                    let x = o.remove(k).unwrap();
                    let kinds = ["Counts", "Bits", "RealCells"];
                    o.insert(kinds[(rng.next_u32() % 3) as usize].into(), x);
                }
                _ => {
                    o.remove(k);
                }
            }
        }
        (_, n) => {
            *n = [json!(null), json!([]), json!({}), json!("x"), json!(0)]
                [(rng.next_u32() % 5) as usize]
                .clone();
        }
    }
}

#[test]
fn no_mutant_of_a_valid_set_of_counts_files_panics_the_merge() {
    let mut rng = ChaCha20Rng::seed_from_u64(30);
    let sets = [
        shards(&[suite("rr-kary")], 2_000, 2),
        shards(&[suite("frequency-oue")], 600, 2),
        shards(&[suite("laplace")], 300, 2),
        shards(&[suite("signds-client")], 300, 2),
    ];
    let (mut accepted, mut refused) = (0, 0);
    for round in 0..400 {
        let set = &sets[round % sets.len()];
        let mut files = set.clone();
        let k = (rng.next_u32() as usize) % files.len();
        for _ in 0..1 + rng.next_u32() % 3 {
            mutate(&mut files[k], &mut rng);
        }
        match merge(&files) {
            Ok(m) => {
                // Accepted: the mutation kept a valid file; the analysis must not panic
                // either (its errors are typed).
                let _ = m.report();
                accepted += 1;
            }
            Err(e) => {
                assert!(!e.to_string().is_empty());
                refused += 1;
            }
        }
    }
    eprintln!("mutants: {accepted} accepted, {refused} refused");
    // Most mutations break a file; some (a timing, an unused field) do not.
    assert!(refused > 300, "{accepted} accepted, {refused} refused");
}

#[test]
fn the_command_line_names_the_file_point_input_and_table() {
    let dir = scratch("cli");
    let files = shards(&[suite("rr-kary")], 3_000, 2);
    let mut bad = files[1].clone();
    bad["points"][0]["inputs"][1]["data"]["Counts"]
        .as_array_mut()
        .unwrap()
        .push(json!(0));
    let write = |name: &str, v: &Value| -> String {
        let p = dir.join(name);
        std::fs::write(&p, serde_json::to_vec(v).unwrap()).unwrap();
        p.display().to_string()
    };
    let (a, b) = (write("a.json", &files[0]), write("b.json", &bad));
    let out = Command::new(env!("CARGO_BIN_EXE_fl-audit"))
        .env_remove("CI")
        .env_remove(suite::SUITE_DIR_ENV)
        .args(["merge", &a, &b, "--out"])
        .arg(dir.join("report"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    for part in ["b.json", "suite `rr-kary`", "input 1", "table data.Counts"] {
        assert!(err.contains(part), "{part}: {err}");
    }
    assert!(!Path::new(&dir.join("report").join("report.json")).exists());
    // The merged report of valid shards records the build.
    let good = write("b.json", &files[1]);
    let out = Command::new(env!("CARGO_BIN_EXE_fl-audit"))
        .env_remove("CI")
        .args(["merge", &a, &good, "--out"])
        .arg(dir.join("report"))
        .output()
        .unwrap();
    assert!(out.status.code().is_some_and(|c| c < 2));
    let report: Value =
        serde_json::from_slice(&std::fs::read(dir.join("report").join("report.json")).unwrap())
            .unwrap();
    assert_eq!(report["versions"]["fl-audit-build"], json!(BUILD_ID));
    assert_eq!(report["audited"]["command"], json!("run"));
    assert!(report["audited"].get("program").is_none());
    assert_eq!(
        report["audited"]["suites"][0]["sha256"],
        files[0]["run"]["suite_sha256"][0]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
