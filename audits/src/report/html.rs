//! `report.html`: the report's document as one self-contained XHTML page — the plots are
//! inline SVG, the style is inline, nothing is loaded from anywhere (open it offline, mail
//! it, attach it to an audit). Well-formed XML, so any XML parser reads it.

use std::fmt::Write as _;

use super::{
    Report,
    document::{Block, Cell, document},
};

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const STYLE: &str = "body{font-family:sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;\
color:#222}table{border-collapse:collapse;margin:1em 0;font-size:13px}th,td{border:1px solid #ccc;\
padding:3px 6px;text-align:left}td.num{text-align:right}strong{color:#c00}.verdict-pass{color:#070}\
.verdict-fail{color:#c00}figure{margin:1em 0;overflow-x:auto}figcaption{font-size:12px;color:#555}";

/// Renders `report.html`: `svgs` holds each suite's plot as (file name, SVG text), in
/// `report.suites` order; each is inlined where `report.md` links it.
#[must_use]
pub fn render_html(report: &Report, svgs: &[(String, String)]) -> String {
    let names: Vec<String> = svgs.iter().map(|(n, _)| n.clone()).collect();
    let verdict = if report.passed() { "pass" } else { "fail" };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n\
         <meta charset=\"utf-8\"/>\n<title>fl-audit report: {}</title>\n<style>{STYLE}</style>\n\
         </head>\n<body class=\"verdict-{verdict}\">",
        verdict.to_uppercase()
    );
    for block in document(report, &names) {
        match block {
            Block::Heading(level, title, id) => {
                let class = match (level, title.ends_with("PASS")) {
                    (1, true) => " class=\"verdict-pass\"",
                    (1, false) => " class=\"verdict-fail\"",
                    _ => "",
                };
                let _ = writeln!(
                    out,
                    "<h{level} id=\"{}\"{class}>{}</h{level}>",
                    esc(&id),
                    esc(&title)
                );
            }
            Block::Paragraph(p) => {
                let _ = writeln!(out, "<p>{}</p>", esc(&p));
            }
            Block::List(items) => {
                out.push_str("<ul>\n");
                for i in items {
                    let _ = writeln!(out, "<li>{}</li>", esc(&i));
                }
                out.push_str("</ul>\n");
            }
            Block::Table(header, numeric, rows) => {
                out.push_str("<table>\n<thead><tr>");
                for h in &header {
                    let _ = write!(out, "<th>{}</th>", esc(h));
                }
                out.push_str("</tr></thead>\n<tbody>\n");
                for r in rows {
                    out.push_str("<tr>");
                    for (c, &n) in r
                        .iter()
                        .zip(numeric.iter().chain(std::iter::repeat(&false)))
                    {
                        let class = if n { " class=\"num\"" } else { "" };
                        match c {
                            Cell::Text(s) => {
                                let _ = write!(out, "<td{class}>{}</td>", esc(s));
                            }
                            Cell::Strong(s) => {
                                let _ = write!(out, "<td{class}><strong>{}</strong></td>", esc(s));
                            }
                        }
                    }
                    out.push_str("</tr>\n");
                }
                out.push_str("</tbody>\n</table>\n");
            }
            Block::Figure(file, alt) => {
                if let Some((_, svg)) = svgs.iter().find(|(n, _)| *n == file) {
                    let _ = writeln!(
                        out,
                        "<figure>\n{}<figcaption>{}</figcaption>\n</figure>",
                        svg,
                        esc(&alt)
                    );
                }
            }
        }
    }
    out.push_str("</body>\n</html>\n");
    out
}
