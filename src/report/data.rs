//! The report's data: every number of every table and plot, computed once from result records
//! and method data, each with the step id and run-database key it came from.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;

use super::methods::{candidate_sample, MethodData, MethodSample, Outcome};
use super::peaks::{self, Peak, PEAK_STEP};
use super::records::{Rec, RecordSet};
use crate::device::roofline;
use crate::stats::{self, Speedup, Trajectory, FAST_P};

/// What a report is built from.
#[derive(Debug, Clone, Default)]
pub struct ReportInput {
    pub records: RecordSet,
    pub methods: Vec<MethodData>,
    /// Workloads of the project (listed even when nothing ran for them).
    pub declared_workloads: Vec<String>,
    /// Workloads with a hand-tuned baseline in the project.
    pub declared_handtuned: Vec<String>,
    /// The environment when no record carries one (the cache's fingerprint.json).
    pub fallback_env: BTreeMap<String, String>,
    /// A measured peak when no record holds one (the cache's peak.json).
    pub fallback_peak: Option<Peak>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub jb_version: String,
    /// Distinct environments the records were computed in, most records first.
    pub environments: Vec<Environment>,
    pub scales: Vec<String>,
    pub peak: Option<Peak>,
    pub workloads: Vec<WorkloadRow>,
    pub methods: Vec<MethodSummary>,
    pub handtuned: HandtunedTable,
    /// Every record a number was taken from.
    pub sources: Vec<Source>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Environment {
    pub fingerprint: BTreeMap<String, String>,
    pub records: usize,
    /// `records` (key components of the results) or `cache fingerprint.json`.
    pub origin: String,
}

/// One implementation's timing on one workload.
#[derive(Debug, Clone, Serialize)]
pub struct Timing {
    pub status: String,
    pub median_ms: Option<f64>,
    pub samples: usize,
    /// Achieved TFLOP/s: the workload's FLOPs over the median time.
    pub tflops: Option<f64>,
    /// Fraction of the device's peak FLOP/s.
    pub utilisation: Option<f64>,
    /// Fraction of the roofline's attainable FLOP/s at the workload's operational intensity.
    pub of_roofline: Option<f64>,
    /// Pallas ran in interpret mode: the time says nothing about accelerator speed.
    pub interpret: bool,
    /// How far the number can be trusted (`artifact`, `sandboxed`, `unsandboxed`, `trusted`;
    /// `None` for records from before jb recorded it).
    pub trust: Option<String>,
    /// The configuration, candidate or method it is.
    pub label: Option<String>,
    pub reasons: Vec<String>,
    pub step: String,
    pub key: String,
}

impl Timing {
    pub fn ok_ms(&self) -> Option<f64> {
        self.median_ms.filter(|m| *m > 0.0)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct CandidateRow {
    pub method: String,
    pub label: String,
    pub index: usize,
    pub status: String,
    pub outcome: Outcome,
    pub median_ms: Option<f64>,
    pub speedup: Option<f64>,
    /// The speedup's 95 % interval, where it was measured paired with XLA.
    pub speedup_ci: Option<(f64, f64)>,
    /// Paired speedup over the hand-tuned kernel (`jb eval`), with its interval.
    pub vs_handtuned: Option<Speedup>,
    pub interpret: bool,
    /// The weakest trust of the candidate's judged steps (see `Timing::trust`).
    pub trust: Option<String>,
    pub step: Option<String>,
    pub key: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Speedups {
    pub default_vs_xla: Option<f64>,
    pub tuned_vs_xla: Option<f64>,
    pub best_vs_xla: Option<f64>,
    pub best_vs_tuned: Option<f64>,
    /// 95 % intervals of the best candidate's speedups, where it was measured paired.
    pub best_vs_xla_ci: Option<(f64, f64)>,
    pub best_vs_tuned_ci: Option<(f64, f64)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct WorkloadRow {
    pub workload: String,
    /// The XLA baseline's status (`ok`, a failure, `unsupported`, ... or `not run`).
    pub status: String,
    pub flops: Option<f64>,
    pub bytes: Option<f64>,
    /// Operational intensity, FLOP/byte.
    pub intensity: Option<f64>,
    /// The record FLOPs and bytes came from.
    pub cost_step: Option<String>,
    pub cost_key: Option<String>,
    pub xla: Option<Timing>,
    pub handtuned_default: Option<Timing>,
    pub handtuned_tuned: Option<Timing>,
    /// The fastest correct candidate of any method.
    pub best: Option<Timing>,
    pub candidates: Vec<CandidateRow>,
    pub speedups: Speedups,
    pub has_handtuned: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct FastP {
    pub p: f64,
    /// Share of benchmarks with a kernel whose speedup interval lies above p.
    pub value: Option<f64>,
    /// The paper's definition: the point estimate above p.
    pub point: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct BenchBest {
    pub samples: usize,
    pub correct: bool,
    pub best_speedup: Option<f64>,
    /// The interval of that kernel's speedup, where measured paired.
    pub best_ci: Option<(f64, f64)>,
    pub step: Option<String>,
    pub key: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct MethodSummary {
    pub name: String,
    pub description: String,
    /// Benchmarks in the suite (the denominator of every share).
    pub benchmarks: usize,
    pub attempted: usize,
    pub samples: usize,
    /// Benchmarks with at least one correct kernel.
    pub correct: usize,
    /// Per-sample outcome classes.
    pub outcomes: BTreeMap<Outcome, usize>,
    /// Geomean of per-benchmark best speedups floored at 1x.
    pub geomean: Option<f64>,
    pub mean: Option<f64>,
    pub fast_p: Vec<FastP>,
    /// fast1@N for N = 1, 2, ... (index N-1), counted on interval lower bounds.
    pub fast1_at_n: Vec<f64>,
    /// fast1@N on point estimates (the paper's definition).
    pub fast1_at_n_point: Vec<f64>,
    /// Geomean (floor 1x) of best-so-far speedups for N = 1, 2, ...
    pub best_so_far: Vec<f64>,
    pub per_benchmark: BTreeMap<String, BenchBest>,
}

#[derive(Debug, Clone, Serialize)]
pub struct HandtunedRow {
    pub workload: String,
    pub xla: Option<Timing>,
    /// The tuned configuration where `jb tune` ran, else the default one.
    pub handtuned: Option<Timing>,
    pub which: Option<String>,
    pub speedup: Option<f64>,
    /// Best correct speedup per method (None: no correct kernel), in `methods` order.
    pub methods: Vec<Option<f64>>,
    /// Their 95 % intervals, where measured paired.
    pub methods_ci: Vec<Option<(f64, f64)>>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct HandtunedTable {
    pub methods: Vec<String>,
    pub rows: Vec<HandtunedRow>,
    pub geomean_handtuned: Option<f64>,
    pub geomean_methods: Vec<Option<f64>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Source {
    pub step: String,
    pub kind: String,
    pub status: String,
    pub key: String,
}

/// Natural order of workload folders: `2p` before `10p`, then the rest of the name.
pub fn workload_order(a: &str, b: &str) -> std::cmp::Ordering {
    let num = |s: &str| -> (u64, String) {
        let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
        (
            digits.parse().unwrap_or(u64::MAX),
            s[digits.len()..].to_string(),
        )
    };
    num(a).cmp(&num(b)).then_with(|| a.cmp(b))
}

fn speedup(base: Option<&Timing>, other: Option<&Timing>) -> Option<f64> {
    Some(base?.ok_ms()? / other?.ok_ms()?)
}

struct Ctx<'a> {
    records: &'a RecordSet,
    peak: Option<&'a Peak>,
    used: BTreeSet<String>,
}

impl Ctx<'_> {
    fn cite(&mut self, r: &Rec) {
        self.used.insert(r.step_id.clone());
    }

    fn perf(&self, t: &mut Timing, flops: Option<f64>, intensity: Option<f64>) {
        let (Some(ms), Some(f)) = (t.ok_ms(), flops) else {
            return;
        };
        let Some(per_s) = roofline::flops_per_s(f, ms) else {
            return;
        };
        t.tflops = roofline::tflops(f, ms);
        if let Some(p) = self.peak {
            t.utilisation = roofline::utilisation(f, ms, p.flops_per_s);
            t.of_roofline = intensity.map(|i| per_s / p.attainable(i));
        }
    }

    /// A profile record as a timing.
    fn timing(&mut self, r: &Rec, label: Option<String>) -> Timing {
        self.cite(r);
        let ok = r.status == "ok";
        Timing {
            status: r.status.clone(),
            median_ms: if ok { r.f64("median_ms") } else { None },
            samples: r
                .result
                .get("samples_ms")
                .and_then(Value::as_array)
                .map_or(0, Vec::len),
            tflops: None,
            utilisation: None,
            of_roofline: None,
            interpret: r.interpret(),
            trust: r
                .result
                .get("trust")
                .and_then(Value::as_str)
                .map(str::to_string),
            label,
            reasons: r.reasons(),
            step: r.step_id.clone(),
            key: r.key.clone(),
        }
    }

    /// The timing of a compile -> verify -> profile chain: the profile's, or the status of the
    /// step that stopped the chain (a blocked step inherits its status without a record).
    fn chain(&mut self, w: &str, pipeline: &str, steps: [&str; 3], label: &str) -> Option<Timing> {
        if let Some(p) = self.records.find(pipeline, steps[2], w, &[]).cloned() {
            return Some(self.timing(&p, Some(label.into())));
        }
        let blocker = steps[..2]
            .iter()
            .filter_map(|s| self.records.find(pipeline, s, w, &[]))
            .find(|r| !matches!(r.status.as_str(), "ok" | "correct"))?
            .clone();
        Some(self.timing(&blocker, Some(label.into())))
    }

    /// The tuned hand-written baseline: the grid's best configuration.
    fn tuned(&mut self, w: &str) -> Option<Timing> {
        let grid = self.records.find("tune", "best", w, &[])?.clone();
        self.cite(&grid);
        let best = grid.result.get("best");
        let config = best
            .and_then(|b| b.get("config"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let profile = config
            .as_deref()
            .and_then(|c| self.records.find("tune", "profile", w, &[("config", c)]))
            .cloned();
        let mut t = match &profile {
            Some(p) if grid.status == "ok" => self.timing(p, config.clone()),
            _ => Timing {
                status: grid.status.clone(),
                median_ms: None,
                samples: 0,
                tflops: None,
                utilisation: None,
                of_roofline: None,
                interpret: false,
                trust: None,
                label: config.clone(),
                reasons: grid.reasons(),
                step: grid.step_id.clone(),
                key: grid.key.clone(),
            },
        };
        if grid.status == "ok" {
            t.median_ms = best
                .and_then(|b| b.get("median_ms"))
                .and_then(Value::as_f64);
            t.status = "ok".into();
        }
        Some(t)
    }
}

/// The environments of the records, most common first.
fn environments(input: &ReportInput) -> Vec<Environment> {
    let mut counts: BTreeMap<&BTreeMap<String, String>, usize> = BTreeMap::new();
    for (_, r) in input.records.iter() {
        if !r.env.is_empty() {
            *counts.entry(&r.env).or_default() += 1;
        }
    }
    let mut out: Vec<Environment> = counts
        .into_iter()
        .map(|(fp, n)| Environment {
            fingerprint: fp.clone(),
            records: n,
            origin: "records".into(),
        })
        .collect();
    out.sort_by_key(|e| std::cmp::Reverse(e.records));
    if out.is_empty() && !input.fallback_env.is_empty() {
        out.push(Environment {
            fingerprint: input.fallback_env.clone(),
            records: 0,
            origin: "cache fingerprint.json".into(),
        });
    }
    out
}

fn find_peak(input: &ReportInput, envs: &[Environment]) -> Option<Peak> {
    let kind = envs
        .first()
        .and_then(|e| e.fingerprint.get("device_kind"))
        .cloned();
    if let Some(p) = kind.as_deref().and_then(peaks::published) {
        return Some(p);
    }
    let recorded = input.records.iter().find(|(_, r)| {
        r.step_id == PEAK_STEP
            && r.status == "ok"
            && (kind.is_none()
                || r.env.get("device_kind") == kind.as_ref()
                || r.result.get("device_kind").and_then(Value::as_str) == kind.as_deref())
    });
    if let Some((_, r)) = recorded {
        if let Some(p) = peaks::measured(&r.result, Some(&r.step_id), Some(&r.key)) {
            return Some(p);
        }
    }
    input.fallback_peak.clone()
}

fn jb_eval_label(r: &Rec) -> String {
    r.inputs
        .iter()
        .filter(|i| i.ends_with(".py") && !i.starts_with("workloads/"))
        .filter_map(|i| std::path::Path::new(i).file_name())
        .map(|f| f.to_string_lossy().to_string())
        .next()
        .unwrap_or_else(|| "jb eval".into())
}

pub fn build(input: &ReportInput) -> Report {
    let environments = environments(input);
    let peak = find_peak(input, &environments);
    let mut ctx = Ctx {
        records: &input.records,
        peak: peak.as_ref(),
        used: BTreeSet::new(),
    };
    let mut names: BTreeSet<String> = input.declared_workloads.iter().cloned().collect();
    names.extend(input.records.workloads());
    for m in &input.methods {
        names.extend(m.samples.keys().cloned());
    }
    let mut names: Vec<String> = names.into_iter().collect();
    names.sort_by(|a, b| workload_order(a, b));

    let mut notes = Vec::new();
    let mut rows = Vec::new();
    for w in &names {
        rows.push(workload_row(&mut ctx, input, w));
    }

    // Speedups of method samples against the XLA baseline record.
    let xla_ms: BTreeMap<&str, f64> = rows
        .iter()
        .filter_map(|r| Some((r.workload.as_str(), r.xla.as_ref()?.ok_ms()?)))
        .collect();
    let sample_speedup = |w: &str, s: &MethodSample| -> Option<Speedup> {
        if s.outcome != Outcome::Correct
            || !crate::outcome::trust::speedup_allowed(s.trust.as_deref())
        {
            return None;
        }
        if let Some(p) = s.paired_xla {
            return Some(p);
        }
        match (xla_ms.get(w), s.median_ms) {
            (Some(b), Some(m)) if m > 0.0 => Some(Speedup::point(b / m)),
            _ => s.speedup.map(Speedup::point),
        }
    };
    let methods: Vec<MethodSummary> = input
        .methods
        .iter()
        .map(|m| summarize(m, &names, &sample_speedup))
        .collect();
    let handtuned = handtuned_table(input, &rows, &methods);

    for row in &rows {
        for t in [
            &row.xla,
            &row.handtuned_default,
            &row.handtuned_tuned,
            &row.best,
        ]
        .into_iter()
        .flatten()
        {
            let mut note = |n: &str| {
                if !notes.iter().any(|x| x == n) {
                    notes.push(n.to_string());
                }
            };
            if t.interpret {
                note("† Pallas ran in interpret mode: that time says nothing about accelerator speed");
            }
            match t.trust.as_deref() {
                Some("sandboxed") => note(super::tables::SANDBOXED_NOTE),
                Some("unsandboxed") => note(super::tables::UNSANDBOXED_NOTE),
                _ => {}
            }
        }
        // A correct candidate left without a time: say why (one trust rule, as `jb eval`).
        for c in row
            .candidates
            .iter()
            .filter(|c| c.outcome == Outcome::Correct)
        {
            if let Some(why) = crate::outcome::trust::unmeasured_reason(c.trust.as_deref()) {
                let n = format!("correct candidates without a speedup: {why}");
                if !notes.contains(&n) {
                    notes.push(n);
                }
            }
        }
    }
    if environments.len() > 1 {
        notes.push(format!(
            "the records come from {} different environments (see Environment)",
            environments.len()
        ));
    }
    if let Some(p) = peak.as_ref().filter(|p| p.source == "measured") {
        let over = rows
            .iter()
            .filter_map(|r| r.xla.as_ref())
            .filter(|t| {
                t.utilisation.is_some_and(|u| u > 1.0) || t.of_roofline.is_some_and(|u| u > 1.0)
            })
            .count();
        let mut n = format!(
            "the {} peak is an estimate measured by `jb doctor` (the fastest XLA matmul it timed, and a reduction's bandwidth): utilisation and the roofline bound are estimates",
            p.device
        );
        if over > 0 {
            n.push_str(&format!(
                "; {over} XLA time(s) run above it or above the roofline (data that fits a cache moves faster than memory, or the machine was busier while `jb doctor` measured: run it again on a quiet machine)"
            ));
        }
        notes.push(n);
    }
    if peak.is_none() {
        notes.push("no device peak known (not a published device and no `jb doctor` measurement): utilisation is not shown".into());
    }
    let mut scales: Vec<String> = input
        .records
        .iter()
        .filter_map(|(_, r)| r.scale.clone())
        .collect();
    scales.sort();
    scales.dedup();
    if let Some(p) = &peak {
        if let Some(s) = &p.step {
            ctx.used.insert(s.clone());
        }
    }
    let sources = ctx
        .used
        .iter()
        .filter_map(|id| input.records.get(id))
        .map(|r| Source {
            step: r.step_id.clone(),
            kind: r.kind.clone(),
            status: r.status.clone(),
            key: r.key.clone(),
        })
        .collect();
    Report {
        jb_version: env!("CARGO_PKG_VERSION").to_string(),
        environments,
        scales,
        peak,
        workloads: rows,
        methods,
        handtuned,
        sources,
        notes,
    }
}

fn workload_row(ctx: &mut Ctx, input: &ReportInput, w: &str) -> WorkloadRow {
    let records = ctx.records;
    let profile = records.find("baseline", "profile", w, &[]).cloned();
    let compile = records.find("baseline", "compile", w, &[]).cloned();
    let cost = |r: &Rec, a: &str, b: Option<&str>| {
        r.result.get(a).and_then(|v| match b {
            Some(b) => v.get(b).and_then(Value::as_f64),
            None => v.as_f64(),
        })
    };
    let mut flops = None;
    let mut bytes = None;
    let mut cost_from = None;
    if let Some(p) = &profile {
        flops = cost(p, "flops", None);
        bytes = cost(p, "bytes", None);
        if flops.is_some() {
            cost_from = Some(p.clone());
        }
    }
    if let Some(c) = &compile {
        if flops.is_none() {
            flops = cost(c, "cost", Some("flops"));
            cost_from = flops.is_some().then(|| c.clone());
        }
        if bytes.is_none() {
            bytes = cost(c, "cost", Some("bytes_accessed"));
        }
    }
    let flops = flops.filter(|f| *f > 0.0);
    let bytes = bytes.filter(|b| *b > 0.0);
    let intensity = match (flops, bytes) {
        (Some(f), Some(b)) => Some(f / b),
        _ => None,
    };
    if let Some(c) = &cost_from {
        ctx.cite(c);
    }
    let mut xla = profile.as_ref().map(|p| ctx.timing(p, None));
    let status = match (&profile, &compile) {
        (Some(p), Some(c)) if p.status == "skipped" && c.status != "ok" => c.status.clone(),
        (Some(p), _) => p.status.clone(),
        (None, Some(c)) => {
            ctx.cite(c);
            if c.status == "ok" {
                "not profiled".into()
            } else {
                c.status.clone()
            }
        }
        (None, None) => "not run".into(),
    };
    if let (Some(x), Some(c)) = (xla.as_mut(), &compile) {
        if x.status != "ok" && c.status != "ok" {
            x.status = c.status.clone();
            x.reasons = c.reasons();
            ctx.cite(c);
        }
    }
    let default = ctx.chain(
        w,
        "tune",
        ["default_compile", "default_verify", "default_profile"],
        "default",
    );
    let mut tuned = ctx.tuned(w);
    if tuned.is_none() {
        tuned = ctx.chain(
            w,
            "jb-eval",
            ["handtuned_compile", "handtuned_verify", "handtuned_profile"],
            "jb eval",
        );
    }

    // Candidates of every method, and the one-off `jb eval` candidate.
    let mut candidates = Vec::new();
    for m in &input.methods {
        for s in m.samples.get(w).map(Vec::as_slice).unwrap_or(&[]) {
            candidates.push(candidate_row(&m.name, s));
        }
    }
    // Without the run database (the `aggregate` step), the latest `jb eval` records stand for
    // the one-off candidate; with it, the `jb eval` method lists every kernel judged.
    let has_eval_method = input
        .methods
        .iter()
        .any(|m| m.name == super::eval_runs::NAME);
    if let Some(first) = records
        .find("jb-eval", "compile", w, &[])
        .or_else(|| records.find("jb-eval", "verify", w, &[]))
        .filter(|_| !has_eval_method)
    {
        let label = jb_eval_label(first);
        if let Some(s) = candidate_sample(records, "jb-eval", w, &[], label, 1) {
            candidates.push(candidate_row("jb eval", &s));
        }
    }
    let xla_ms = xla.as_ref().and_then(Timing::ok_ms);
    for c in &mut candidates {
        if c.outcome != Outcome::Correct {
            c.speedup = None;
            c.speedup_ci = None;
            c.vs_handtuned = None;
        } else if let (Some(point), Some(_)) = (c.speedup, c.speedup_ci) {
            // XLA much slower beside the candidate than alone: capped, as `jb eval` does.
            let pair_xla = c
                .step
                .as_deref()
                .and_then(|s| records.get(s))
                .and_then(|r| super::paired::pair_median(&r.result, "xla"));
            if let Some(g) = super::paired::slowed(point, pair_xla, xla_ms, c.median_ms) {
                c.speedup = Some(g.capped);
                c.speedup_ci = None;
            }
        } else if c.speedup_ci.is_none() {
            if let (Some(b), Some(m)) = (xla_ms, c.median_ms.filter(|m| *m > 0.0)) {
                c.speedup = Some(b / m);
            }
        }
    }
    let best_c = candidates
        .iter()
        .filter(|c| c.outcome == Outcome::Correct && c.median_ms.is_some_and(|m| m > 0.0))
        .min_by(|a, b| {
            a.median_ms
                .unwrap_or(f64::INFINITY)
                .total_cmp(&b.median_ms.unwrap_or(f64::INFINITY))
        })
        .cloned();
    let best_c_paired = best_c.as_ref().map_or((None, None), |c| {
        (
            c.speedup_ci.map(|(lo, hi)| Speedup {
                point: c.speedup.unwrap_or(f64::NAN),
                ci_low: Some(lo),
                ci_high: Some(hi),
            }),
            c.vs_handtuned,
        )
    });
    let mut best = best_c.map(|c| {
        if let Some(s) = &c.step {
            ctx.used.insert(s.clone());
        }
        Timing {
            status: "ok".into(),
            median_ms: c.median_ms,
            samples: c
                .step
                .as_deref()
                .and_then(|s| records.get(s))
                .and_then(|r| r.result.get("samples_ms"))
                .and_then(Value::as_array)
                .map_or(0, Vec::len),
            tflops: None,
            utilisation: None,
            of_roofline: None,
            interpret: c.interpret,
            trust: c.trust.clone(),
            label: Some(format!("{}: {}", c.method, c.label)),
            reasons: Vec::new(),
            step: c.step.clone().unwrap_or_default(),
            key: c.key.clone().unwrap_or_default(),
        }
    });
    for c in &candidates {
        if let Some(s) = &c.step {
            ctx.used.insert(s.clone());
        }
    }
    for t in [&mut xla, &mut tuned, &mut best].into_iter().flatten() {
        ctx.perf(t, flops, intensity);
    }
    let mut default = default;
    if let Some(t) = default.as_mut() {
        ctx.perf(t, flops, intensity);
    }
    let paired_best = best_c_paired;
    let speedups = Speedups {
        default_vs_xla: speedup(xla.as_ref(), default.as_ref()),
        tuned_vs_xla: speedup(xla.as_ref(), tuned.as_ref()),
        best_vs_xla: paired_best
            .0
            .map(|p| p.point)
            .or_else(|| speedup(xla.as_ref(), best.as_ref())),
        best_vs_tuned: paired_best
            .1
            .map(|p| p.point)
            .or_else(|| speedup(tuned.as_ref(), best.as_ref())),
        best_vs_xla_ci: paired_best.0.and_then(|p| p.interval()),
        best_vs_tuned_ci: paired_best.1.and_then(|p| p.interval()),
    };
    let has_handtuned = input.declared_handtuned.iter().any(|d| d == w)
        || default.is_some()
        || tuned.is_some()
        || records.iter().any(|(s, _)| {
            s.pipeline == "tune" && s.vars.get("workload").map(String::as_str) == Some(w)
        });
    WorkloadRow {
        workload: w.to_string(),
        status,
        flops,
        bytes,
        intensity,
        cost_step: cost_from.as_ref().map(|r| r.step_id.clone()),
        cost_key: cost_from.as_ref().map(|r| r.key.clone()),
        xla,
        handtuned_default: default,
        handtuned_tuned: tuned,
        best,
        candidates,
        speedups,
        has_handtuned,
    }
}

fn candidate_row(method: &str, s: &MethodSample) -> CandidateRow {
    CandidateRow {
        method: method.to_string(),
        label: s.label.clone(),
        index: s.index,
        status: s.status.clone(),
        outcome: s.outcome,
        median_ms: if s.outcome == Outcome::Correct {
            s.median_ms
        } else {
            None
        },
        speedup: s.paired_xla.map(|p| p.point).or(s.speedup),
        speedup_ci: s.paired_xla.and_then(|p| p.interval()),
        vs_handtuned: s.paired_handtuned,
        interpret: s.interpret,
        trust: s.trust.clone(),
        step: s.step.clone(),
        key: s.key.clone(),
    }
}

fn summarize(
    m: &MethodData,
    suite: &[String],
    speedup: &dyn Fn(&str, &MethodSample) -> Option<Speedup>,
) -> MethodSummary {
    let mut trajs: Vec<Trajectory> = Vec::new();
    let mut lowers: Vec<Trajectory> = Vec::new();
    let mut per_benchmark = BTreeMap::new();
    let mut outcomes = BTreeMap::new();
    let mut samples = 0;
    for w in suite {
        let ss = m.samples.get(w).map(Vec::as_slice).unwrap_or(&[]);
        let mut ordered: Vec<&MethodSample> = ss.iter().collect();
        ordered.sort_by_key(|s| s.index);
        let full: Vec<Option<Speedup>> = ordered.iter().map(|s| speedup(w, s)).collect();
        let traj: Trajectory = full.iter().map(|s| s.map(|s| s.point)).collect();
        samples += ss.len();
        for s in ss {
            *outcomes.entry(s.outcome).or_default() += 1;
        }
        if !ss.is_empty() {
            let best_sample = ordered
                .iter()
                .zip(&full)
                .filter_map(|(s, v)| v.map(|v| (s, v)))
                .max_by(|a, b| a.1.point.total_cmp(&b.1.point));
            per_benchmark.insert(
                w.clone(),
                BenchBest {
                    samples: ss.len(),
                    correct: ss.iter().any(|s| s.outcome == Outcome::Correct),
                    best_speedup: best_sample.map(|(_, v)| v.point),
                    best_ci: best_sample.and_then(|(_, v)| v.interval()),
                    step: best_sample.and_then(|(s, _)| s.step.clone()),
                    key: best_sample.and_then(|(s, _)| s.key.clone()),
                },
            );
        }
        trajs.push(traj);
        lowers.push(full.iter().map(|s| s.and_then(|s| s.ci_low)).collect());
    }
    let bests: Vec<Option<f64>> = trajs.iter().map(|t| stats::best(t, None)).collect();
    let best_lowers: Vec<Option<f64>> = lowers.iter().map(|t| stats::best(t, None)).collect();
    MethodSummary {
        name: m.name.clone(),
        description: m.description.clone(),
        benchmarks: suite.len(),
        attempted: per_benchmark.len(),
        samples,
        correct: per_benchmark.values().filter(|b| b.correct).count(),
        outcomes,
        geomean: stats::geomean_floor1(&bests),
        mean: stats::mean_floor1(&bests),
        fast_p: FAST_P
            .iter()
            .map(|p| FastP {
                p: *p,
                value: stats::fast_p(&best_lowers, *p),
                point: stats::fast_p(&bests, *p),
            })
            .collect(),
        fast1_at_n: stats::fast1_at_n_lower(&lowers),
        fast1_at_n_point: stats::fast1_at_n(&trajs),
        best_so_far: stats::best_so_far_geomean(&trajs),
        per_benchmark,
    }
}

fn handtuned_table(
    input: &ReportInput,
    rows: &[WorkloadRow],
    methods: &[MethodSummary],
) -> HandtunedTable {
    let _ = input;
    let mut out = HandtunedTable {
        methods: methods.iter().map(|m| m.name.clone()).collect(),
        ..Default::default()
    };
    for r in rows.iter().filter(|r| r.has_handtuned) {
        let (ht, which) = match (&r.handtuned_tuned, &r.handtuned_default) {
            (Some(t), _) if t.ok_ms().is_some() => (Some(t.clone()), Some("tuned")),
            (_, Some(d)) if d.ok_ms().is_some() => (Some(d.clone()), Some("default")),
            (Some(t), _) => (Some(t.clone()), Some("tuned")),
            (None, Some(d)) => (Some(d.clone()), Some("default")),
            (None, None) => (None, None),
        };
        out.rows.push(HandtunedRow {
            workload: r.workload.clone(),
            xla: r.xla.clone(),
            speedup: speedup(r.xla.as_ref(), ht.as_ref()),
            handtuned: ht,
            which: which.map(str::to_string),
            methods: methods
                .iter()
                .map(|m| {
                    m.per_benchmark
                        .get(&r.workload)
                        .and_then(|b| b.best_speedup)
                })
                .collect(),
            methods_ci: methods
                .iter()
                .map(|m| m.per_benchmark.get(&r.workload).and_then(|b| b.best_ci))
                .collect(),
        });
    }
    if !out.rows.is_empty() {
        let ht: Vec<Option<f64>> = out.rows.iter().map(|r| r.speedup).collect();
        out.geomean_handtuned = stats::geomean_floor1(&ht);
        out.geomean_methods = (0..methods.len())
            .map(|i| {
                let v: Vec<Option<f64>> = out.rows.iter().map(|r| r.methods[i]).collect();
                stats::geomean_floor1(&v)
            })
            .collect();
    }
    out
}
