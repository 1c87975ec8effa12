//! One SVG per suite: small multiples that show **deviation**, not two curves on top of
//! each other. A finite law's panel draws, per cell, the residual
//! (observed − expected)/standard error with the test threshold ±z* drawn in red; a CDF
//! panel draws the empirical minus the expected CDF with the simultaneous
//! Kolmogorov–Smirnov band ±d* in red. z* and d* are at α_each, Holm's first-step level
//! (the tests' share of α over the number of tests): a bar or curve beyond the red line is
//! a failure at that level. Written directly as text: the plots are simple enough that a
//! plotting crate would add weight without adding anything.

use std::fmt::Write as _;

use super::{Panel, PanelData, SuiteSummary};

const PANEL_W: f64 = 320.0;
const PANEL_H: f64 = 200.0;
const COLUMNS: usize = 3;
const MARGIN_L: f64 = 44.0;
const MARGIN_R: f64 = 10.0;
const MARGIN_T: f64 = 26.0;
const MARGIN_B: f64 = 28.0;
/// At most this many panels per plot (the rest are named in a footnote).
pub(crate) const MAX_PANELS: usize = 36;
/// At most this many bars per panel (larger laws are shown on their most likely outputs).
const MAX_BARS: usize = 64;
/// Characters of a panel title that fit in a panel at the title's font size.
const TITLE_CHARS: usize = 54;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn f(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2}")
    } else {
        "0".into()
    }
}

fn short(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else if x.abs() >= 0.01 && x.abs() < 1000.0 {
        format!("{x:.3}")
    } else {
        format!("{x:.1e}")
    }
}

/// The largest x in (lo, hi) with `tail(x) > target`, by bisection (`tail` decreasing).
fn solve_tail(tail: impl Fn(f64) -> f64, target: f64, lo: f64, hi: f64) -> f64 {
    let (mut lo, mut hi) = (lo, hi);
    // 64 halvings of an interval of length ≤ 40 reach f64 resolution.
    for _ in 0..64 {
        let mid = 0.5 * (lo + hi);
        if tail(mid) > target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// z* with P(|Z| ≥ z*) = `alpha_each`: the residual a single test rejects at that level.
#[must_use]
pub(crate) fn z_threshold(alpha_each: f64) -> f64 {
    solve_tail(
        |z| 2.0 * fl_stats::normal_sf(z).unwrap_or(0.0),
        alpha_each,
        0.0,
        40.0,
    )
}

thread_local! {
    /// d* per (n, α_each): a suite's KS panels share n, and each tail evaluation sums up
    /// to n terms for n ≤ 10⁶, so the band is solved once per plot.
    static KS_BANDS: std::cell::RefCell<std::collections::HashMap<(u64, u64), f64>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// d* with P(Dₙ ≥ d*) = `alpha_each`: the simultaneous band of an n-sample KS test.
#[must_use]
pub(crate) fn ks_threshold(n: u64, alpha_each: f64) -> f64 {
    let key = (n, alpha_each.to_bits());
    if let Some(d) = KS_BANDS.with(|m| m.borrow().get(&key).copied()) {
        return d;
    }
    let d = solve_tail(
        |d| fl_stats::kolmogorov_smirnov_sf(n.max(1), d).unwrap_or(0.0),
        alpha_each,
        0.0,
        1.0,
    );
    KS_BANDS.with(|m| m.borrow_mut().insert(key, d));
    d
}

/// Draws a symmetric deviation axis: the frame, the zero line and the red threshold lines
/// at ±`threshold`, for values within ±`range`; returns the y of a value.
fn deviation_axes(
    out: &mut String,
    x0: f64,
    y0: f64,
    range: f64,
    threshold: f64,
) -> impl Fn(f64) -> f64 + use<> {
    let h = PANEL_H - MARGIN_T - MARGIN_B;
    let mid = y0 + MARGIN_T + h / 2.0;
    let py = move |v: f64| mid - (h / 2.0) * (v / range).clamp(-1.0, 1.0);
    let (left, right) = (x0 + MARGIN_L, x0 + PANEL_W - MARGIN_R);
    let hline = |out: &mut String, y: f64, class: &str| {
        let _ = writeln!(
            out,
            r#"<line x1="{}" x2="{}" y1="{y}" y2="{y}" class="{class}"/>"#,
            f(left),
            f(right),
            y = f(y),
        );
    };
    hline(out, mid, "zero");
    for sign in [1.0, -1.0] {
        hline(out, py(sign * threshold), "limit");
    }
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" class="axis" text-anchor="end">+{}</text><text x="{}" y="{}" class="axis" text-anchor="end">−{}</text>"#,
        f(x0 + MARGIN_L - 4.0),
        f(py(threshold) + 3.0),
        short(threshold),
        f(x0 + MARGIN_L - 4.0),
        f(py(-threshold) + 3.0),
        short(threshold)
    );
    py
}

/// The bars of a finite law: (observed − expected)/standard error per cell.
fn bars(out: &mut String, x0: f64, y0: f64, data: &PanelData, z_star: f64) {
    let PanelData::Bars {
        labels,
        expected,
        observed,
        samples,
        standard_errors,
    } = data
    else {
        return;
    };
    let w = PANEL_W - MARGIN_L - MARGIN_R;
    let n = (*samples).max(1) as f64;
    let cells = expected.len().min(observed.len());
    let residual = |i: usize| {
        let se = match standard_errors {
            Some(se) => se.get(i).copied().unwrap_or(0.0),
            None => (expected[i] * (1.0 - expected[i]) / n).sqrt(),
        };
        let d = observed[i] - expected[i];
        if se > 0.0 {
            d / se
        } else if d == 0.0 {
            0.0
        } else {
            // An output the law makes impossible (or certain) was (not) seen.
            f64::INFINITY.copysign(d)
        }
    };
    // Show the most likely outputs when there are too many, keeping their order.
    let mut idx: Vec<usize> = (0..cells).collect();
    if idx.len() > MAX_BARS {
        idx.sort_by(|&a, &b| expected[b].total_cmp(&expected[a]));
        idx.truncate(MAX_BARS);
        idx.sort_unstable();
    }
    let largest = idx
        .iter()
        .map(|&i| residual(i).abs())
        .filter(|z| z.is_finite())
        .fold(0.0f64, f64::max);
    let range = largest.max(1.25 * z_star).max(1.0);
    let py = deviation_axes(out, x0, y0, range, z_star);
    let slot = w / idx.len().max(1) as f64;
    for (j, &i) in idx.iter().enumerate() {
        let z = residual(i);
        let bx = x0 + MARGIN_L + j as f64 * slot;
        let (top, bottom) = (py(z.max(0.0)), py(z.min(0.0)));
        let class = if z.abs() > z_star { "bad" } else { "obs" };
        let _ = writeln!(
            out,
            r#"<rect x="{}" y="{}" width="{}" height="{}" class="{class}"><title>{}: observed {} expected {} residual {} SE</title></rect>"#,
            f(bx + slot * 0.15),
            f(top),
            f((slot * 0.7).max(0.5)),
            f((bottom - top).max(0.5)),
            esc(labels.get(i).map_or("", String::as_str)),
            short(observed[i]),
            short(expected[i]),
            if z.is_finite() {
                format!("{z:.2}")
            } else {
                "∞".into()
            }
        );
        if idx.len() <= 16 {
            let _ = writeln!(
                out,
                r#"<text x="{}" y="{}" class="axis" text-anchor="middle">{}</text>"#,
                f(bx + slot / 2.0),
                f(y0 + PANEL_H - MARGIN_B + 12.0),
                esc(labels.get(i).map_or("", String::as_str))
            );
        }
    }
}

/// A CDF panel: empirical − expected CDF against x, with the band ±d*.
fn cdf(out: &mut String, x0: f64, y0: f64, data: &PanelData, alpha_each: f64) {
    let PanelData::Cdf {
        xs,
        expected,
        empirical,
        samples,
    } = data
    else {
        return;
    };
    let w = PANEL_W - MARGIN_L - MARGIN_R;
    let d_star = ks_threshold(*samples, alpha_each);
    let diff: Vec<f64> = empirical.iter().zip(expected).map(|(e, x)| e - x).collect();
    let largest = diff.iter().map(|d| d.abs()).fold(0.0f64, f64::max);
    let range = largest.max(1.25 * d_star).max(1e-12);
    let py = deviation_axes(out, x0, y0, range, d_star);
    let lo = xs.first().copied().unwrap_or(0.0);
    let hi = xs.last().copied().unwrap_or(1.0);
    let span = if hi > lo { hi - lo } else { 1.0 };
    let px = |x: f64| x0 + MARGIN_L + w * (x - lo) / span;
    let pts: Vec<String> = xs
        .iter()
        .zip(&diff)
        .map(|(&x, &d)| format!("{},{}", f(px(x)), f(py(d))))
        .collect();
    let class = if largest > d_star {
        "badline"
    } else {
        "obsline"
    };
    let _ = writeln!(
        out,
        r#"<polyline points="{}" class="{class}"><title>largest |empirical − expected| = {} (band {})</title></polyline>"#,
        pts.join(" "),
        short(largest),
        short(d_star)
    );
    let base = y0 + PANEL_H - MARGIN_B;
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" class="axis">{}</text><text x="{}" y="{}" class="axis" text-anchor="end">{}</text>"#,
        f(x0 + MARGIN_L),
        f(base + 12.0),
        short(lo),
        f(x0 + MARGIN_L + w),
        f(base + 12.0),
        short(hi)
    );
}

fn panel(out: &mut String, x0: f64, y0: f64, p: &Panel, alpha_each: f64) {
    let h = PANEL_H - MARGIN_T - MARGIN_B;
    // A title longer than the panel is cut with an ellipsis (the whole title is the
    // element's tooltip), so that neighbouring panels' titles do not overlap.
    let shown: String = if p.title.chars().count() > TITLE_CHARS {
        p.title
            .chars()
            .take(TITLE_CHARS - 1)
            .chain(std::iter::once('…'))
            .collect()
    } else {
        p.title.clone()
    };
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" class="title"><title>{}</title>{}</text>"#,
        f(x0 + 6.0),
        f(y0 + 16.0),
        esc(&p.title),
        esc(&shown)
    );
    let _ = writeln!(
        out,
        r#"<line x1="{a}" x2="{a}" y1="{b}" y2="{c}" class="frame"/><line x1="{a}" x2="{d}" y1="{c}" y2="{c}" class="frame"/>"#,
        a = f(x0 + MARGIN_L),
        b = f(y0 + MARGIN_T),
        c = f(y0 + MARGIN_T + h),
        d = f(x0 + PANEL_W - MARGIN_R)
    );
    match &p.data {
        PanelData::Bars { .. } => bars(out, x0, y0, &p.data, z_threshold(alpha_each)),
        PanelData::Cdf { .. } => cdf(out, x0, y0, &p.data, alpha_each),
    }
}

/// Renders a suite's plot; `alpha_each` is the level of the threshold lines (Holm's first
/// step: the tests' share of α over the number of tests).
#[must_use]
pub fn render_svg(suite: &SuiteSummary, alpha_each: f64) -> String {
    let shown = suite.panels.len().min(MAX_PANELS);
    let rows = shown.div_ceil(COLUMNS).max(1);
    let width = PANEL_W * COLUMNS as f64;
    let height = PANEL_H * rows as f64 + 60.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif">"#,
        w = f(width),
        h = f(height)
    );
    let _ = writeln!(
        out,
        "<style>.title{{font-size:11px}}.axis{{font-size:9px;fill:#444}}.obs{{fill:#4a7fd4}}\
         .bad{{fill:#d62728}}.zero{{stroke:#000;stroke-width:1}}\
         .limit{{stroke:#d62728;stroke-width:1;stroke-dasharray:4 2}}.frame{{stroke:#888;stroke-width:1}}\
         .obsline{{fill:none;stroke:#4a7fd4;stroke-width:1.5}}.badline{{fill:none;stroke:#d62728;stroke-width:1.5}}</style>"
    );
    let _ = writeln!(
        out,
        r#"<rect width="100%" height="100%" fill="white"/><text x="8" y="20" font-size="13">{}: {} — bars: (observed − expected)/standard error; curves: empirical − expected CDF; red dashed: the level-{} threshold (Holm's first step)</text>"#,
        esc(&suite.name),
        esc(&suite.mechanism),
        super::fmt_p(alpha_each)
    );
    for (i, p) in suite.panels.iter().take(shown).enumerate() {
        let x0 = (i % COLUMNS) as f64 * PANEL_W;
        let y0 = 30.0 + (i / COLUMNS) as f64 * PANEL_H;
        panel(&mut out, x0, y0, p, alpha_each);
    }
    if suite.panels.len() > shown {
        let _ = writeln!(
            out,
            r#"<text x="8" y="{}" font-size="11">{} more panels not drawn; every test is in report.json</text>"#,
            f(height - 10.0),
            suite.panels.len() - shown
        );
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_invert_the_tails() {
        let z = z_threshold(0.05);
        assert!((z - 1.959_963_984_540_054).abs() < 1e-9, "{z}");
        let d = ks_threshold(1000, 1e-3);
        let p = fl_stats::kolmogorov_smirnov_sf(1000, d).unwrap();
        assert!((p - 1e-3).abs() < 1e-9, "{d} {p}");
    }

    #[test]
    fn renders_deviations_and_marks_what_crosses_the_threshold() {
        let s = SuiteSummary {
            name: "a<b".into(),
            description: String::new(),
            mechanism: "m".into(),
            seed: 1,
            points: 1,
            samples_per_input: vec![10_000],
            samples_drawn: 10_000,
            sampler_overrides: None,
            sample_size: String::new(),
            coverage: Vec::new(),
            planned_per_input: vec![10_000],
            detectable: None,
            panels: vec![
                Panel {
                    title: "bars".into(),
                    data: PanelData::Bars {
                        labels: vec!["0".into(), "1".into(), "2".into()],
                        expected: vec![0.3, 0.5, 0.2],
                        // Cell 0 is 0.05 off: 10.9 standard errors at n = 10 000.
                        observed: vec![0.35, 0.45, 0.2],
                        samples: 10_000,
                        standard_errors: None,
                    },
                },
                Panel {
                    title: "cdf".into(),
                    data: PanelData::Cdf {
                        xs: vec![-1.0, 0.0, 1.0],
                        expected: vec![0.1, 0.5, 0.9],
                        empirical: vec![0.1005, 0.5, 0.8995],
                        samples: 10_000,
                    },
                },
            ],
            notes: Vec::new(),
            seconds: 0.0,
        };
        let svg = render_svg(&s, 1e-3);
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("a&lt;b"));
        // Cells 0 and 1 cross ±z*, cell 2 does not; the CDF stays inside its band.
        assert_eq!(svg.matches("class=\"bad\"").count(), 2);
        assert_eq!(svg.matches("class=\"obs\"").count(), 1);
        assert_eq!(svg.matches("class=\"obsline\"").count(), 1);
        assert_eq!(svg.matches("class=\"limit\"").count(), 4);
    }
}
