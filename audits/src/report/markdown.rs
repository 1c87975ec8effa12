//! `report.md`: the report's document as Markdown.

use std::fmt::Write as _;

use super::{
    Report,
    document::{Block, Cell, document},
};

fn cell(c: &Cell) -> String {
    // A table cell cannot hold a pipe.
    match c {
        Cell::Text(s) => s.replace('|', "\\|"),
        Cell::Strong(s) => format!("**{}**", s.replace('|', "\\|")),
    }
}

/// Renders `report.md`. `svg_names` maps each suite (same order as `report.suites`) to the
/// file name of its plot.
#[must_use]
pub fn render_markdown(report: &Report, svg_names: &[String]) -> String {
    let mut out = String::new();
    for block in document(report, svg_names) {
        match block {
            Block::Heading(level, title, _) => {
                let _ = writeln!(out, "{} {title}\n", "#".repeat(usize::from(level)));
            }
            Block::Paragraph(p) => {
                let _ = writeln!(out, "{p}\n");
            }
            Block::List(items) => {
                for i in items {
                    let _ = writeln!(out, "- {i}");
                }
                out.push('\n');
            }
            Block::Table(header, numeric, rows) => {
                let _ = writeln!(out, "| {} |", header.join(" | "));
                let rule: Vec<&str> = numeric
                    .iter()
                    .map(|&n| if n { "---:" } else { "---" })
                    .collect();
                let _ = writeln!(out, "|{}|", rule.join("|"));
                for r in rows {
                    let cells: Vec<String> = r.iter().map(cell).collect();
                    let _ = writeln!(out, "| {} |", cells.join(" | "));
                }
                out.push('\n');
            }
            Block::Figure(file, alt) => {
                let _ = writeln!(out, "![{alt}]({file})\n");
            }
        }
    }
    out
}
