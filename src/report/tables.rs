//! The report's tables, as rows of cells that keep the record each number came from; the
//! Markdown, HTML and CSV renderers all draw from these.

use serde::Serialize;

use super::data::{Report, Timing};

#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// As shown.
    pub text: String,
    /// Full precision, for CSV (None: the text is the value).
    pub raw: Option<String>,
    /// The step and run-database key the number came from.
    pub step: Option<String>,
    pub key: Option<String>,
}

impl Cell {
    pub fn text(t: impl Into<String>) -> Cell {
        Cell {
            text: t.into(),
            raw: None,
            step: None,
            key: None,
        }
    }

    fn num(text: String, raw: f64) -> Cell {
        Cell {
            text,
            raw: Some(raw.to_string()),
            step: None,
            key: None,
        }
    }

    fn from(mut self, step: Option<&str>, key: Option<&str>) -> Cell {
        self.step = step.filter(|s| !s.is_empty()).map(str::to_string);
        self.key = key.filter(|s| !s.is_empty()).map(str::to_string);
        self
    }

    /// The value for CSV: full precision, and empty where there is none.
    pub fn csv_value(&self) -> &str {
        match self.raw.as_deref() {
            Some(raw) => raw,
            None if self.text == DASH => "",
            None => &self.text,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Table {
    /// File-name-safe identifier (`workloads`, `methods`, ...).
    pub id: &'static str,
    pub title: String,
    pub intro: String,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
    /// Shown instead of the table when it has no rows.
    pub empty: String,
}

/// `x` with `digits` significant digits, without exponent notation for everyday magnitudes.
pub fn sig(x: f64, digits: usize) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    if x == 0.0 {
        return "0".into();
    }
    let mag = x.abs().log10().floor() as i64;
    if !(-6..15).contains(&mag) {
        return format!("{:.*e}", digits.saturating_sub(1), x);
    }
    let decimals = (digits as i64 - 1 - mag).max(0) as usize;
    format!("{x:.decimals$}")
}

pub const DASH: &str = "–";

/// Markers of numbers that did not come from judging an exported program.
pub const SANDBOXED_MARK: &str = " §";
pub const UNSANDBOXED_MARK: &str = " ‼";
pub const SANDBOXED_NOTE: &str = "§ judged in the candidate's own (sandboxed) process: it could not be exported; its verdict was rechecked from its outputs, but a time measured where its code ran is not counted: no time and no speedup";
pub const UNSANDBOXED_NOTE: &str = "‼ the candidate ran without the sandbox (`--no-sandbox`): its numbers are not protected against tampering, so no time and no speedup is counted";

/// The marker of a number's trust level (empty for `artifact`, `trusted` and unknown).
pub fn trust_mark(trust: Option<&str>) -> &'static str {
    match trust {
        Some("sandboxed") => SANDBOXED_MARK,
        Some("unsandboxed") => UNSANDBOXED_MARK,
        _ => "",
    }
}

pub fn ms_cell(t: Option<&Timing>) -> Cell {
    match t {
        Some(t) => match t.ok_ms() {
            Some(ms) => Cell::num(
                format!(
                    "{}{}{}",
                    sig(ms, 4),
                    if t.interpret { " †" } else { "" },
                    trust_mark(t.trust.as_deref())
                ),
                ms,
            ),
            None => Cell::text(t.status.clone()),
        }
        .from(Some(&t.step), Some(&t.key)),
        None => Cell::text(DASH),
    }
}

pub fn speedup_text(s: f64) -> String {
    format!("{}x", sig(s, 3))
}

fn speedup_cell(s: Option<f64>) -> Cell {
    match s {
        Some(s) => Cell::num(speedup_text(s), s),
        None => Cell::text(DASH),
    }
}

/// A speedup with its 95 % interval where it has one: `1.23x [1.20, 1.26]` (CSV: the point).
pub fn speedup_ci_text(s: f64, ci: Option<(f64, f64)>) -> String {
    match ci {
        Some((lo, hi)) => format!("{} [{}, {}]", speedup_text(s), sig(lo, 3), sig(hi, 3)),
        None => speedup_text(s),
    }
}

fn speedup_ci_cell(s: Option<f64>, ci: Option<(f64, f64)>) -> Cell {
    match s {
        Some(s) => Cell::num(speedup_ci_text(s, ci), s),
        None => Cell::text(DASH),
    }
}

fn pct_cell(f: Option<f64>) -> Cell {
    match f {
        Some(f) => Cell::num(format!("{}%", sig(f * 100.0, 3)), f),
        None => Cell::text(DASH),
    }
}

fn opt_num(x: Option<f64>, digits: usize) -> Cell {
    match x {
        Some(v) => Cell::num(sig(v, digits), v),
        None => Cell::text(DASH),
    }
}

fn tflops_cell(t: Option<&Timing>) -> Cell {
    match t.and_then(|t| Some((t, t.tflops?))) {
        Some((t, v)) => Cell::num(sig(v, 3), v).from(Some(&t.step), Some(&t.key)),
        None => Cell::text(DASH),
    }
}

fn util_cell(t: Option<&Timing>) -> Cell {
    match t.and_then(|t| Some((t, t.utilisation?))) {
        Some((t, u)) => pct_cell(Some(u)).from(Some(&t.step), Some(&t.key)),
        None => Cell::text(DASH),
    }
}

fn label_cell(t: Option<&Timing>) -> Cell {
    Cell::text(
        t.and_then(|t| t.label.clone())
            .unwrap_or_else(|| DASH.into()),
    )
}

/// A hand-tuned time; `not run` where the workload has a hand-tuned baseline without a result.
fn handtuned_cell(has: bool, t: Option<&Timing>) -> Cell {
    match t {
        None if has => Cell::text("not run"),
        _ => ms_cell(t),
    }
}

pub fn workloads(r: &Report) -> Table {
    let rows = r
        .workloads
        .iter()
        .map(|w| {
            vec![
                Cell::text(&w.workload),
                Cell::text(&w.status).from(
                    w.xla.as_ref().map(|t| t.step.as_str()),
                    w.xla.as_ref().map(|t| t.key.as_str()),
                ),
                ms_cell(w.xla.as_ref()),
                tflops_cell(w.xla.as_ref()),
                util_cell(w.xla.as_ref()),
                opt_num(w.intensity, 3).from(w.cost_step.as_deref(), w.cost_key.as_deref()),
                handtuned_cell(w.has_handtuned, w.handtuned_default.as_ref()),
                handtuned_cell(w.has_handtuned, w.handtuned_tuned.as_ref()),
                label_cell(w.handtuned_tuned.as_ref()),
                ms_cell(w.best.as_ref()),
                label_cell(w.best.as_ref()),
                speedup_cell(w.speedups.tuned_vs_xla),
                speedup_ci_cell(w.speedups.best_vs_xla, w.speedups.best_vs_xla_ci),
                speedup_ci_cell(w.speedups.best_vs_tuned, w.speedups.best_vs_tuned_ci),
                tflops_cell(w.best.as_ref()),
                util_cell(w.best.as_ref()),
            ]
        })
        .collect();
    Table {
        id: "workloads",
        title: "Workloads".into(),
        intro: "Median device time per iteration. Speedups are XLA time over the other time (above 1x: faster than XLA); a candidate measured paired with XLA (interleaved rounds in one process) shows the median of its per-round ratios and, in brackets, the 95 % bootstrap interval. Utilisation is achieved FLOP/s over the device's peak; FLOP/B is the operational intensity. A status in place of a time says why there is none.".into(),
        columns: [
            "workload", "status", "XLA ms", "XLA TFLOP/s", "XLA util", "FLOP/B",
            "hand-tuned default ms", "hand-tuned tuned ms", "tuned config", "best candidate ms",
            "best candidate", "tuned vs XLA", "best vs XLA", "best vs tuned", "best TFLOP/s",
            "best util",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        empty: "No workloads: nothing has run yet (`jb build`).".into(),
    }
}

pub fn methods(r: &Report) -> Table {
    use super::methods::Outcome::*;
    let rows = r
        .methods
        .iter()
        .map(|m| {
            let n = |o| m.outcomes.get(&o).copied().unwrap_or(0).to_string();
            vec![
                Cell::text(&m.name),
                speedup_cell(m.geomean),
                speedup_cell(m.mean),
                Cell::text(format!("{}/{}", m.correct, m.benchmarks)),
                Cell::text(m.attempted.to_string()),
                Cell::text(m.samples.to_string()),
                Cell::text(n(CompileError)),
                Cell::text(n(RuntimeError)),
                Cell::text(n(WrongOutput)),
                Cell::text(n(Correct)),
                Cell::text(n(NotEvaluated)),
            ]
        })
        .collect();
    Table {
        id: "methods",
        title: "Methods (table 2)".into(),
        intro: "Per benchmark, the best correct kernel's speedup over XLA, floored at 1x (no correct kernel counts as 1x); geomean and mean over every benchmark of the suite. Per-sample outcome classes follow.".into(),
        columns: [
            "method", "geomean", "mean", "benchmarks correct", "attempted", "samples",
            "compile error", "runtime error", "wrong output", "correct", "not evaluated",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        empty: "No method results: run `jb agent`, or put candidate kernels under candidates/<workload>/ and `jb build eval`.".into(),
    }
}

pub fn fast_p(r: &Report) -> Table {
    let ps: Vec<f64> = crate::stats::FAST_P.to_vec();
    let rows = r
        .methods
        .iter()
        .map(|m| {
            let mut row = vec![Cell::text(&m.name)];
            for f in &m.fast_p {
                row.push(pct_cell(f.value));
                row.push(pct_cell(f.point));
            }
            row
        })
        .collect();
    let mut columns = vec!["method".to_string()];
    for p in &ps {
        columns.push(format!("fast_{p}"));
        columns.push(format!("fast_{p} (point)"));
    }
    Table {
        id: "fast_p",
        title: "fast_p".into(),
        intro: "Share of all benchmarks with a correct kernel faster than p times XLA. `fast_p`: the kernel's 95 % speedup interval lies above p (a kernel measured without an interval does not count); `(point)`: the point estimate is above p, as in KernelBench.".into(),
        columns,
        rows,
        empty: "No method results.".into(),
    }
}

/// The budgets shown in the fast1@N table: powers of two and the full budget.
pub fn budget_points(max: usize) -> Vec<usize> {
    let mut v: Vec<usize> = std::iter::successors(Some(1usize), |n| n.checked_mul(2))
        .take_while(|n| *n < max)
        .collect();
    if max > 0 {
        v.push(max);
    }
    v
}

pub fn fast1_at_n(r: &Report) -> Table {
    let max = r
        .methods
        .iter()
        .map(|m| m.fast1_at_n.len())
        .max()
        .unwrap_or(0);
    let points = budget_points(max);
    let row = |name: String, v: &[f64]| {
        let mut row = vec![Cell::text(name)];
        row.extend(points.iter().map(|n| {
            let i = (*n).min(v.len());
            pct_cell(if i == 0 { None } else { Some(v[i - 1]) })
        }));
        row
    };
    let rows = r
        .methods
        .iter()
        .flat_map(|m| {
            [
                row(m.name.clone(), &m.fast1_at_n),
                row(format!("{} (point)", m.name), &m.fast1_at_n_point),
            ]
        })
        .collect();
    let mut columns = vec!["method".to_string()];
    columns.extend(points.iter().map(|n| format!("N={n}")));
    Table {
        id: "fast1_at_n",
        title: "fast1@N".into(),
        intro: "Share of benchmarks with a kernel among the first N samples that beats XLA: its 95 % speedup interval lies above 1x; `(point)`: its point estimate does (the paper's definition).".into(),
        columns,
        rows,
        empty: "No method results.".into(),
    }
}

pub fn handtuned(r: &Report) -> Table {
    let t = &r.handtuned;
    let mut rows: Vec<Vec<Cell>> = t
        .rows
        .iter()
        .map(|h| {
            let mut row = vec![
                Cell::text(&h.workload),
                ms_cell(h.xla.as_ref()),
                ms_cell(h.handtuned.as_ref()),
                Cell::text(h.which.clone().unwrap_or_else(|| DASH.into())),
                speedup_cell(h.speedup),
            ];
            row.extend(
                h.methods
                    .iter()
                    .zip(&h.methods_ci)
                    .map(|(s, ci)| speedup_ci_cell(*s, *ci)),
            );
            row
        })
        .collect();
    if !rows.is_empty() {
        let mut g = vec![
            Cell::text("geomean (floor 1x)"),
            Cell::text(""),
            Cell::text(""),
            Cell::text(""),
            speedup_cell(t.geomean_handtuned),
        ];
        g.extend(t.geomean_methods.iter().map(|s| speedup_cell(*s)));
        rows.push(g);
    }
    let mut columns: Vec<String> = [
        "benchmark",
        "XLA ms",
        "hand-tuned ms",
        "config",
        "hand-tuned speedup",
    ]
    .map(String::from)
    .to_vec();
    columns.extend(t.methods.iter().cloned());
    Table {
        id: "handtuned",
        title: "Hand-tuned baselines (table 3)".into(),
        intro: "Speedups over XLA of the hand-tuned library kernels (the tuned configuration where `jb tune` ran, else the default one) and of each method's best correct kernel (– : none correct).".into(),
        columns,
        rows,
        empty: "No hand-tuned baseline results: run `jb tune`.".into(),
    }
}

pub fn candidates(r: &Report) -> Table {
    let rows = r
        .workloads
        .iter()
        .flat_map(|w| {
            w.candidates.iter().map(move |c| {
                vec![
                    Cell::text(&w.workload),
                    Cell::text(&c.method),
                    Cell::text(c.index.to_string()),
                    Cell::text(&c.label),
                    Cell::text(&c.status).from(c.step.as_deref(), c.key.as_deref()),
                    Cell::text(c.trust.as_deref().unwrap_or(DASH)),
                    match c.median_ms {
                        Some(ms) => Cell::num(
                            format!("{}{}", sig(ms, 4), if c.interpret { " †" } else { "" }),
                            ms,
                        ),
                        None => Cell::text(DASH),
                    }
                    .from(c.step.as_deref(), c.key.as_deref()),
                    speedup_ci_cell(c.speedup, c.speedup_ci),
                    opt_num(c.speedup_ci.map(|ci| ci.0), 4),
                    opt_num(c.speedup_ci.map(|ci| ci.1), 4),
                    speedup_ci_cell(
                        c.vs_handtuned.map(|s| s.point),
                        c.vs_handtuned.and_then(|s| s.interval()),
                    ),
                ]
            })
        })
        .collect();
    Table {
        id: "candidates",
        title: "Candidates".into(),
        intro: "Every candidate kernel with its status (the first step that did not pass) and its trust: `artifact` (the judge ran its exported program), `sandboxed` (it could not be exported: judged in its own sandboxed process, the verdict rechecked from its outputs), `unsandboxed` (`--no-sandbox`). Speedups measured paired (interleaved with XLA and the hand-tuned kernel in one process) carry their 95 % bootstrap interval.".into(),
        columns: [
            "workload",
            "method",
            "#",
            "candidate",
            "status",
            "trust",
            "ms",
            "vs XLA",
            "vs XLA CI low",
            "vs XLA CI high",
            "vs hand-tuned",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        empty: "No candidates.".into(),
    }
}

pub fn environment(r: &Report) -> Table {
    let mut rows = Vec::new();
    for (i, e) in r.environments.iter().enumerate() {
        for (k, v) in &e.fingerprint {
            rows.push(vec![
                Cell::text((i + 1).to_string()),
                Cell::text(k),
                Cell::text(v),
            ]);
        }
        rows.push(vec![
            Cell::text((i + 1).to_string()),
            Cell::text("records"),
            Cell::text(if e.origin == "records" {
                format!("{} carry this fingerprint in their keys", e.records)
            } else {
                format!("none carries a fingerprint; this is the {}", e.origin)
            }),
        ]);
    }
    if !r.scales.is_empty() {
        rows.push(vec![
            Cell::text(""),
            Cell::text("scale"),
            Cell::text(r.scales.join(", ")),
        ]);
    }
    if let Some(p) = &r.peak {
        rows.push(vec![
            Cell::text(""),
            Cell::text("peak"),
            Cell::text(format!(
                "{}: {} TFLOP/s, {} GB/s ({}; ridge {} FLOP/B)",
                p.device,
                sig(p.flops_per_s / 1e12, 4),
                sig(p.bytes_per_s / 1e9, 4),
                p.source,
                sig(p.ridge(), 3)
            ))
            .from(p.step.as_deref(), p.key.as_deref()),
        ]);
    }
    rows.push(vec![
        Cell::text(""),
        Cell::text("jb"),
        Cell::text(&r.jb_version),
    ]);
    Table {
        id: "environment",
        title: "Environment".into(),
        intro: "The environment fingerprint of the results (from their keys), the scale and the device peak used for utilisation and the roofline.".into(),
        columns: ["#", "name", "value"].map(String::from).to_vec(),
        rows,
        empty: String::new(),
    }
}

pub fn sources(r: &Report) -> Table {
    let rows = r
        .sources
        .iter()
        .map(|s| {
            vec![
                Cell::text(&s.step),
                Cell::text(&s.kind),
                Cell::text(&s.status),
                Cell::text(&s.key),
            ]
        })
        .collect();
    Table {
        id: "sources",
        title: "Sources".into(),
        intro: "Every record a number above came from: the step and its key in the run database (`actions.key`; `jb explain STEP` shows how the key was made).".into(),
        columns: ["step", "kind", "status", "key"].map(String::from).to_vec(),
        rows,
        empty: "No records.".into(),
    }
}

/// Every table, in report order.
pub fn all(r: &Report) -> Vec<Table> {
    vec![
        workloads(r),
        methods(r),
        fast_p(r),
        fast1_at_n(r),
        handtuned(r),
        candidates(r),
        environment(r),
        sources(r),
    ]
}
