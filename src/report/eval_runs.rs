//! Every kernel `jb eval` judged, as one report method. The run database's `latest` table holds
//! one record per step id, and every `jb eval` of a workload shares the step ids
//! `jb-eval/{export,compile,verify,profile}[workload=W]`: the latest records of one workload can
//! come from different files (one file's compile beside another's export). Here each candidate
//! is its own chain: the records whose key names the same candidate file with the same content,
//! newest per step, so a row's name, status and timing are one kernel's, and every kernel
//! evaluated is listed.

use std::collections::BTreeMap;

use super::methods::{candidate_sample, MethodData, MethodSample, MethodSource};
use super::records::{parse_step_id, RecordSet};
use super::ReportError;
use crate::cache::{ActionRecord, Cache};

/// The method's name in tables.
pub const NAME: &str = "jb eval";

const STAGES: [&str; 4] = ["export", "compile", "verify", "profile"];

/// `jb eval`'s candidates from the run database (nothing without a cache), at one scale when
/// `scale` is given.
#[derive(Default)]
pub struct EvalRuns {
    pub scale: Option<String>,
}

/// The candidate a `jb-eval` record judged: its file (the `input:` component outside
/// `workloads/`) and that file's content digest.
fn candidate_of(rec: &ActionRecord) -> Option<(String, String)> {
    rec.components
        .0
        .iter()
        .find(|(k, _)| {
            k.strip_prefix("input:")
                .is_some_and(|p| p.ends_with(".py") && !p.starts_with("workloads/"))
        })
        .map(|(k, v)| (k["input:".len()..].to_string(), v.clone()))
}

fn file_name(path: &str) -> String {
    std::path::Path::new(path)
        .file_name()
        .map(|f| f.to_string_lossy().to_string())
        .unwrap_or_else(|| path.to_string())
}

impl MethodSource for EvalRuns {
    fn load(
        &self,
        _records: &RecordSet,
        cache: Option<&Cache>,
    ) -> Result<Vec<MethodData>, ReportError> {
        let Some(cache) = cache else {
            return Ok(Vec::new());
        };
        // (workload, path, digest) -> step id -> newest record.
        type Chain = BTreeMap<String, ActionRecord>;
        let mut chains: BTreeMap<(String, String, String), Chain> = BTreeMap::new();
        for (key, step_id, _) in cache.db.all_actions()? {
            let Some(rest) = step_id.strip_prefix("jb-eval/") else {
                continue;
            };
            if !STAGES.iter().any(|s| rest.starts_with(&format!("{s}["))) {
                continue;
            }
            let Some(rec) = cache.db.get_action(&key)? else {
                continue;
            };
            if let Some(s) = &self.scale {
                if rec.components.0.get("scale") != Some(s) {
                    continue;
                }
            }
            let (Some(w), Some((path, digest))) = (
                parse_step_id(&rec.step_id).vars.get("workload").cloned(),
                candidate_of(&rec),
            ) else {
                continue;
            };
            let chain = chains.entry((w, path, digest)).or_default();
            match chain.get(&rec.step_id) {
                Some(old) if old.created_at >= rec.created_at => {}
                _ => {
                    chain.insert(rec.step_id.clone(), rec);
                }
            }
        }
        // How many versions each file has: a label names the version only where there are two.
        let mut versions: BTreeMap<(String, String), usize> = BTreeMap::new();
        for (w, path, _) in chains.keys() {
            *versions.entry((w.clone(), path.clone())).or_default() += 1;
        }
        // Per workload, in the order the files were first judged.
        let mut per: BTreeMap<String, Vec<(f64, MethodSample)>> = BTreeMap::new();
        for ((w, path, digest), chain) in &chains {
            let first = chain
                .values()
                .map(|r| r.created_at)
                .fold(f64::INFINITY, f64::min);
            let mut label = file_name(path);
            if versions[&(w.clone(), path.clone())] > 1 {
                label = format!("{label} @{}", &digest[..digest.len().min(8)]);
            }
            let set = RecordSet::from_actions(&chain.values().cloned().collect::<Vec<_>>());
            if let Some(s) = candidate_sample(&set, "jb-eval", w, &[], label, 0) {
                per.entry(w.clone()).or_default().push((first, s));
            }
        }
        let mut data = MethodData {
            name: NAME.into(),
            description: "kernels judged by `jb eval`, one sample per candidate file and content, in the order first evaluated".into(),
            samples: BTreeMap::new(),
        };
        for (w, mut v) in per {
            v.sort_by(|a, b| a.0.total_cmp(&b.0));
            let samples = v
                .into_iter()
                .enumerate()
                .map(|(i, (_, mut s))| {
                    s.index = i + 1;
                    s
                })
                .collect();
            data.samples.insert(w, samples);
        }
        Ok(if data.samples.is_empty() {
            Vec::new()
        } else {
            vec![data]
        })
    }
}
