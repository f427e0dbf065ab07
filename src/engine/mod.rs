//! The build engine: plans which steps must run, runs them in parallel under resource limits,
//! and records every result in the cache.

pub mod keys;
pub mod progress;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Value};

use crate::cache::{ActionRecord, Cache};
use crate::error::{JbError, Result};
use crate::exec::status::{blocks_dependants, inherited, is_failure};
use crate::exec::{CancelFlag, DepResult, Executor, StepOutput, StepRequest};
use crate::key::{output_digest, KeyComponents};
use crate::pipeline::{CachePolicy, PipelineSet, Step, StepKind};
use crate::project::Project;
pub use keys::{FileHashes, KeyContext};

#[derive(Debug, Clone)]
pub struct BuildOptions {
    pub jobs: usize,
    pub keep_going: bool,
    pub remeasure: bool,
    /// Overrides every step's timeout (seconds).
    pub timeout: Option<f64>,
    /// Measurement steps hold the whole machine (CPU backend: a profile must not share cores).
    pub exclusive_measurements: bool,
    /// Capacity of the `device` resource.
    pub devices: u32,
    pub progress: progress::Mode,
    pub command: String,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            jobs: 2,
            keep_going: false,
            remeasure: false,
            timeout: None,
            exclusive_measurements: false,
            devices: 1,
            progress: progress::Mode::Quiet,
            command: "build".into(),
        }
    }
}

/// What happened to one step in a build.
#[derive(Debug, Clone, Serialize)]
pub struct StepReport {
    pub step: String,
    pub kind: String,
    pub status: String,
    pub cached: bool,
    pub key: String,
    pub duration_ms: f64,
    /// Why it ran ("never ran", "input file x changed", ...), or "up to date".
    pub reason: String,
    pub result: Value,
}

#[derive(Debug, Clone, Serialize)]
pub struct BuildSummary {
    pub run_id: i64,
    pub steps: Vec<StepReport>,
    pub ran: usize,
    pub cached: usize,
    pub failed: usize,
    pub interrupted: bool,
    pub wall_ms: f64,
}

/// A dry-run line: what would happen to a step and why.
#[derive(Debug, Clone, Serialize)]
pub struct PlanEntry {
    pub step: String,
    pub kind: String,
    pub action: String,
    pub reason: String,
    pub key: Option<String>,
}

pub struct Engine {
    pub project: Arc<Project>,
    pub cache: Arc<Cache>,
    pub executor: Arc<dyn Executor>,
    pub ctx: KeyContext,
    pub backend: String,
}

/// The selected steps plus everything they depend on, in dependency order.
pub fn closure_in_order(set: &PipelineSet, selected: &[usize]) -> Vec<usize> {
    let mut keep = HashSet::new();
    let mut stack: Vec<usize> = selected.to_vec();
    while let Some(i) = stack.pop() {
        if keep.insert(i) {
            stack.extend(set.steps[i].deps.iter().copied());
        }
    }
    // Kahn's algorithm, ties broken by declaration order (stable output).
    let mut indeg: HashMap<usize, usize> = keep.iter().map(|&i| (i, 0)).collect();
    let mut users: HashMap<usize, Vec<usize>> = HashMap::new();
    for &i in &keep {
        for &d in &set.steps[i].deps {
            *indeg.get_mut(&i).expect("in closure") += 1;
            users.entry(d).or_default().push(i);
        }
    }
    let mut ready: std::collections::BTreeSet<usize> = indeg
        .iter()
        .filter(|(_, &n)| n == 0)
        .map(|(&i, _)| i)
        .collect();
    let mut order = Vec::with_capacity(keep.len());
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &u in users.get(&i).map(Vec::as_slice).unwrap_or(&[]) {
            let n = indeg.get_mut(&u).expect("in closure");
            *n -= 1;
            if *n == 0 {
                ready.insert(u);
            }
        }
    }
    order
}

enum Known {
    Done {
        digest: String,
        status: String,
        result: Value,
        key: String,
    },
    WillRun,
}

struct Resources {
    free: BTreeMap<String, u32>,
    running: usize,
    exclusive_running: bool,
}

impl Engine {
    fn dep_outputs(
        &self,
        set: &PipelineSet,
        step: &Step,
        known: &HashMap<usize, Known>,
    ) -> std::result::Result<Vec<(String, String)>, String> {
        // Grid and aggregate steps read measurements (medians), which output digests leave out
        // for early cutoff: their keys hash the upstream results in full, so a re-measurement
        // re-ranks the grid and refreshes the report.
        let reads_measurements = matches!(step.kind, StepKind::Grid | StepKind::Aggregate);
        let mut out = Vec::new();
        for &d in &step.deps {
            match known.get(&d) {
                Some(Known::Done { digest, result, .. }) if reads_measurements => {
                    let mut r = result.clone();
                    if let Value::Object(m) = &mut r {
                        m.remove("duration_ms");
                    }
                    let text = crate::key::canonical_json(&json!({"digest": digest, "result": r}));
                    out.push((
                        set.steps[d].id.clone(),
                        crate::key::hash_hex(text.as_bytes()),
                    ))
                }
                Some(Known::Done { digest, .. }) => {
                    out.push((set.steps[d].id.clone(), digest.clone()))
                }
                Some(Known::WillRun) | None => return Err(set.steps[d].id.clone()),
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

    fn cached_record(
        &self,
        step: &Step,
        key: &str,
        remeasure: bool,
    ) -> Result<Option<ActionRecord>> {
        if step.cache == CachePolicy::Never || (remeasure && step.kind.is_measurement()) {
            return Ok(None);
        }
        let Some(rec) = self.cache.db.get_action(key)? else {
            return Ok(None);
        };
        let bad = self.cache.check_blobs(&rec);
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

    /// Restore a command step's declared outputs from the cache when missing or different.
    fn restore_outputs(
        &self,
        step: &Step,
        rec: &ActionRecord,
        files: &mut FileHashes,
    ) -> Result<()> {
        for (name, digest) in &rec.files {
            if !step.outputs.contains(name) {
                continue;
            }
            let dest = self.project.root.join(name);
            let same = dest.is_file()
                && files.hash(&self.project.root, name).ok().as_deref() == Some(digest.as_str());
            if !same {
                self.cache
                    .cas
                    .restore(digest, &dest)
                    .map_err(|e| JbError::Cache(format!("restoring {name}: {e}")))?;
            }
        }
        Ok(())
    }

    /// What a build of `order` would do, without running anything.
    pub fn plan(
        &self,
        set: &PipelineSet,
        order: &[usize],
        remeasure: bool,
    ) -> Result<Vec<PlanEntry>> {
        let mut known: HashMap<usize, Known> = HashMap::new();
        let mut files = FileHashes::default();
        let mut out = Vec::new();
        for &i in order {
            let step = &set.steps[i];
            let entry = match self.dep_outputs(set, step, &known) {
                Err(dep) => {
                    known.insert(i, Known::WillRun);
                    PlanEntry {
                        step: step.id.clone(),
                        kind: step.kind.as_str().into(),
                        action: "run".into(),
                        reason: format!("upstream {dep} will run"),
                        key: None,
                    }
                }
                Ok(deps) => {
                    let comps =
                        keys::components(step, &self.project.root, &deps, &self.ctx, &mut files)?;
                    let key = comps.key();
                    match self.cached_record(step, &key, remeasure)? {
                        Some(rec) => {
                            known.insert(
                                i,
                                Known::Done {
                                    digest: rec.output_digest.clone(),
                                    status: rec.status.clone(),
                                    result: rec.result.clone(),
                                    key: key.clone(),
                                },
                            );
                            PlanEntry {
                                step: step.id.clone(),
                                kind: step.kind.as_str().into(),
                                action: "cached".into(),
                                reason: format!("up to date ({})", rec.status),
                                key: Some(key),
                            }
                        }
                        None => {
                            let reason = if remeasure && step.kind.is_measurement() {
                                "--remeasure".to_string()
                            } else if step.cache == CachePolicy::Never {
                                "never cached (cache: never)".to_string()
                            } else {
                                self.reason(step, &comps)?
                            };
                            known.insert(i, Known::WillRun);
                            PlanEntry {
                                step: step.id.clone(),
                                kind: step.kind.as_str().into(),
                                action: "run".into(),
                                reason,
                                key: Some(key),
                            }
                        }
                    }
                }
            };
            out.push(entry);
        }
        Ok(out)
    }

    /// Run `order` (dependency order). Finished results are recorded as they complete.
    pub fn build(
        &self,
        set: &PipelineSet,
        order: &[usize],
        opts: &BuildOptions,
    ) -> Result<BuildSummary> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .max_blocking_threads(opts.jobs.max(1) + 4)
            .enable_all()
            .build()
            .map_err(|e| JbError::Worker(format!("cannot start the scheduler: {e}")))?;
        let result = rt.block_on(self.build_async(set, order, opts));
        self.executor.shutdown();
        result
    }

    async fn build_async(
        &self,
        set: &PipelineSet,
        order: &[usize],
        opts: &BuildOptions,
    ) -> Result<BuildSummary> {
        let started = Instant::now();
        let fingerprint = serde_json::to_string(&self.ctx.fingerprint).unwrap_or_default();
        let run_id = self.cache.db.start_run(&opts.command, &fingerprint)?;
        let mut progress = progress::Progress::new(opts.progress, order.len());
        let cancel = CancelFlag::default();
        let mut files = FileHashes::default();
        let mut known: HashMap<usize, Known> = HashMap::new();
        let mut reports: BTreeMap<usize, StepReport> = BTreeMap::new();
        let mut pending: Vec<usize> = order.to_vec();
        let mut failed = 0usize;
        let mut stop = false;
        let mut interrupted = false;
        let mut resources = Resources {
            free: BTreeMap::new(),
            running: 0,
            exclusive_running: false,
        };
        resources.free.insert("device".into(), opts.devices.max(1));
        let mut tasks: tokio::task::JoinSet<(
            usize,
            String,
            String,
            KeyComponents,
            StepOutput,
            f64,
            std::path::PathBuf,
        )> = tokio::task::JoinSet::new();
        let ctrl_c = tokio::signal::ctrl_c();
        tokio::pin!(ctrl_c);

        loop {
            // Launch (or settle) every pending step whose upstream steps are known.
            let mut progressed = true;
            while progressed && !stop {
                progressed = false;
                let mut i = 0;
                while i < pending.len() {
                    let idx = pending[i];
                    let step = &set.steps[idx];
                    if step.deps.iter().any(|d| {
                        !known.contains_key(d) || matches!(known.get(d), Some(Known::WillRun))
                    }) {
                        i += 1;
                        continue;
                    }
                    // Upstream that blocks this step: inherit a status, run nothing.
                    let blocker = if matches!(step.kind, StepKind::Grid | StepKind::Aggregate) {
                        None
                    } else {
                        step.deps.iter().find_map(|d| match known.get(d) {
                            Some(Known::Done { status, .. }) if blocks_dependants(status) => {
                                Some((*d, status.clone()))
                            }
                            _ => None,
                        })
                    };
                    let deps_out = self.dep_outputs(set, step, &known).expect("deps known");
                    let comps = keys::components(
                        step,
                        &self.project.root,
                        &deps_out,
                        &self.ctx,
                        &mut files,
                    )?;
                    let key = comps.key();
                    if let Some((d, st)) = blocker {
                        let status = inherited(&st).to_string();
                        let reason = format!("upstream {} is {st}", set.steps[d].id);
                        let result = json!({"status": status, "reasons": [reason.clone()]});
                        let digest = output_digest(&result, &BTreeMap::new());
                        known.insert(
                            idx,
                            Known::Done {
                                digest,
                                status: status.clone(),
                                result: result.clone(),
                                key: key.clone(),
                            },
                        );
                        self.cache
                            .db
                            .record_step(run_id, &step.id, &key, &status, false, 0.0)?;
                        progress.settled(&step.id, &status, "skipped");
                        reports.insert(
                            idx,
                            StepReport {
                                step: step.id.clone(),
                                kind: step.kind.as_str().into(),
                                status,
                                cached: false,
                                key,
                                duration_ms: 0.0,
                                reason,
                                result,
                            },
                        );
                        pending.remove(i);
                        progressed = true;
                        continue;
                    }
                    if let Some(rec) = self.cached_record(step, &key, opts.remeasure)? {
                        if step.kind == StepKind::Command {
                            self.restore_outputs(step, &rec, &mut files)?;
                        }
                        self.cache.db.set_latest(&step.id, &key, &comps)?;
                        self.cache.db.record_step(
                            run_id,
                            &step.id,
                            &key,
                            &rec.status,
                            true,
                            0.0,
                        )?;
                        if is_failure(&rec.status) {
                            failed += 1;
                            if !opts.keep_going {
                                stop = true;
                            }
                        }
                        progress.settled(&step.id, &rec.status, "cached");
                        reports.insert(
                            idx,
                            StepReport {
                                step: step.id.clone(),
                                kind: step.kind.as_str().into(),
                                status: rec.status.clone(),
                                cached: true,
                                key: key.clone(),
                                duration_ms: 0.0,
                                reason: "up to date".into(),
                                result: rec.result.clone(),
                            },
                        );
                        known.insert(
                            idx,
                            Known::Done {
                                digest: rec.output_digest,
                                status: rec.status,
                                result: rec.result,
                                key,
                            },
                        );
                        pending.remove(i);
                        progressed = true;
                        continue;
                    }
                    // Must run: check resources.
                    let exclusive = opts.exclusive_measurements && step.kind.is_measurement();
                    let needs = self.resource_needs(step);
                    let fits = resources.running < opts.jobs.max(1)
                        && !resources.exclusive_running
                        && (!exclusive || resources.running == 0)
                        && needs
                            .iter()
                            .all(|(r, n)| resources.free.get(r).copied().unwrap_or(u32::MAX) >= *n);
                    if !fits {
                        i += 1;
                        continue;
                    }
                    let reason = if opts.remeasure && step.kind.is_measurement() {
                        "--remeasure".to_string()
                    } else {
                        self.reason(step, &comps)?
                    };
                    for (r, n) in &needs {
                        if let Some(f) = resources.free.get_mut(r) {
                            *f -= n;
                        }
                    }
                    resources.running += 1;
                    resources.exclusive_running |= exclusive;
                    progress.started(&step.id, &reason);
                    let req = self.request(set, step, &key, &known, opts, &cancel)?;
                    let executor = self.executor.clone();
                    let reason2 = reason.clone();
                    tasks.spawn_blocking(move || {
                        let t0 = Instant::now();
                        let out = executor.execute(&req);
                        // The step's folder is removed once its files are in the CAS.
                        (
                            idx,
                            key,
                            reason2,
                            comps,
                            out,
                            t0.elapsed().as_secs_f64() * 1e3,
                            req.out_dir,
                        )
                    });
                    known.insert(idx, Known::WillRun);
                    pending.remove(i);
                    progressed = true;
                }
            }
            if tasks.is_empty() {
                break;
            }
            let joined = tokio::select! {
                j = tasks.join_next() => j,
                _ = &mut ctrl_c, if !interrupted => {
                    interrupted = true;
                    stop = true;
                    cancel.cancel();
                    self.executor.cancel_all();
                    eprintln!("interrupted: stopping; finished results are kept");
                    continue;
                }
            };
            let Some(joined) = joined else { break };
            let (idx, key, reason, comps, out, ms, out_dir) =
                joined.map_err(|e| JbError::Worker(format!("step task failed: {e}")))?;
            let step = &set.steps[idx];
            for (r, n) in self.resource_needs(step) {
                if let Some(f) = resources.free.get_mut(&r) {
                    *f += n;
                }
            }
            resources.running -= 1;
            if opts.exclusive_measurements && step.kind.is_measurement() {
                resources.exclusive_running = false;
            }
            // The step's files are moved into the CAS before its folder goes.
            let stored = self.store(step, &key, &comps, &out, ms, run_id);
            let _ = std::fs::remove_dir_all(&out_dir);
            let stored = stored?;
            self.cache
                .db
                .record_step(run_id, &step.id, &key, &out.status, false, ms)?;
            if is_failure(&out.status) || out.status == "cancelled" {
                failed += usize::from(out.status != "cancelled");
                if !opts.keep_going {
                    stop = true;
                }
            }
            progress.finished(&step.id, &out.status, ms, &out.result);
            reports.insert(
                idx,
                StepReport {
                    step: step.id.clone(),
                    kind: step.kind.as_str().into(),
                    status: out.status.clone(),
                    cached: false,
                    key: key.clone(),
                    duration_ms: ms,
                    reason,
                    result: stored.clone(),
                },
            );
            let digest = output_digest(&stored, &BTreeMap::new());
            let digest = self
                .cache
                .db
                .get_action(&key)?
                .map(|r| r.output_digest)
                .unwrap_or(digest);
            known.insert(
                idx,
                Known::Done {
                    digest,
                    status: out.status.clone(),
                    result: stored,
                    key,
                },
            );
        }
        progress.done();
        let status = if interrupted {
            "interrupted"
        } else if failed > 0 {
            "failed"
        } else {
            "ok"
        };
        self.cache.db.finish_run(run_id, status)?;
        let ran = reports
            .values()
            .filter(|r| !r.cached && r.duration_ms > 0.0)
            .count();
        let cached = reports.values().filter(|r| r.cached).count();
        Ok(BuildSummary {
            run_id,
            steps: reports.into_values().collect(),
            ran,
            cached,
            failed,
            interrupted,
            wall_ms: started.elapsed().as_secs_f64() * 1e3,
        })
    }

    fn resource_needs(&self, step: &Step) -> Vec<(String, u32)> {
        let mut needs: Vec<(String, u32)> = step
            .resources
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        if step.kind.is_measurement() && !step.resources.contains_key("device") {
            needs.push(("device".into(), 1));
        }
        needs
    }

    fn request(
        &self,
        set: &PipelineSet,
        step: &Step,
        key: &str,
        known: &HashMap<usize, Known>,
        opts: &BuildOptions,
        cancel: &CancelFlag,
    ) -> Result<StepRequest> {
        let tmp = self.cache.dir.join("tmp");
        let out_dir = tempfile::Builder::new()
            .prefix("step-")
            .tempdir_in(&tmp)
            .map_err(|e| JbError::io(&tmp, e))?
            .keep();
        let deps = step
            .deps
            .iter()
            .filter_map(|d| match known.get(d) {
                Some(Known::Done {
                    status,
                    result,
                    key,
                    ..
                }) => Some(DepResult {
                    step_id: set.steps[*d].id.clone(),
                    kind: set.steps[*d].kind.as_str().into(),
                    vars: set.steps[*d].vars.clone(),
                    status: status.clone(),
                    result: result.clone(),
                    key: key.clone(),
                }),
                _ => None,
            })
            .collect();
        Ok(StepRequest {
            step: step.clone(),
            key: key.to_string(),
            project: self.project.clone(),
            scale: self.ctx.scale.clone(),
            backend: self.backend.clone(),
            deps,
            out_dir,
            timeout: opts.timeout.or(step.timeout).map(Duration::from_secs_f64),
            memory_mb: step.memory_mb,
            cancel: cancel.clone(),
        })
    }

    /// Store a fresh output (files into the CAS, record into the database) as the cache policy
    /// allows; returns the result as recorded.
    fn store(
        &self,
        step: &Step,
        key: &str,
        comps: &KeyComponents,
        out: &StepOutput,
        ms: f64,
        run_id: i64,
    ) -> Result<Value> {
        let mut files = BTreeMap::new();
        for (name, path) in &out.files {
            if name.starts_with('.') {
                continue;
            }
            if path.is_file() {
                files.insert(name.clone(), self.cache.cas.put_file(path)?);
            }
        }
        let mut result = out.result.clone();
        if let Value::Object(m) = &mut result {
            m.insert("duration_ms".into(), json!(ms));
            if !files.is_empty() {
                m.insert("files".into(), json!(files));
            }
        }
        if step.kind.is_measurement() && out.status == "ok" {
            let samples = |k: &str| -> Vec<f64> {
                result
                    .get(k)
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_f64).collect())
                    .unwrap_or_default()
            };
            self.cache.db.add_samples(
                key,
                run_id,
                &samples("samples_ms"),
                &samples("wall_samples_ms"),
            )?;
            let all = self.cache.db.samples(key)?;
            let runs: HashSet<i64> = all.iter().map(|(r, _)| *r).collect();
            if runs.len() > 1 {
                let v: Vec<f64> = all.iter().map(|(_, x)| *x).collect();
                if let Value::Object(m) = &mut result {
                    m.insert("measurements".into(), json!(runs.len()));
                    m.insert(
                        "pooled_median_ms".into(),
                        json!(crate::report::stats::median(&v)),
                    );
                    m.insert("pooled_samples".into(), json!(v.len()));
                }
            }
        }
        let keep = match step.cache {
            CachePolicy::Never => false,
            CachePolicy::All => out.status != "cancelled",
            CachePolicy::Results => !out.infra,
        };
        if keep {
            let rec = ActionRecord {
                key: key.to_string(),
                step_id: step.id.clone(),
                kind: step.kind.as_str().into(),
                status: out.status.clone(),
                output_digest: output_digest(&result, &files),
                result: result.clone(),
                files,
                components: comps.clone(),
                created_at: crate::cache::db::now(),
                duration_ms: ms,
            };
            self.cache.db.put_action(&rec)?;
        }
        Ok(result)
    }
}
