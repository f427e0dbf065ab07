//! What `jb cache gc` keeps and drops. A record is kept while it can still be used: it is the
//! latest of its step, or it is the newest record of its *slot* — the step at one scale, on one
//! backend and device kind, with one set of parameters (one candidate file, one block-size
//! configuration). Records superseded in their slot (older sources, an older JAX, an older
//! upstream) are dropped. A cpu-scale result survives a tiny-scale build of the same step, and
//! one candidate's results survive the evaluation of another.

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;

use super::Cache;
use crate::error::Result;
use crate::key::KeyComponents;

/// Components that name *which* result a record is (not *how* it was computed).
fn is_identity(component: &str) -> bool {
    component == "scale"
        || component == "env:backend"
        || component == "env:device_kind"
        || component.starts_with("param:")
}

/// The slot of a record: its step id and identity components.
pub fn slot(step_id: &str, components: &KeyComponents) -> String {
    let mut s = step_id.to_string();
    for (k, v) in components.0.iter().filter(|(k, _)| is_identity(k)) {
        s.push_str(&format!("|{k}={v}"));
    }
    s
}

/// One record gc would drop.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Dropped {
    pub key: String,
    pub step_id: String,
    /// The scale it was computed at (`-` when its key has none).
    pub scale: String,
    /// The newer record of the same slot that supersedes it.
    pub superseded_by: String,
}

/// What gc would do.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Plan {
    pub kept: usize,
    pub dropped: Vec<Dropped>,
    /// Blobs no kept record refers to: (digest, bytes).
    pub blobs: Vec<(String, u64)>,
}

impl Plan {
    pub fn blob_bytes(&self) -> u64 {
        self.blobs.iter().map(|(_, b)| b).sum()
    }
}

/// Decide, without changing anything.
pub fn plan(cache: &Cache) -> Result<Plan> {
    let latest: HashSet<String> = cache.db.latest_keys()?.into_iter().collect();
    // Agent studies name the translate steps they used: those stay.
    let mut pinned = latest.clone();
    if let Ok(store) = crate::agent::store::Store::open(&cache.dir) {
        for run in store.runs()? {
            if let Some(id) = run["run_id"].as_i64() {
                for row in store.samples(id)? {
                    pinned.extend(row.translate_key);
                }
            }
        }
    }
    // The newest record of every slot.
    let mut records = Vec::new();
    for (key, _, _) in cache.db.all_actions()? {
        if let Some(rec) = cache.db.get_action(&key)? {
            records.push(rec);
        }
    }
    let mut newest: BTreeMap<String, (f64, String)> = BTreeMap::new();
    for r in &records {
        let s = slot(&r.step_id, &r.components);
        let e = newest.entry(s).or_insert((r.created_at, r.key.clone()));
        // The latest of a step wins its slot whatever the clock says.
        if latest.contains(&r.key) || (!latest.contains(&e.1) && r.created_at > e.0) {
            *e = (r.created_at, r.key.clone());
        }
    }
    let winners: HashSet<&String> = newest.values().map(|(_, k)| k).collect();
    let mut out = Plan::default();
    let mut referenced = HashSet::new();
    for r in &records {
        if pinned.contains(&r.key) || winners.contains(&r.key) {
            out.kept += 1;
            referenced.extend(r.files.values().cloned());
        } else {
            out.dropped.push(Dropped {
                key: r.key.clone(),
                step_id: r.step_id.clone(),
                scale: r
                    .components
                    .0
                    .get("scale")
                    .cloned()
                    .unwrap_or_else(|| "-".into()),
                superseded_by: newest[&slot(&r.step_id, &r.components)].1.clone(),
            });
        }
    }
    out.dropped.sort_by(|a, b| a.step_id.cmp(&b.step_id));
    out.blobs = cache
        .cas
        .list()
        .into_iter()
        .filter(|(d, _)| !referenced.contains(d))
        .collect();
    Ok(out)
}

/// Carry a plan out: delete the dropped records and the unreferenced blobs.
pub fn apply(cache: &Cache, plan: &Plan) -> Result<()> {
    for d in &plan.dropped {
        cache.db.delete_action(&d.key)?;
    }
    for (digest, _) in &plan.blobs {
        cache.cas.remove(digest);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::ActionRecord;

    fn rec(key: &str, step: &str, scale: &str, impl_: &str, input: &str, t: f64) -> ActionRecord {
        let mut c = BTreeMap::new();
        c.insert("scale".to_string(), scale.to_string());
        c.insert("param:impl".to_string(), impl_.to_string());
        c.insert("input:w.py".to_string(), input.to_string());
        c.insert("env:backend".to_string(), "cpu".to_string());
        ActionRecord {
            key: key.into(),
            step_id: step.into(),
            kind: "profile".into(),
            status: "ok".into(),
            output_digest: String::new(),
            result: serde_json::json!({}),
            files: BTreeMap::new(),
            components: KeyComponents(c),
            created_at: t,
            duration_ms: 1.0,
        }
    }

    /// The case: a cpu-scale build, then a tiny one, then evaluations of two candidate
    /// files, then an edit of the workload's source. gc keeps both scales and both candidates
    /// and drops only what the edit superseded; a dry run changes nothing.
    #[test]
    fn keeps_every_scale_and_candidate_drops_superseded() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let p = "baseline/profile[workload=12p]";
        let e = "jb-eval/profile[workload=12p]";
        for r in [
            rec("cpu-old", p, "cpu", "xla", "v1", 1.0),
            rec("tiny-old", p, "tiny", "xla", "v1", 2.0),
            rec("cand-a", e, "tiny", "a.py", "v1", 3.0),
            rec("cand-b", e, "tiny", "b.py", "v1", 4.0),
            rec("cpu-new", p, "cpu", "xla", "v2", 5.0),
        ] {
            cache.db.put_action(&r).unwrap();
        }
        let before = plan(&cache).unwrap();
        let dropped: Vec<&str> = before.dropped.iter().map(|d| d.key.as_str()).collect();
        assert_eq!(dropped, ["cpu-old"]);
        assert_eq!(before.dropped[0].superseded_by, "cpu-new");
        assert_eq!(before.kept, 4);
        // A plan alone (the dry run) deletes nothing.
        assert!(cache.db.get_action("cpu-old").unwrap().is_some());
        apply(&cache, &before).unwrap();
        assert!(cache.db.get_action("cpu-old").unwrap().is_none());
        for k in ["tiny-old", "cand-a", "cand-b", "cpu-new"] {
            assert!(cache.db.get_action(k).unwrap().is_some(), "{k} kept");
        }
        assert!(plan(&cache).unwrap().dropped.is_empty());
    }
}
