//! Reports: per-workload tables (XLA, hand-tuned default and tuned, best candidate, speedups,
//! TFLOP/s, utilisation, status), the method comparison of the paper's table 2, the hand-tuned
//! comparison of its table 3, fast_p and fast1@N, and SVG plots — as Markdown, CSV, JSON or one
//! self-contained HTML file. Every number keeps the step id and run-database key it came from.
//!
//! The same code serves `jb report` (records: the latest result of every step in the run
//! database) and the `aggregate` step (records: its upstream results).

pub mod agent_runs;
pub mod csv;
pub mod data;
pub mod eval_runs;
pub mod fidelity;
pub mod html;
pub mod markdown;
pub mod methods;
pub mod paired;
pub mod peaks;
pub mod plots;
pub mod records;
/// The statistics live in [`crate::stats`] (one module for the report, the agent and eval).
pub use crate::stats;
pub mod tables;
pub mod written;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use data::{build, Report, ReportInput};
pub use methods::{MethodData, MethodSample, MethodSource, Outcome};
pub use records::{Rec, RecordSet};

use crate::cache::Cache;
use crate::error::JbError;
use crate::project::Project;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Cache(#[from] JbError),
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("plot: {0}")]
    Plot(String),
    #[error("unknown report format `{0}` (md, csv, json, html)")]
    Format(String),
}

fn io(path: &Path, source: std::io::Error) -> ReportError {
    ReportError::Io {
        path: path.to_path_buf(),
        source,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Format {
    Md,
    Csv,
    Json,
    Html,
}

impl Format {
    pub const ALL: [Format; 4] = [Format::Md, Format::Csv, Format::Json, Format::Html];

    pub fn parse(s: &str) -> Result<Format, ReportError> {
        match s {
            "md" | "markdown" => Ok(Format::Md),
            "csv" => Ok(Format::Csv),
            "json" => Ok(Format::Json),
            "html" => Ok(Format::Html),
            other => Err(ReportError::Format(other.to_string())),
        }
    }
}

/// A rendered file: its path relative to the output folder, and its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    pub path: String,
    pub content: String,
}

/// The files of one format: `report.md` + `plots/*.svg`, `<table>.csv`, `report.json`,
/// `report.html` (self-contained).
pub fn render(report: &Report, format: Format) -> Result<Vec<File>, ReportError> {
    let file = |path: &str, content: String| File {
        path: path.to_string(),
        content,
    };
    Ok(match format {
        Format::Md => {
            let plots = plots::all(report)?;
            let mut out = vec![file("report.md", markdown::render(report, &plots, "plots"))];
            for p in &plots {
                if let Some(svg) = &p.svg {
                    out.push(file(&format!("plots/{}.svg", p.id), svg.clone()));
                }
            }
            out
        }
        Format::Html => {
            let plots = plots::all(report)?;
            vec![file("report.html", html::render(report, &plots))]
        }
        Format::Json => {
            let mut text = serde_json::to_string_pretty(report)?;
            text.push('\n');
            vec![file("report.json", text)]
        }
        Format::Csv => tables::all(report)
            .iter()
            .map(|t| file(&format!("{}.csv", t.id), csv::render(t)))
            .collect(),
    })
}

/// Write rendered files under `dir` (each atomically); returns their paths.
pub fn write(dir: &Path, files: &[File]) -> Result<Vec<PathBuf>, ReportError> {
    let mut out = Vec::new();
    for f in files {
        let path = dir.join(&f.path);
        let parent = path.parent().unwrap_or(dir);
        std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
        let tmp = path.with_extension("tmp~");
        std::fs::write(&tmp, &f.content).map_err(|e| io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| io(&path, e))?;
        out.push(path);
    }
    Ok(out)
}

/// Workload folders of a project (`workloads/<name>/workload.py`) and those with a hand-tuned
/// baseline (`tokamax_baselines/<name>/`).
pub fn declared(project: &Project) -> (Vec<String>, Vec<String>) {
    let list = |dir: &str, file: &str| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(project.root.join(dir))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().join(file).is_file())
            .map(|e| e.file_name().to_string_lossy().to_string())
            .collect();
        v.sort();
        v
    };
    (
        list("workloads", "workload.py"),
        list("tokamax_baselines", "baseline.py"),
    )
}

/// The environment fingerprint cached in `<cache>/fingerprint.json`, if any.
pub fn cached_fingerprint(cache_dir: &Path) -> BTreeMap<String, String> {
    std::fs::read_to_string(cache_dir.join("fingerprint.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| serde_json::from_value(v.get("fingerprint")?.clone()).ok())
        .unwrap_or_default()
}

/// The peak `jb doctor` measured, from `<cache>/peak.json`, if any.
pub fn cached_peak(cache_dir: &Path) -> Option<peaks::Peak> {
    let text = std::fs::read_to_string(cache_dir.join("peak.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    peaks::measured(&v, None, None)
}

/// Everything a report of the run database is made of: the latest record of every step, the
/// methods of `sources`, and the project's workloads.
pub fn input_from_cache(
    cache: &Cache,
    project: Option<&Project>,
    sources: &[Box<dyn MethodSource>],
) -> Result<ReportInput, ReportError> {
    let records = RecordSet::from_actions(&cache.db.latest_records("")?);
    let methods = methods::load_all(sources, &records, Some(cache))?;
    let (declared_workloads, declared_handtuned) = project.map(declared).unwrap_or_default();
    Ok(ReportInput {
        records,
        methods,
        declared_workloads,
        declared_handtuned,
        fallback_env: cached_fingerprint(&cache.dir),
        fallback_peak: cached_peak(&cache.dir),
    })
}

/// The fidelity notes of the report's workloads (their `Fidelity:` paragraphs), after its notes.
fn add_fidelity(report: &mut Report, input: &ReportInput, project: Option<&Project>) {
    if let Some(p) = project {
        report
            .notes
            .extend(fidelity::notes(&p.root, &input.declared_workloads));
    }
}

/// The report of a cache's run database.
pub fn from_cache(cache: &Cache, project: Option<&Project>) -> Result<Report, ReportError> {
    let input = input_from_cache(cache, project, &methods::default_sources())?;
    let mut report = build(&input);
    add_fidelity(&mut report, &input, project);
    Ok(report)
}

/// The newest record of every step at `scale` (records whose key has no scale count at every
/// scale), from all the run database holds: a tiny-scale build replaces the `latest` record of
/// a step, not its cpu-scale result.
pub fn records_at(
    cache: &Cache,
    scale: &str,
) -> Result<Vec<crate::cache::ActionRecord>, ReportError> {
    let mut newest: BTreeMap<String, crate::cache::ActionRecord> = BTreeMap::new();
    for (key, _, _) in cache.db.all_actions()? {
        let Some(rec) = cache.db.get_action(&key)? else {
            continue;
        };
        if rec.components.0.get("scale").is_some_and(|s| s != scale) {
            continue;
        }
        match newest.get(&rec.step_id) {
            Some(old) if old.created_at >= rec.created_at => {}
            _ => {
                newest.insert(rec.step_id.clone(), rec);
            }
        }
    }
    Ok(newest.into_values().collect())
}

/// The scales the run database has results for, with how many steps each.
pub fn scales_in(cache: &Cache) -> Result<BTreeMap<String, usize>, ReportError> {
    let mut steps: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for (key, step, _) in cache.db.all_actions()? {
        if let Some(rec) = cache.db.get_action(&key)? {
            if let Some(s) = rec.components.0.get("scale") {
                steps.entry(s.clone()).or_default().insert(step);
            }
        }
    }
    Ok(steps.into_iter().map(|(s, v)| (s, v.len())).collect())
}

/// The report of one scale (`jb report --scale S`; without it, the scale of the newest
/// result). Other scales' results are left out, and a note says which there are.
pub fn from_cache_at(
    cache: &Cache,
    project: Option<&Project>,
    scale: Option<&str>,
) -> Result<Report, ReportError> {
    let scales = scales_in(cache)?;
    let chosen = match scale {
        Some(s) => Some(s.to_string()),
        None => cache
            .db
            .latest_records("")?
            .iter()
            .filter(|r| r.components.0.contains_key("scale"))
            .max_by(|a, b| a.created_at.total_cmp(&b.created_at))
            .and_then(|r| r.components.0.get("scale").cloned()),
    };
    let Some(chosen) = chosen else {
        return from_cache(cache, project);
    };
    let records = RecordSet::from_actions(&records_at(cache, &chosen)?);
    let sources = methods::sources_at(Some(&chosen));
    let methods = methods::load_all(&sources, &records, Some(cache))?;
    let (declared_workloads, declared_handtuned) = project.map(declared).unwrap_or_default();
    let input = ReportInput {
        records,
        methods,
        declared_workloads,
        declared_handtuned,
        fallback_env: cached_fingerprint(&cache.dir),
        fallback_peak: cached_peak(&cache.dir),
    };
    let mut report = build(&input);
    add_fidelity(&mut report, &input, project);
    if report.scales.is_empty() {
        report.scales = vec![chosen.clone()];
    }
    let others: Vec<String> = scales
        .iter()
        .filter(|(s, _)| **s != chosen)
        .map(|(s, n)| format!("{s} ({n} steps)"))
        .collect();
    if !others.is_empty() {
        report.notes.push(format!(
            "Scale {chosen} only. The run database also holds results at {}: `jb report --scale <scale>` reports one of those.",
            others.join(", ")
        ));
    }
    Ok(report)
}
