//! The Markdown report: the tables, with the plots linked from `plots/`.

use std::fmt::Write;

use super::data::Report;
use super::plots::Plot;
use super::tables::{self, Table};

fn esc(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

pub fn table(out: &mut String, t: &Table) {
    let _ = writeln!(out, "## {}\n", t.title);
    if !t.intro.is_empty() {
        let _ = writeln!(out, "{}\n", t.intro);
    }
    if t.rows.is_empty() {
        let _ = writeln!(out, "_{}_\n", t.empty);
        return;
    }
    let _ = writeln!(
        out,
        "| {} |",
        t.columns
            .iter()
            .map(|c| esc(c))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = writeln!(
        out,
        "|{}",
        t.columns.iter().map(|_| "---|").collect::<String>()
    );
    for row in &t.rows {
        let _ = writeln!(
            out,
            "| {} |",
            row.iter()
                .map(|c| esc(&c.text))
                .collect::<Vec<_>>()
                .join(" | ")
        );
    }
    out.push('\n');
}

/// `plots_dir`: where the SVGs are, relative to the Markdown file.
pub fn render(r: &Report, plots: &[Plot], plots_dir: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# jb report\n");
    let _ = writeln!(out, "{}\n", summary_line(r));
    let all = tables::all(r);
    let (main, tail) = all.split_at(5.min(all.len()));
    for t in main {
        table(&mut out, t);
    }
    let _ = writeln!(out, "## Plots\n");
    for p in plots {
        match &p.svg {
            Some(_) => {
                let _ = writeln!(
                    out,
                    "![{}]({}/{}.svg)\n\n{}\n",
                    p.title, plots_dir, p.id, p.caption
                );
            }
            None => {
                let _ = writeln!(out, "**{}**: _{}_\n", p.title, p.empty);
            }
        }
    }
    for t in tail {
        table(&mut out, t);
    }
    if !r.notes.is_empty() {
        let _ = writeln!(out, "## Notes\n");
        for n in &r.notes {
            let _ = writeln!(out, "- {n}");
        }
        out.push('\n');
    }
    out
}

/// One line: version, scale, device and counts.
pub fn summary_line(r: &Report) -> String {
    let device = r
        .environments
        .first()
        .and_then(|e| e.fingerprint.get("device_kind"))
        .map(String::as_str)
        .unwrap_or("unknown device");
    let backend = r
        .environments
        .first()
        .and_then(|e| e.fingerprint.get("backend"))
        .map(String::as_str)
        .unwrap_or("unknown backend");
    let ok = r.workloads.iter().filter(|w| w.status == "ok").count();
    format!(
        "jb {} · {} ({}) · scale {} · {} workloads, {} with an XLA time · {} method(s) · {} records cited",
        r.jb_version,
        device,
        backend,
        if r.scales.is_empty() {
            "unknown".to_string()
        } else {
            r.scales.join(", ")
        },
        r.workloads.len(),
        ok,
        r.methods.len(),
        r.sources.len()
    )
}
