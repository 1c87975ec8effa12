//! The report for people as a small document model (headings, paragraphs, lists, tables,
//! figures), built once and rendered twice: `report.md` and the self-contained
//! `report.html` say the same thing.

use super::{EpsilonRow, Report, TestRow, fmt_count, fmt_eps, fmt_p, fmt_stat};
use crate::suite::params_label;

/// How many of a suite's passing tests the report lists (smallest adjusted p first);
/// failing tests are always all listed, and `report.json` has every row.
const PASSING_ROWS: usize = 5;

/// A table cell.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cell {
    /// Plain text.
    Text(String),
    /// Emphasised text (a failure).
    Strong(String),
}

/// One block of the document.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Block {
    /// A heading of level 1 or 2 with an anchor id.
    Heading(u8, String, String),
    /// A paragraph of plain text.
    Paragraph(String),
    /// A bulleted list.
    List(Vec<String>),
    /// A table: header, which columns are numeric (right-aligned), rows.
    Table(Vec<&'static str>, Vec<bool>, Vec<Vec<Cell>>),
    /// A suite's plot: file name and alternative text.
    Figure(String, String),
}

fn text(s: impl Into<String>) -> Cell {
    Cell::Text(s.into())
}

fn verdict(passed: bool, pass: &str, fail: &str) -> Cell {
    if passed {
        text(pass)
    } else {
        Cell::Strong(fail.into())
    }
}

fn test_row(r: &TestRow) -> Vec<Cell> {
    vec![
        text(&r.test),
        text(params_label(&r.params)),
        text(fmt_count(r.samples)),
        text(r.statistic.map_or_else(|| "∞".into(), fmt_stat)),
        text(fmt_p(r.p_value)),
        text(fmt_p(r.adjusted_p_value)),
        verdict(r.passed, "pass", "FAIL"),
    ]
}

fn epsilon_row(e: &EpsilonRow) -> Vec<Cell> {
    let ratio = if e.realised > 0.0 && e.realised.is_finite() {
        format!("{:.3}", e.lower_bound / e.realised)
    } else {
        "–".into()
    };
    vec![
        text(params_label(&e.params)),
        text(fmt_eps(e.claimed)),
        text(fmt_eps(e.realised)),
        text(format!("{:.4}", e.lower_bound)),
        text(ratio),
        text(e.event.as_ref().map_or_else(
            || "none certifies a positive bound".into(),
            |v| v.describe(),
        )),
        text(super::fmt_confidence(e.confidence)),
        verdict(e.passed(), "consistent", "VIOLATION"),
    ]
}

/// The document of `report`; `svg_names` maps each suite (same order as `report.suites`)
/// to the file name of its plot.
pub(crate) fn document(report: &Report, svg_names: &[String]) -> Vec<Block> {
    let mut doc = Vec::new();
    let verdict_word = if report.passed() { "PASS" } else { "FAIL" };
    doc.push(Block::Heading(
        1,
        format!("fl-audit report: {verdict_word}"),
        "top".into(),
    ));
    // What the verdict is worth: said with it, not in a footnote.
    doc.push(Block::Paragraph(format!(
        "{verdict_word} — {}.",
        report.detectable_sentence()
    )));
    let versions: Vec<String> = report
        .versions
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    doc.push(Block::List(vec![
        format!(
            "family-wise α = {} over {} tests and {} ε lower bounds (tests: Holm at {}; each ε bound at the confidence shown)",
            fmt_eps(report.alpha),
            fmt_count(report.results.len() as u64),
            fmt_count(report.epsilon.len() as u64),
            fmt_p(report.alpha_tests)
        ),
        if report.shards > 1 {
            format!(
                "seed = {}, drawn as {} shards (each shard's seeds derived from it; merged counts)",
                report.seed, report.shards
            )
        } else {
            format!("seed = {}", report.seed)
        },
        format!("samples drawn = {}", fmt_count(report.samples())),
        format!("versions: {}", versions.join(", ")),
    ]));
    doc.push(Block::Paragraph(
        "A test passes when its Holm-adjusted p-value exceeds the tests' share of α. An ε lower \
         bound is a violation when the certified bound exceeds the claimed ε; it is certified on \
         one pair of inputs and one event chosen from the exact law before sampling, and the \
         realised ε beside it is what the law allows at those inputs (below the claim when the \
         mechanism's analysis is loose). A pass means the data are consistent with the \
         mechanism's law at this sample size, not a proof; see the README for what each sample \
         size can detect. The plots show deviations: per cell the residual (observed − expected) \
         in standard errors, per KS test the empirical minus the expected CDF, each against the \
         red threshold of Holm's first step (a bar or curve beyond it fails at that level)."
            .into(),
    ));
    doc.push(Block::Heading(2, "Summary".into(), "summary".into()));
    let rows = report
        .suites
        .iter()
        .map(|s| {
            let v = report.suite_verdict(&s.name);
            vec![
                text(&s.name),
                text(&s.mechanism),
                text(s.points.to_string()),
                text(fmt_count(v.tests as u64)),
                text(v.failed.to_string()),
                text(v.min_adjusted_p.map_or("–".into(), fmt_p)),
                text(
                    v.max_epsilon_ratio
                        .map_or("–".into(), |r| format!("{r:.3}")),
                ),
                text(
                    v.max_realised_ratio
                        .map_or("–".into(), |r| format!("{r:.3}")),
                ),
                verdict(v.failed == 0, "pass", "FAIL"),
            ]
        })
        .collect();
    doc.push(Block::Table(
        vec![
            "suite",
            "mechanism",
            "points",
            "tests",
            "failed",
            "smallest adjusted p",
            "max ε̂_lb / claimed",
            "max ε̂_lb / realised",
            "verdict",
        ],
        vec![false, false, true, true, true, true, true, true, false],
        rows,
    ));
    for (i, s) in report.suites.iter().enumerate() {
        doc.push(Block::Heading(
            2,
            s.name.clone(),
            format!("suite-{}", s.name),
        ));
        if !s.description.is_empty() {
            doc.push(Block::Paragraph(s.description.clone()));
        }
        let per_input: Vec<String> = s.samples_per_input.iter().map(|&n| fmt_count(n)).collect();
        doc.push(Block::Paragraph(format!(
            "mechanism {}, suite seed {}, {} grid points, samples per input: {}, {} outputs drawn.",
            s.mechanism,
            s.seed,
            s.points,
            per_input.join(", "),
            fmt_count(s.samples_drawn)
        )));
        if !s.sample_size.is_empty() {
            doc.push(Block::Paragraph(format!(
                "Sample sizes: {}.",
                s.sample_size
            )));
        }
        if let Some(o) = &s.sampler_overrides {
            doc.push(Block::Paragraph(format!(
                "Deliberately mis-calibrated variant: the sampler runs with {} while the law keeps the suite's parameters.",
                params_label(o)
            )));
        }
        if let Some(d) = s.detectable {
            let planned: Vec<String> = s.planned_per_input.iter().map(|&n| fmt_count(n)).collect();
            doc.push(Block::Paragraph(format!(
                "Under-powered: the planner's sizes are {} per input; at the sizes drawn the smallest relative error in the keep/flip probabilities detected with power {} is {:.3} %.",
                planned.join(", "),
                report.plan_power,
                d * 100.0
            )));
        }
        if !s.notes.is_empty() {
            doc.push(Block::List(
                s.notes.iter().map(|n| format!("{n}.")).collect(),
            ));
        }
        if !s.coverage.is_empty() {
            doc.push(Block::Paragraph(
                "Input coverage (which branches of the mechanism the audit's inputs exercised):"
                    .into(),
            ));
            let rows = s
                .coverage
                .iter()
                .map(|c| {
                    let inputs = if c.branch.inputs.is_empty() {
                        Cell::Strong("none: not exercised".into())
                    } else {
                        text(c.branch.inputs.join(", "))
                    };
                    vec![
                        text(&c.branch.branch),
                        inputs,
                        text(if c.points.is_empty() {
                            "every point".to_string()
                        } else {
                            c.points.join("; ")
                        }),
                    ]
                })
                .collect();
            doc.push(Block::Table(
                vec!["branch", "inputs exercising it", "grid points"],
                vec![false, false, false],
                rows,
            ));
        }
        if let Some(name) = svg_names.get(i) {
            doc.push(Block::Figure(
                name.clone(),
                format!("{}: deviation from the expected law", s.name),
            ));
        }
        let mut rows: Vec<&TestRow> = report
            .results
            .iter()
            .filter(|r| r.suite == s.name)
            .collect();
        rows.sort_by(|a, b| a.adjusted_p_value.total_cmp(&b.adjusted_p_value));
        if !rows.is_empty() {
            let failing = rows.iter().filter(|r| !r.passed).count();
            doc.push(Block::Paragraph(format!(
                "{} tests, {failing} failed; showing every failure and the {PASSING_ROWS} smallest adjusted p-values (all rows in report.json).",
                fmt_count(rows.len() as u64)
            )));
            let mut shown_passing = 0;
            let table = rows
                .into_iter()
                .filter(|r| {
                    if r.passed {
                        shown_passing += 1;
                        shown_passing <= PASSING_ROWS
                    } else {
                        true
                    }
                })
                .map(test_row)
                .collect();
            doc.push(Block::Table(
                vec![
                    "test",
                    "parameters",
                    "samples",
                    "statistic",
                    "p",
                    "adjusted p",
                    "result",
                ],
                vec![false, false, true, true, true, true, false],
                table,
            ));
        }
        let eps: Vec<Vec<Cell>> = report
            .epsilon
            .iter()
            .filter(|e| e.suite == s.name)
            .map(epsilon_row)
            .collect();
        if !eps.is_empty() {
            doc.push(Block::Paragraph("Certified ε lower bounds:".into()));
            doc.push(Block::Table(
                vec![
                    "parameters",
                    "claimed ε",
                    "realised ε",
                    "ε̂_lb",
                    "ε̂_lb / realised",
                    "event (fixed before sampling, or learned on the fitting half)",
                    "confidence",
                    "verdict",
                ],
                vec![false, true, true, true, true, false, true, false],
                eps,
            ));
        }
    }
    doc
}
