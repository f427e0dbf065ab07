//! One decision per step, shared by `--dry-run` and the build: blocked by an upstream status,
//! served from the cache, or run (and why).

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Value};

use crate::cache::{ActionRecord, Cache};
use crate::error::Result;
use crate::key::KeyComponents;
use crate::outcome::status::StepStatus;
use crate::pipeline::{CachePolicy, PipelineSet, Step, StepKind};

use super::keys::{self, FileHashes};
use super::Engine;

/// A settled upstream step, as its dependants see it.
#[derive(Debug, Clone)]
pub struct Done {
    pub digest: String,
    pub status: StepStatus,
    pub result: Value,
    pub key: String,
}

/// What the scheduler knows of a step.
#[derive(Debug, Clone)]
pub enum Known {
    Done(Done),
    /// Will run (dry run) or is running (build): its output is not known yet.
    Pending,
}

/// What to do with a step.
#[derive(Debug)]
pub enum Decision {
    /// An upstream status blocks it: it inherits `status` and runs nothing.
    Blocked { status: StepStatus, reason: String },
    /// A usable cached result.
    Cached(Box<ActionRecord>),
    /// It must run, for this reason.
    Run { reason: String },
}

/// A decision and the key it was made under (none while an upstream output is unknown).
#[derive(Debug)]
pub struct Decided {
    pub decision: Decision,
    pub key: Option<(String, KeyComponents)>,
}

/// A record usable for `step` under `key`: present, allowed by the cache policy, and naming
/// intact blobs only (a corrupt blob is removed and reported, so the step recomputes).
pub fn usable_record(
    cache: &Cache,
    step: &Step,
    key: &str,
    remeasure: bool,
) -> Result<Option<ActionRecord>> {
    if step.cache == CachePolicy::Never || (remeasure && step.kind.is_measurement()) {
        return Ok(None);
    }
    let Some(rec) = cache.db.get_action(key)? else {
        return Ok(None);
    };
    let bad = cache.check_blobs(&rec);
    if !bad.is_empty() {
        for (digest, e) in bad {
            tracing::warn!("{}: {e}; recomputing", step.id);
            eprintln!(
                "warning: {}: cached blob {digest} unusable ({e}); recomputing",
                step.id
            );
        }
        return Ok(None);
    }
    Ok(Some(rec))
}

/// Grid and aggregate steps read whatever their upstream produced, failures included.
fn reads_failures(step: &Step) -> bool {
    matches!(step.kind, StepKind::Grid | StepKind::Aggregate)
}

impl Engine {
    /// The first upstream step whose status blocks `step`.
    fn blocker(
        &self,
        set: &PipelineSet,
        step: &Step,
        known: &HashMap<usize, Known>,
    ) -> Option<Decision> {
        if reads_failures(step) {
            return None;
        }
        step.deps.iter().find_map(|d| match known.get(d) {
            Some(Known::Done(done)) if done.status.blocks_dependants() => Some(Decision::Blocked {
                status: done.status.inherited(),
                reason: format!("upstream {} is {}", set.steps[*d].id, done.status),
            }),
            _ => None,
        })
    }

    /// Upstream output digests, or the id of the first upstream whose output is not known.
    pub(crate) fn dep_outputs(
        &self,
        set: &PipelineSet,
        step: &Step,
        known: &HashMap<usize, Known>,
    ) -> std::result::Result<Vec<(String, String)>, String> {
        // Grid and aggregate steps read measurements (medians), which output digests leave out
        // for early cutoff: their keys hash the upstream results in full, so a re-measurement
        // re-ranks the grid and refreshes the report.
        let reads_measurements = reads_failures(step);
        let mut out = Vec::new();
        for &d in &step.deps {
            match known.get(&d) {
                Some(Known::Done(done)) if reads_measurements => {
                    let mut r = done.result.clone();
                    if let Value::Object(m) = &mut r {
                        m.remove("duration_ms");
                    }
                    let text =
                        crate::key::canonical_json(&json!({"digest": done.digest, "result": r}));
                    out.push((
                        set.steps[d].id.clone(),
                        crate::key::hash_hex(text.as_bytes()),
                    ))
                }
                Some(Known::Done(done)) => out.push((set.steps[d].id.clone(), done.digest.clone())),
                Some(Known::Pending) | None => return Err(set.steps[d].id.clone()),
            }
        }
        Ok(out)
    }

    /// Why a step with these components has no usable cached result.
    pub fn reason(&self, step: &Step, comps: &KeyComponents) -> Result<String> {
        Ok(match self.cache.db.latest(&step.id)? {
            None => "never ran".to_string(),
            Some((k, _)) if k == comps.key() => {
                "its cached result is missing or was not kept".to_string()
            }
            Some((_, before)) => {
                let changes = comps.diff(&before);
                if changes.is_empty() {
                    "its cached result is missing".to_string()
                } else {
                    changes
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("; ")
                }
            }
        })
    }

    /// Decide what to do with `step` given what is known of its upstream steps.
    pub fn decide(
        &self,
        set: &PipelineSet,
        step: &Step,
        known: &HashMap<usize, Known>,
        files: &mut FileHashes,
        remeasure: bool,
    ) -> Result<Decided> {
        let blocked = self.blocker(set, step, known);
        let deps = match self.dep_outputs(set, step, known) {
            Ok(deps) => deps,
            Err(dep) => {
                let decision = blocked.unwrap_or(Decision::Run {
                    reason: format!("upstream {dep} will run"),
                });
                return Ok(Decided {
                    decision,
                    key: None,
                });
            }
        };
        let comps = keys::components(step, &self.project.root, &deps, &self.ctx, files)?;
        let key = comps.key();
        let decision = if let Some(b) = blocked {
            b
        } else if let Some(rec) = usable_record(&self.cache, step, &key, remeasure)? {
            Decision::Cached(Box::new(rec))
        } else {
            let reason = if remeasure && step.kind.is_measurement() {
                "--remeasure".to_string()
            } else if step.cache == CachePolicy::Never {
                "never cached (cache: never)".to_string()
            } else {
                self.reason(step, &comps)?
            };
            Decision::Run { reason }
        };
        Ok(Decided {
            decision,
            key: Some((key, comps)),
        })
    }
}

/// The result a blocked step records.
pub fn blocked_result(status: StepStatus, reason: &str) -> (Value, String) {
    let result = json!({"status": status, "reasons": [reason]});
    let digest = crate::key::output_digest(&result, &BTreeMap::new());
    (result, digest)
}
