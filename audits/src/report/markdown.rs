//! `report.md`: the run for people.

use std::fmt::Write as _;

use super::{EpsilonRow, Report, TestRow, fmt_eps, fmt_p};
use crate::suite::params_label;

/// How many of a suite's passing tests `report.md` lists (smallest adjusted p first);
/// failing tests are always all listed, and `report.json` has every row.
const PASSING_ROWS: usize = 5;

fn test_line(out: &mut String, r: &TestRow) {
    let stat = r
        .statistic
        .map_or_else(|| "∞".into(), |s| format!("{s:.4}"));
    let _ = writeln!(
        out,
        "| {} | {} | {} | {} | {} | {} | {} |",
        r.test,
        params_label(&r.params),
        r.samples,
        stat,
        fmt_p(r.p_value),
        fmt_p(r.adjusted_p_value),
        if r.passed { "pass" } else { "**FAIL**" }
    );
}

fn eps_line(out: &mut String, e: &EpsilonRow) {
    let ratio = if e.realised > 0.0 && e.realised.is_finite() {
        format!("{:.3}", e.lower_bound / e.realised)
    } else {
        "–".into()
    };
    let _ = writeln!(
        out,
        "| {} | {} | {} | {:.4} | {ratio} | {} | {} | {} |",
        params_label(&e.params),
        fmt_eps(e.claimed),
        fmt_eps(e.realised),
        e.lower_bound,
        e.event.as_ref().map_or_else(
            || "none certifies a positive bound".into(),
            |v| v.describe()
        ),
        format_args!("1 − {}", fmt_p(1.0 - e.confidence)),
        if e.passed() {
            "consistent"
        } else {
            "**VIOLATION**"
        }
    );
}

/// Renders `report.md`. `svg_names` maps each suite (same order as `report.suites`) to the
/// file name of its plot.
#[must_use]
pub fn render_markdown(report: &Report, svg_names: &[String]) -> String {
    let mut out = String::new();
    let verdict = if report.passed() { "PASS" } else { "FAIL" };
    let _ = writeln!(out, "# fl-audit report: {verdict}\n");
    let _ = writeln!(
        out,
        "- family-wise α = {} over {} tests and {} ε lower bounds (tests: Holm at {}; each ε bound at the confidence shown)",
        report.alpha,
        report.results.len(),
        report.epsilon.len(),
        fmt_p(report.alpha_tests)
    );
    let _ = writeln!(out, "- seed = {}", report.seed);
    let _ = writeln!(out, "- samples drawn = {}", report.samples());
    let versions: Vec<String> = report
        .versions
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    let _ = writeln!(out, "- versions: {}", versions.join(", "));
    let _ = writeln!(
        out,
        "\nA test **passes** when its Holm-adjusted p-value exceeds the tests' share of α. An ε \
         lower bound is a **violation** when the certified bound exceeds the claimed ε; it is \
         certified on one pair of inputs and one event chosen from the exact law before \
         sampling, and the realised ε beside it is what the law allows at those inputs (below \
         the claim when the mechanism's analysis is loose). A pass \
         means the data are consistent with the mechanism's law at this sample size, not a \
         proof; see the README for what each sample size can detect.\n"
    );
    let _ = writeln!(out, "## Summary\n");
    let _ = writeln!(
        out,
        "| suite | mechanism | points | tests | failed | smallest adjusted p | max ε̂_lb / claimed | max ε̂_lb / realised | verdict |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---|");
    for s in &report.suites {
        let v = report.suite_verdict(&s.name);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            s.name,
            s.mechanism,
            s.points,
            v.tests,
            v.failed,
            v.min_adjusted_p.map_or("–".into(), fmt_p),
            v.max_epsilon_ratio
                .map_or("–".into(), |r| format!("{r:.3}")),
            v.max_realised_ratio
                .map_or("–".into(), |r| format!("{r:.3}")),
            if v.failed == 0 { "pass" } else { "**FAIL**" }
        );
    }
    for (i, s) in report.suites.iter().enumerate() {
        let _ = writeln!(out, "\n## {}\n", s.name);
        if !s.description.is_empty() {
            let _ = writeln!(out, "{}\n", s.description);
        }
        let _ = writeln!(
            out,
            "mechanism `{}`, suite seed {}, {} grid points, samples per input: {}, {} outputs drawn.",
            s.mechanism,
            s.seed,
            s.points,
            s.samples_per_input
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            s.samples_drawn
        );
        if !s.sample_size.is_empty() {
            let _ = writeln!(out, "\nSample sizes: {}.", s.sample_size);
        }
        if let Some(o) = &s.sampler_overrides {
            let _ = writeln!(
                out,
                "\n**Deliberately mis-calibrated variant**: the sampler runs with {} while the law keeps the suite's parameters.",
                params_label(o)
            );
        }
        for note in &s.notes {
            let _ = writeln!(out, "\n- {note}.");
        }
        if let Some(name) = svg_names.get(i) {
            let _ = writeln!(out, "\n![{} empirical vs expected]({name})", s.name);
        }
        let mut rows: Vec<&TestRow> = report
            .results
            .iter()
            .filter(|r| r.suite == s.name)
            .collect();
        rows.sort_by(|a, b| a.adjusted_p_value.total_cmp(&b.adjusted_p_value));
        if !rows.is_empty() {
            let failing = rows.iter().filter(|r| !r.passed).count();
            let _ = writeln!(
                out,
                "\n{} tests, {failing} failed; showing every failure and the {PASSING_ROWS} smallest adjusted p-values (all rows in report.json).\n",
                rows.len()
            );
            let _ = writeln!(
                out,
                "| test | parameters | samples | statistic | p | adjusted p | result |"
            );
            let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---|");
            let mut shown_passing = 0;
            for r in rows {
                if r.passed {
                    if shown_passing >= PASSING_ROWS {
                        continue;
                    }
                    shown_passing += 1;
                }
                test_line(&mut out, r);
            }
        }
        let eps: Vec<&EpsilonRow> = report
            .epsilon
            .iter()
            .filter(|e| e.suite == s.name)
            .collect();
        if !eps.is_empty() {
            let _ = writeln!(out, "\nCertified ε lower bounds:\n");
            let _ = writeln!(
                out,
                "| parameters | claimed ε | realised ε | ε̂_lb | ε̂_lb / realised | event (fixed before sampling) | confidence | verdict |"
            );
            let _ = writeln!(out, "|---|---:|---:|---:|---:|---|---:|---|");
            for e in eps {
                eps_line(&mut out, e);
            }
        }
    }
    out
}
