//! End-to-end tests of the `fl-audit` binary: exit statuses, the report and its schema,
//! reproducibility, `external` against the shipped Python examples and misbehaving
//! children. Every statistical outcome uses a fixed seed (the examples take `--seed`).
// Test helpers outside #[test] functions: a failing unwrap is a failing test.
#![allow(clippy::unwrap_used)]

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

/// The binary, with an environment that does not depend on where the tests run: `CI`
/// turns on the progress lines on stderr and `FL_AUDIT_SUITES` adds suites to the run, so
/// both are removed (one test sets `CI` on purpose).
fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_fl-audit"));
    c.env_remove("CI")
        .env_remove(fl_audit::suite::SUITE_DIR_ENV);
    c
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fl-audit-it-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().unwrap()
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn example(name: &str) -> String {
    root().join("examples").join(name).display().to_string()
}

#[test]
fn run_writes_a_schema_valid_reproducible_report() {
    let d = scratch("run");
    let out_a = d.join("a");
    let out_b = d.join("b");
    for out in [&out_a, &out_b] {
        let o = run(&[
            "run",
            "--samples",
            "20000",
            "--seed",
            "7",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
        assert!(stdout(&o).contains("PASS"));
    }
    let a = std::fs::read(out_a.join("report.json")).unwrap();
    let b = std::fs::read(out_b.join("report.json")).unwrap();
    assert_eq!(a, b, "same seed, same report");
    let report: serde_json::Value = serde_json::from_slice(&a).unwrap();
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("report.schema.json")).unwrap())
            .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&report)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(report["seed"], 7);
    assert_eq!(report["alpha"], 1e-3);
    assert!(report["versions"]["fl-ldp"].is_string());
    assert!(report["results"].as_array().unwrap().len() > 100);
    assert!(!report["epsilon"].as_array().unwrap().is_empty());
    // The schema is not vacuous: a report missing a contract field fails it.
    let mut broken = report.clone();
    broken.as_object_mut().unwrap().remove("epsilon");
    assert!(!validator.is_valid(&broken));
    // Every suite has its plot; report.md links it.
    let md = std::fs::read_to_string(out_a.join("report.md")).unwrap();
    for s in report["suites"].as_array().unwrap() {
        let name = s["name"].as_str().unwrap();
        let svg = std::fs::read_to_string(out_a.join(format!("{name}.svg"))).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("</svg>"));
        assert!(md.contains(&format!("({name}.svg)")));
    }
    // Numbers for people: the versions line names rustc once, counts have separators.
    assert!(!md.contains("rustc rustc"), "{md}");
    assert!(md.contains("rustc 1."));
    assert!(md.contains(&format!(
        "samples drawn = {}",
        with_commas(report["samples"].as_u64().unwrap())
    )));
    check_html(&out_a, &report);
    // A different seed gives different samples.
    let out_c = d.join("c");
    let o = run(&[
        "run",
        "--suite",
        "rr-binary",
        "--samples",
        "20000",
        "--seed",
        "8",
        "--out",
        out_c.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0);
    assert_ne!(std::fs::read(out_c.join("report.json")).unwrap(), a);
    std::fs::remove_dir_all(&d).unwrap();
}

fn with_commas(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// report.html parses as XML (XHTML), is self-contained (no external `src` or `href`, no
/// script), holds one inline SVG plot per suite and one section per suite, and shows the
/// run's verdict and every failing test.
fn check_html(dir: &Path, report: &serde_json::Value) {
    let text = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let doc = roxmltree::Document::parse_with_options(
        &text,
        roxmltree::ParsingOptions {
            allow_dtd: true,
            ..Default::default()
        },
    )
    .unwrap();
    let html = doc.root_element();
    assert_eq!(html.tag_name().name(), "html");
    let svg_ns = "http://www.w3.org/2000/svg";
    let suites = report["suites"].as_array().unwrap();
    let svgs = doc
        .descendants()
        .filter(|n| n.has_tag_name((svg_ns, "svg")))
        .count();
    assert_eq!(svgs, suites.len(), "one inline plot per suite");
    for n in doc.descendants() {
        assert!(!n.has_tag_name("script") && !n.has_tag_name("link") && !n.has_tag_name("img"));
        for a in n.attributes() {
            assert!(
                !matches!(a.name(), "src" | "href"),
                "external reference {}={}",
                a.name(),
                a.value()
            );
        }
    }
    for s in suites {
        let id = format!("suite-{}", s["name"].as_str().unwrap());
        assert!(
            doc.descendants()
                .any(|n| n.attribute("id") == Some(id.as_str())),
            "{id}"
        );
    }
    let title = doc
        .descendants()
        .find(|n| n.has_tag_name("h1"))
        .and_then(|n| n.text())
        .unwrap_or_default();
    let passed = report["passed"].as_bool().unwrap();
    assert!(
        title.ends_with(if passed { "PASS" } else { "FAIL" }),
        "{title}"
    );
    let strong: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("strong"))
        .filter_map(|n| n.text())
        .collect();
    let failing = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| !r["passed"].as_bool().unwrap())
        .count();
    assert!(strong.iter().filter(|s| **s == "FAIL").count() >= failing);
}

#[test]
fn a_failing_run_exits_1_and_still_writes_its_report() {
    let d = scratch("fail");
    let suite = d.join("bad.json");
    std::fs::write(
        &suite,
        r#"{"name":"bad","mechanism":"rr-binary","params":{"eps":1},"seed":1,
            "samples":200000,"tests":["cells","epsilon"],"sampler":{"eps":1.5}}"#,
    )
    .unwrap();
    let out = d.join("out");
    let o = run(&[
        "run",
        "--suite",
        suite.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 1, "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("FAIL"));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["passed"], false);
    // The failing report's HTML shows the verdict and the failures, and its plot draws the
    // failing cells in red (beyond the threshold).
    check_html(&out, &report);
    let svg = std::fs::read_to_string(out.join("bad.svg")).unwrap();
    assert!(svg.contains("class=\"bad\""), "{svg}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn usage_errors_exit_2_with_one_line_and_no_report() {
    let d = scratch("usage");
    let out = d.join("never");
    let o_str = out.to_str().unwrap();
    let file = d.join("file");
    std::fs::write(&file, b"x").unwrap();
    let unwritable = file.join("sub");
    for (args, what) in [
        (
            vec!["run", "--suite", "nope", "--out", o_str],
            "unknown suite",
        ),
        (
            vec!["run", "--samples", "abc", "--out", o_str],
            "invalid value",
        ),
        (vec!["run", "--samples", "0", "--out", o_str], "0"),
        (vec!["run", "--alpha", "2", "--out", o_str], "alpha"),
        (vec!["run", "--out", unwritable.to_str().unwrap()], "file"),
        (
            vec!["epsilon", "--mechanism", "nope", "--eps", "1"],
            "unknown mechanism",
        ),
        (
            vec!["epsilon", "--mechanism", "rr-kary", "--eps", "1"],
            "--classes",
        ),
        (
            vec!["epsilon", "--mechanism", "rr-binary", "--eps", "-1"],
            "eps",
        ),
        (
            vec!["epsilon", "--mechanism", "rr-binary", "--eps", "x"],
            "invalid value",
        ),
        (
            vec![
                "external",
                "--mechanism",
                "embedding-dp",
                "--eps",
                "1",
                "--",
                "true",
            ],
            "--dim",
        ),
        (
            vec![
                "external",
                "--mechanism",
                "estimator-grr",
                "--eps",
                "1",
                "--",
                "true",
            ],
            "external audits support",
        ),
        (
            vec!["external", "--mechanism", "rr-binary", "--eps", "1"],
            "COMMAND",
        ),
        (vec!["frobnicate"], "unrecognized subcommand"),
    ] {
        let o = run(&args);
        assert_eq!(code(&o), 2, "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains(what), "{args:?}: {err}");
    }
    assert!(!out.exists(), "no report after a usage error");
    assert_eq!(
        std::fs::read_dir(&d).unwrap().count(),
        1,
        "no temporaries left"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// `fl-audit external` at ε = 1 with the audit's options `audit` against an example
/// script given `script_args`.
fn external(
    mechanism: &str,
    audit: &[&str],
    script: &str,
    script_args: &[&str],
    samples: &str,
) -> Output {
    let mut args = vec![
        "external",
        "--mechanism",
        mechanism,
        "--eps",
        "1",
        "--samples",
        samples,
    ];
    args.extend_from_slice(audit);
    args.extend_from_slice(&["--", "python3"]);
    let path = example(script);
    args.push(&path);
    args.extend_from_slice(&["--mechanism", mechanism, "--eps", "1", "--seed", "11"]);
    args.extend_from_slice(script_args);
    run(&args)
}

/// Every mechanism family: (mechanism, audit options, script options, samples per input).
fn families() -> Vec<(
    &'static str,
    Vec<&'static str>,
    Vec<&'static str>,
    &'static str,
)> {
    // Most families take the same options in the audit and in the script.
    let same = |m, o: &[&'static str], n| (m, o.to_vec(), o.to_vec(), n);
    let client = [
        "--top-k-fraction",
        "0.1",
        "--output-dim",
        "2",
        "--eps-rr",
        "1",
    ];
    let selection = ["--dim", "8", "--top-k", "2", "--output-dim", "2"];
    vec![
        same("rr-binary", &[], "100000"),
        same("label-dp-binary", &[], "100000"),
        same("rr-kary", &["--classes", "3"], "50000"),
        same("label-dp-onehot", &["--classes", "4"], "50000"),
        ("embedding-dp", vec!["--dim", "3"], vec![], "30000"),
        ("laplace", vec!["--dim", "3"], vec![], "20000"),
        (
            "exponential",
            vec!["--utilities", "3,1,0,3,2"],
            vec![],
            "40000",
        ),
        same("rr-with-prior", &["--prior", "0.6,0.3,0.05,0.05"], "40000"),
        same("frequency-grr", &["--classes", "4"], "40000"),
        same("frequency-oue", &["--classes", "4"], "30000"),
        same("frequency-olh", &["--classes", "4"], "40000"),
        same(
            "frequency-olh",
            &["--classes", "4", "--olh-hash", "reported"],
            "40000",
        ),
        same("signds-selection", &selection, "30000"),
        (
            "signds-selection",
            [&selection[..], &["--selection-input", "update"]].concat(),
            selection.to_vec(),
            "30000",
        ),
        same("signds-magrr", &[], "50000"),
        (
            "signds-client",
            [&["--dim", "40"][..], &client[..]].concat(),
            client.to_vec(),
            "20000",
        ),
    ]
}

#[test]
fn external_examples_pass_and_fail_for_every_family() {
    for (mechanism, audit, script, samples) in families() {
        let good = external(mechanism, &audit, "mechanism_correct.py", &script, samples);
        assert_eq!(
            code(&good),
            0,
            "{mechanism} {audit:?}: {}{}",
            stdout(&good),
            stderr(&good)
        );
        assert!(stdout(&good).contains("PASS"), "{}", stdout(&good));
        let bad = external(mechanism, &audit, "mechanism_wrong.py", &script, samples);
        assert_eq!(
            code(&bad),
            1,
            "{mechanism} {audit:?}: {}{}",
            stdout(&bad),
            stderr(&bad)
        );
        let out = stdout(&bad);
        assert!(out.contains("FAIL") && out.contains("eps_lb"), "{out}");
    }
}

/// Serial independence through the protocol: the correct example told to return its
/// previous output again 5 % of the time fails on `serial-independence`.
#[test]
fn external_audits_reject_reused_randomness() {
    for (mechanism, audit, script, samples) in [
        ("rr-binary", vec![], vec!["--repeat", "0.05"], "100000"),
        (
            "embedding-dp",
            vec!["--dim", "3"],
            vec!["--repeat", "0.05"],
            "60000",
        ),
    ] {
        let bad = external(mechanism, &audit, "mechanism_correct.py", &script, samples);
        assert_eq!(
            code(&bad),
            1,
            "{mechanism}: {}{}",
            stdout(&bad),
            stderr(&bad)
        );
        assert!(
            stdout(&bad).contains("FAIL: serial-independence"),
            "{}",
            stdout(&bad)
        );
    }
}

/// Parameters from a suite file (one grid point), overridden by options.
#[test]
fn external_reads_parameters_from_a_suite_file() {
    let d = scratch("external-suite");
    let file = d.join("exp.json");
    std::fs::write(
        &file,
        r#"{"name": "exp", "mechanism": "exponential", "seed": 1, "tests": ["cells"],
            "params": {"utilities": [3, 1, 0, 3, 2], "sensitivity": 1}}"#,
    )
    .unwrap();
    let file = file.display().to_string();
    let good = external(
        "exponential",
        &["--suite", &file],
        "mechanism_correct.py",
        &[],
        "20000",
    );
    assert_eq!(code(&good), 0, "{}{}", stdout(&good), stderr(&good));
    // The wrong mechanism type for the file is a usage error.
    let o = run(&[
        "external",
        "--mechanism",
        "rr-binary",
        "--eps",
        "1",
        "--suite",
        &file,
        "--",
        "true",
    ]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("is for mechanism `exponential`"),
        "{}",
        stderr(&o)
    );
    // A missing parameter names its option.
    let o = run(&[
        "external",
        "--mechanism",
        "exponential",
        "--eps",
        "1",
        "--",
        "true",
    ]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("needs --utilities"), "{}", stderr(&o));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn misbehaving_children_exit_2() {
    for (script, what) in [
        (
            "import sys; sys.stdin.readline(); sys.exit(3)",
            "closed its stdout",
        ),
        (
            "import sys, time; sys.stdin.readline(); time.sleep(60)",
            "timeout",
        ),
        (
            "import sys; sys.stdin.readline(); print('{\"outputs\": [1, 0]}', flush=True)",
            "wrong count",
        ),
        (
            "import sys; sys.stdin.readline(); print('oops', flush=True)",
            "malformed",
        ),
        (
            "import sys\nfor l in sys.stdin: print('{\"outputs\": [7]}', flush=True)",
            "expected an integer",
        ),
        ("raise SystemExit(1)", "external mechanism"),
    ] {
        // Only the hanging child needs a short timeout; the others get a generous one so
        // that a slow Python start-up on a loaded machine is not mistaken for a hang.
        let timeout = if what == "timeout" { "1" } else { "60" };
        let o = run(&[
            "external",
            "--mechanism",
            "rr-binary",
            "--eps",
            "1",
            "--samples",
            "1",
            "--timeout",
            timeout,
            "--",
            "python3",
            "-c",
            script,
        ]);
        assert_eq!(code(&o), 2, "{script}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains(what), "{script}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(!err.contains("panicked"));
    }
    let o = run(&[
        "external",
        "--mechanism",
        "rr-binary",
        "--eps",
        "1",
        "--",
        "/nonexistent/mechanism",
    ]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("cannot start"));
}

#[test]
fn list_epsilon_and_plan_commands() {
    let o = run(&["list"]);
    assert_eq!(code(&o), 0);
    for name in [
        "rr-binary",
        "rr-kary",
        "embedding-dp",
        "laplace",
        "exponential",
    ] {
        assert!(stdout(&o).contains(name), "{name}");
    }
    let o = run(&[
        "epsilon",
        "--mechanism",
        "rr-kary",
        "--classes",
        "3",
        "--eps",
        "1",
        "--samples",
        "200000",
        "--seed",
        "3",
    ]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("certified lower bound"));
    assert!(stdout(&o).contains("consistent"));
    // plan: fl-stats' planner; more samples for a smaller error.
    let plan = |detect: &str| {
        let o = run(&[
            "plan",
            "--mechanism",
            "rr-binary",
            "--eps",
            "1",
            "--detect",
            detect,
        ]);
        assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
        let out = stdout(&o);
        let line = out
            .lines()
            .find(|l| l.starts_with("samples per input: "))
            .unwrap();
        line["samples per input: ".len()..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    let (one, two) = (plan("0.01"), plan("0.02"));
    assert!(one > 3 * two && one < 5 * two, "{one} vs {two}");
    for (args, what) in [
        (vec!["--detect", "2", "--eps", "1"], "--detect"),
        (
            vec!["--detect", "0.01", "--eps", "1", "--power", "1"],
            "--power",
        ),
        (
            vec!["--detect", "0.01", "--eps", "1", "--alpha", "0"],
            "alpha",
        ),
    ] {
        let mut a = vec!["plan", "--mechanism", "rr-binary"];
        a.extend(args);
        let o = run(&a);
        assert_eq!(code(&o), 2, "{a:?}");
        assert!(stderr(&o).contains(what), "{a:?}: {}", stderr(&o));
    }
    let o = run(&[
        "plan",
        "--mechanism",
        "rr-kary",
        "--eps",
        "1",
        "--detect",
        "0.01",
    ]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("--classes"));
}

#[test]
fn help_exits_0() {
    let o = run(&["--help"]);
    assert_eq!(code(&o), 0);
    for sub in ["run", "list", "epsilon", "plan", "external"] {
        assert!(stdout(&o).contains(sub));
    }
}

#[test]
fn suites_that_cannot_run_as_asked_exit_2() {
    let d = scratch("shape");
    for (text, what) in [
        // A sampler override that changes the output shape, not a calibration.
        (
            r#"{"name":"s","mechanism":"signds-selection","params":{"eps":1,"dim":8,"top_k":2,
               "output_dim":2},"seed":1,"samples":1000,"tests":["nu"],"sampler":{"output_dim":3}}"#,
            "output shape",
        ),
        // Whole-set tests on a selection with too many output sets.
        (
            r#"{"name":"s","mechanism":"signds-selection","params":{"eps":1,"dim":200,"top_k":10,
               "output_dim":10},"seed":1,"samples":1000,"tests":["nu","epsilon"]}"#,
            "output sets",
        ),
        (
            r#"{"name":"s","mechanism":"frequency-oue","params":{"eps":1},"seed":1,
               "samples":1000,"tests":["support"]}"#,
            "missing parameter `k`",
        ),
        // Laws too large to hold: a usage error, not an out-of-memory abort.
        (
            r#"{"name":"s","mechanism":"rr-kary","params":{"eps":1,"k":65536},"seed":1,
               "samples":1000,"tests":["cells"]}"#,
            "2^24",
        ),
        (
            r#"{"name":"s","mechanism":"frequency-olh","params":{"eps":0.1,"k":65536},"seed":1,
               "samples":1000,"tests":["support"]}"#,
            "2^24",
        ),
        (
            r#"{"name":"s","mechanism":"signds-client","params":{"eps":1,"dim":40,
               "top_k_fraction":0.9,"eps_rr":1},"seed":1,"samples":1000,"tests":["sign"]}"#,
            "top",
        ),
    ] {
        let file = d.join("s.json");
        std::fs::write(&file, text).unwrap();
        let out = d.join("out");
        let args = [
            "run",
            "--suite",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ];
        let o = run(&args);
        assert_eq!(code(&o), 2, "{text}: {}{}", stdout(&o), stderr(&o));
        assert!(stderr(&o).contains(what), "{what}: {}", stderr(&o));
        assert_eq!(stderr(&o).trim_end().lines().count(), 1);
        assert!(!out.exists());
        // Under CI the progress lines come first, and the error is still the last line.
        let o = bin().env("CI", "true").args(args).output().unwrap();
        assert_eq!(code(&o), 2, "{text}: {}{}", stdout(&o), stderr(&o));
        let err = stderr(&o);
        let last = err.trim_end().lines().last().unwrap_or_default();
        assert!(
            last.starts_with("fl-audit: ") && last.contains(what),
            "{what}: {err}"
        );
        assert!(!out.exists());
    }
    std::fs::remove_dir_all(&d).unwrap();
}
