//! One SVG per suite: small multiples of empirical (blue) against expected (black) law.
//! Written directly as text: the plots are simple enough that a plotting crate would add
//! weight without adding anything.

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

fn bars(out: &mut String, x0: f64, y0: f64, labels: &[String], expected: &[f64], observed: &[f64]) {
    let w = PANEL_W - MARGIN_L - MARGIN_R;
    let h = PANEL_H - MARGIN_T - MARGIN_B;
    // Show the most likely outputs when there are too many, keeping their order.
    let mut idx: Vec<usize> = (0..expected.len().min(observed.len())).collect();
    if idx.len() > MAX_BARS {
        idx.sort_by(|&a, &b| expected[b].total_cmp(&expected[a]));
        idx.truncate(MAX_BARS);
        idx.sort_unstable();
    }
    let top = idx
        .iter()
        .map(|&i| expected[i].max(observed[i]))
        .fold(0.0f64, f64::max)
        .max(1e-300);
    let n = idx.len().max(1) as f64;
    let slot = w / n;
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" class="axis" text-anchor="end">{}</text>"#,
        f(x0 + MARGIN_L - 4.0),
        f(y0 + MARGIN_T + 8.0),
        short(top)
    );
    for (j, &i) in idx.iter().enumerate() {
        let bx = x0 + MARGIN_L + j as f64 * slot;
        let oh = h * observed[i] / top;
        let eh = h * expected[i] / top;
        let base = y0 + MARGIN_T + h;
        let _ = writeln!(
            out,
            r#"<rect x="{}" y="{}" width="{}" height="{}" class="obs"><title>{}: observed {} expected {}</title></rect>"#,
            f(bx + slot * 0.15),
            f(base - oh),
            f((slot * 0.7).max(0.5)),
            f(oh),
            esc(labels.get(i).map_or("", String::as_str)),
            short(observed[i]),
            short(expected[i])
        );
        let _ = writeln!(
            out,
            r#"<line x1="{}" x2="{}" y1="{}" y2="{}" class="exp"/>"#,
            f(bx),
            f(bx + slot),
            f(base - eh),
            f(base - eh)
        );
        if idx.len() <= 16 {
            let _ = writeln!(
                out,
                r#"<text x="{}" y="{}" class="axis" text-anchor="middle">{}</text>"#,
                f(bx + slot / 2.0),
                f(base + 12.0),
                esc(labels.get(i).map_or("", String::as_str))
            );
        }
    }
}

fn cdf(out: &mut String, x0: f64, y0: f64, xs: &[f64], expected: &[f64], empirical: &[f64]) {
    let w = PANEL_W - MARGIN_L - MARGIN_R;
    let h = PANEL_H - MARGIN_T - MARGIN_B;
    let lo = xs.first().copied().unwrap_or(0.0);
    let hi = xs.last().copied().unwrap_or(1.0);
    let span = if hi > lo { hi - lo } else { 1.0 };
    let px = |x: f64| x0 + MARGIN_L + w * (x - lo) / span;
    let py = |y: f64| y0 + MARGIN_T + h * (1.0 - y.clamp(0.0, 1.0));
    for (ys, class) in [(expected, "expline"), (empirical, "obsline")] {
        let pts: Vec<String> = xs
            .iter()
            .zip(ys)
            .map(|(&x, &y)| format!("{},{}", f(px(x)), f(py(y))))
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline points="{}" class="{class}"/>"#,
            pts.join(" ")
        );
    }
    let base = y0 + MARGIN_T + h;
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
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" class="axis" text-anchor="end">1</text>"#,
        f(x0 + MARGIN_L - 4.0),
        f(y0 + MARGIN_T + 8.0)
    );
}

fn panel(out: &mut String, x0: f64, y0: f64, p: &Panel) {
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
        PanelData::Bars {
            labels,
            expected,
            observed,
        } => bars(out, x0, y0, labels, expected, observed),
        PanelData::Cdf {
            xs,
            expected,
            empirical,
        } => cdf(out, x0, y0, xs, expected, empirical),
    }
}

/// Renders a suite's plot.
#[must_use]
pub fn render_svg(suite: &SuiteSummary) -> String {
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
         .exp{{stroke:#000;stroke-width:1.5}}.frame{{stroke:#888;stroke-width:1}}\
         .obsline{{fill:none;stroke:#4a7fd4;stroke-width:2}}.expline{{fill:none;stroke:#000;stroke-width:1;stroke-dasharray:4 2}}</style>"
    );
    let _ = writeln!(
        out,
        r#"<rect width="100%" height="100%" fill="white"/><text x="8" y="20" font-size="14">{}: {} (blue: empirical, black: expected law)</text>"#,
        esc(&suite.name),
        esc(&suite.mechanism)
    );
    for (i, p) in suite.panels.iter().take(shown).enumerate() {
        let x0 = (i % COLUMNS) as f64 * PANEL_W;
        let y0 = 30.0 + (i / COLUMNS) as f64 * PANEL_H;
        panel(&mut out, x0, y0, p);
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
    fn renders_both_kinds_and_escapes() {
        let s = SuiteSummary {
            name: "a<b".into(),
            description: String::new(),
            mechanism: "m".into(),
            seed: 1,
            points: 1,
            samples_per_input: vec![10],
            samples_drawn: 10,
            sampler_overrides: None,
            sample_size: String::new(),
            panels: vec![
                Panel {
                    title: "bars".into(),
                    data: PanelData::Bars {
                        labels: vec!["0".into(), "1".into()],
                        expected: vec![0.3, 0.7],
                        observed: vec![0.31, 0.69],
                    },
                },
                Panel {
                    title: "cdf".into(),
                    data: PanelData::Cdf {
                        xs: vec![-1.0, 0.0, 1.0],
                        expected: vec![0.1, 0.5, 0.9],
                        empirical: vec![0.12, 0.5, 0.88],
                    },
                },
            ],
            notes: Vec::new(),
            seconds: 0.0,
        };
        let svg = render_svg(&s);
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("a&lt;b"));
        assert!(svg.contains("<polyline"));
        assert_eq!(svg.matches("class=\"obs\"").count(), 2);
    }
}
