//! The HTML report: one self-contained file (inline CSS, the SVG plots inlined, no external
//! references). Every number carries the step and key it came from as a tooltip.

use std::fmt::Write;

use super::data::Report;
use super::plots::Plot;
use super::tables::{self, Table};

pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:1400px;padding:0 1em;color:#222}
h1{margin-bottom:.2em}.meta{color:#555}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right;white-space:nowrap}
th{background:#f2f2f2;position:sticky;top:0;white-space:normal;max-width:7.5em;vertical-align:bottom}
.scroll{max-width:100%;overflow-x:auto}
details.notrun{margin:-1em 0 1.5em;font-size:13px;color:#555}
td:first-child,th:first-child{text-align:left}
td[data-key]{cursor:help;text-decoration:underline dotted #999}
tr:nth-child(even) td{background:#fafafa}
.empty{color:#777;font-style:italic}
figure{margin:1em 0 2em}figcaption{color:#555;font-size:13px}
svg{max-width:100%;height:auto}
code{font-size:12px}";

fn table(out: &mut String, t: &Table) {
    let _ = writeln!(out, "<section id=\"{}\">", t.id);
    let _ = writeln!(out, "<h2>{}</h2>", esc(&t.title));
    if !t.intro.is_empty() {
        let _ = writeln!(out, "<p>{}</p>", esc(&t.intro));
    }
    if t.rows.is_empty() {
        let _ = writeln!(out, "<p class=\"empty\">{}</p>\n</section>", esc(&t.empty));
        return;
    }
    // Workloads that never ran are one line under the table, not rows burying those that did.
    let not_run = |row: &Vec<super::tables::Cell>| {
        t.id == "workloads" && row.get(1).is_some_and(|c| c.text == "not run")
    };
    let idle: Vec<&str> = t
        .rows
        .iter()
        .filter(|r| not_run(r))
        .filter_map(|r| r.first().map(|c| c.text.as_str()))
        .collect();
    out.push_str("<div class=\"scroll\"><table>\n<thead><tr>");
    for c in &t.columns {
        let _ = write!(out, "<th>{}</th>", esc(c));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in t.rows.iter().filter(|r| !not_run(r)) {
        out.push_str("<tr>");
        for c in row {
            match (&c.step, &c.key) {
                (step, Some(key)) => {
                    let _ = write!(
                        out,
                        "<td data-key=\"{}\" title=\"{}&#10;key {}\">{}</td>",
                        esc(key),
                        esc(step.as_deref().unwrap_or("")),
                        esc(key),
                        esc(&c.text)
                    );
                }
                _ => {
                    let _ = write!(out, "<td>{}</td>", esc(&c.text));
                }
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table></div>\n");
    if !idle.is_empty() {
        let _ = writeln!(
            out,
            "<details class=\"notrun\"><summary>{} workload(s) not run</summary><p>{}</p></details>",
            idle.len(),
            esc(&idle.join(", "))
        );
    }
    out.push_str("</section>\n");
}

/// The SVG element of a plot, without any XML prologue, so it can sit inside HTML.
fn inline_svg(svg: &str) -> &str {
    svg.find("<svg").map_or(svg, |i| &svg[i..])
}

pub fn render(r: &Report, plots: &[Plot]) -> String {
    let mut out = String::new();
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    out.push_str("<title>jb report</title>\n");
    let _ = writeln!(out, "<style>\n{STYLE}\n</style>\n</head>\n<body>");
    out.push_str("<h1>jb report</h1>\n");
    let _ = writeln!(
        out,
        "<p class=\"meta\">{}</p>",
        esc(&super::markdown::summary_line(r))
    );
    out.push_str("<p class=\"meta\">Hover a number for the step and run-database key it came from; the Sources table lists them all.</p>\n");
    let all = tables::all(r);
    let (main, tail) = all.split_at(5.min(all.len()));
    for t in main {
        table(&mut out, t);
    }
    out.push_str("<section id=\"plots\">\n<h2>Plots</h2>\n");
    for p in plots {
        match &p.svg {
            Some(svg) => {
                let _ = writeln!(
                    out,
                    "<figure id=\"plot-{}\">\n{}\n<figcaption>{}</figcaption>\n</figure>",
                    p.id,
                    inline_svg(svg),
                    esc(&p.caption)
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "<p class=\"empty\"><b>{}</b>: {}</p>",
                    esc(&p.title),
                    esc(&p.empty)
                );
            }
        }
    }
    out.push_str("</section>\n");
    for t in tail {
        table(&mut out, t);
    }
    if !r.notes.is_empty() {
        out.push_str("<section id=\"notes\">\n<h2>Notes</h2>\n<ul>\n");
        for n in &r.notes {
            let _ = writeln!(out, "<li>{}</li>", esc(n));
        }
        out.push_str("</ul>\n</section>\n");
    }
    out.push_str("</body>\n</html>\n");
    out
}
