//! The build engine, in parts: the walker yields steps whose upstream steps settled; `decide`
//! says blocked / cached / run (shared with `--dry-run`); admission starts runnable steps under
//! slots, resources and device locks; tasks run them; finished steps go to the persister
//! (batched database writes) and the reporter (progress, summary).

pub mod admission;
pub mod decide;
pub mod keys;
pub mod locks;
pub mod persist;
pub mod progress;
pub mod reporter;
pub mod run;
pub mod step_dirs;
pub mod walker;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Value};

use crate::cache::{ActionRecord, Cache};
use crate::error::{JbError, Result};
use crate::exec::results::{typed, ProfileResult};
use crate::exec::{CancelFlag, Executor, StepOutput, StepRequest};
use crate::key::{output_digest, KeyComponents};
use crate::outcome::status::StepStatus;
use crate::outcome::DepResult;
use crate::pipeline::{CachePolicy, PipelineSet, Step, StepKind};
use crate::project::Project;
use decide::{blocked_result, Decision, Done, Known};
pub use keys::{FileHashes, KeyContext};
use persist::Persister;
use reporter::{Reporter, Settled};
use run::{FinishedStep, Task, TaskOutcome};

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
    /// An accelerator backend on this machine: every step that opens the backend holds a device
    /// unit (and its lock file), and its worker is the pooled judge of that device.
    pub device_bound: bool,
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
            device_bound: false,
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
    pub status: StepStatus,
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
    pub action: PlanAction,
    pub reason: String,
    pub key: Option<String>,
}

/// What a build would do with a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanAction {
    Run,
    Cached,
    /// An upstream status blocks it: it would inherit a status and run nothing.
    Blocked,
}

impl PlanAction {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanAction::Run => "run",
            PlanAction::Cached => "cached",
            PlanAction::Blocked => "blocked",
        }
    }
}

impl std::fmt::Display for PlanAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl PartialEq<&str> for PlanAction {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
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

/// A step the build decided to run, waiting for admission.
struct Runnable {
    idx: usize,
    key: String,
    comps: KeyComponents,
    reason: String,
}

/// A fresh output as stored: the result recorded, its digest, and the writes it needs.
struct Stored {
    result: Value,
    digest: String,
    record: Option<ActionRecord>,
    samples: Option<(Vec<f64>, Vec<f64>)>,
}

/// The mutable state of one build.
struct BuildState<'a> {
    known: HashMap<usize, Known>,
    files: FileHashes,
    walker: walker::Walker,
    runnable: VecDeque<Runnable>,
    admission: admission::Admission,
    persister: Persister<'a>,
    reporter: Reporter,
    cancel: CancelFlag,
    /// The steps' scratch folders, reused.
    dirs: step_dirs::StepDirs,
    /// No new step is decided or started (a failure without --keep-going, or Ctrl-C).
    stop: bool,
}

impl Engine {
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

    fn request(
        &self,
        set: &PipelineSet,
        step: &Step,
        key: &str,
        opts: &BuildOptions,
        st: &BuildState<'_>,
    ) -> Result<StepRequest> {
        let (known, cancel) = (&st.known, &st.cancel);
        let out_dir = st
            .dirs
            .take()
            .map_err(|e| JbError::io(self.cache.dir.join("tmp"), e))?;
        let deps = step
            .deps
            .iter()
            .filter_map(|d| match known.get(d) {
                Some(Known::Done(done)) => Some(DepResult {
                    step_id: set.steps[*d].id.clone(),
                    kind: set.steps[*d].kind.as_str().into(),
                    vars: set.steps[*d].vars.clone(),
                    status: done.status,
                    result: done.result.clone(),
                    key: done.key.clone(),
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
            device: None,
            peak: self.ctx.peak.clone(),
        })
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
            let decided = self.decide(set, step, &known, &mut files, remeasure)?;
            let key = decided.key.map(|(k, _)| k);
            let (action, reason, state) = match decided.decision {
                Decision::Blocked { status, reason } => {
                    let (result, digest) = blocked_result(status, &reason);
                    let done = Done {
                        digest,
                        status,
                        result,
                        key: key.clone().unwrap_or_default(),
                    };
                    (PlanAction::Blocked, reason, Known::Done(done))
                }
                Decision::Cached(rec) => {
                    let done = Done {
                        digest: rec.output_digest,
                        status: StepStatus::from(rec.status.as_str()),
                        result: rec.result,
                        key: key.clone().unwrap_or_default(),
                    };
                    let reason = format!("up to date ({})", rec.status);
                    (PlanAction::Cached, reason, Known::Done(done))
                }
                Decision::Run { reason } => (PlanAction::Run, reason, Known::Pending),
            };
            known.insert(i, state);
            out.push(PlanEntry {
                step: step.id.clone(),
                kind: step.kind.as_str().into(),
                action,
                reason,
                key,
            });
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
        let mut st = BuildState {
            known: HashMap::new(),
            files: FileHashes::default(),
            walker: walker::Walker::new(set, order),
            runnable: VecDeque::new(),
            admission: admission::Admission::new(
                opts.jobs,
                opts.devices,
                opts.exclusive_measurements,
                opts.device_bound,
            ),
            persister: Persister::new(&self.cache.db, &opts.command, &fingerprint)?,
            reporter: Reporter::new(opts.progress, order.len()),
            cancel: CancelFlag::default(),
            dirs: step_dirs::StepDirs::new(&self.cache.dir.join("tmp")),
            stop: false,
        };
        let mut interrupted = false;
        let mut tasks: tokio::task::JoinSet<FinishedStep> = tokio::task::JoinSet::new();
        // SIGINT, SIGTERM and SIGHUP all interrupt the build.
        let ctrl_c = crate::exec::child::termination_signal();
        tokio::pin!(ctrl_c);
        loop {
            if !st.stop {
                self.settle_ready(set, opts, &mut st)?;
                self.admit(set, opts, &mut st, &mut tasks)?;
            }
            if tasks.is_empty() {
                break;
            }
            let joined = tokio::select! {
                j = tasks.join_next() => j,
                _ = &mut ctrl_c, if !interrupted => {
                    interrupted = true;
                    st.stop = true;
                    st.cancel.cancel();
                    self.executor.cancel_all();
                    eprintln!("interrupted: stopping; finished results are kept");
                    continue;
                }
            };
            let Some(first) = joined else { break };
            // Every task that finished meanwhile joins this batch: one transaction for all.
            let mut batch = vec![first];
            while let Some(j) = tasks.try_join_next() {
                batch.push(j);
            }
            let mut held = Vec::new();
            for joined in batch {
                let mut finished =
                    joined.map_err(|e| JbError::Worker(format!("step task failed: {e}")))?;
                held.extend(finished.key_lock.take());
                self.finish(set, opts, &mut st, finished)?;
            }
            st.persister.flush()?;
            // Records are committed: builds waiting on these keys may read them now.
            drop(held);
        }
        let BuildState {
            persister,
            reporter,
            ..
        } = st;
        let failed = reporter.failed;
        let status = if interrupted {
            "interrupted"
        } else if failed > 0 {
            "failed"
        } else {
            "ok"
        };
        let steps = reporter.finish();
        let run_id = persister.finish(status)?;
        let ran = steps
            .iter()
            .filter(|r| !r.cached && r.duration_ms > 0.0)
            .count();
        let cached = steps.iter().filter(|r| r.cached).count();
        Ok(BuildSummary {
            run_id,
            steps,
            ran,
            cached,
            failed,
            interrupted,
            wall_ms: started.elapsed().as_secs_f64() * 1e3,
        })
    }

    /// Decide every ready step: settle the blocked and cached ones at once (which may make
    /// more steps ready), queue the ones that must run.
    fn settle_ready(
        &self,
        set: &PipelineSet,
        opts: &BuildOptions,
        st: &mut BuildState<'_>,
    ) -> Result<()> {
        while !st.stop {
            let Some(idx) = st.walker.next_ready() else {
                break;
            };
            let step = &set.steps[idx];
            let decided = self.decide(set, step, &st.known, &mut st.files, opts.remeasure)?;
            let (key, comps) = decided
                .key
                .ok_or_else(|| JbError::Worker(format!("{}: upstream not settled", step.id)))?;
            match decided.decision {
                Decision::Blocked { status, reason } => {
                    let (result, digest) = blocked_result(status, &reason);
                    st.reporter.settled(
                        idx,
                        step,
                        Settled::Blocked,
                        status,
                        &key,
                        0.0,
                        reason,
                        result.clone(),
                    );
                    self.settle(st, idx, digest, status, result, key);
                }
                Decision::Cached(rec) => {
                    self.settle_cached(step, idx, *rec, key, &comps, opts, st)?
                }
                Decision::Run { reason } => {
                    st.known.insert(idx, Known::Pending);
                    st.runnable.push_back(Runnable {
                        idx,
                        key,
                        comps,
                        reason,
                    });
                }
            }
        }
        Ok(())
    }

    fn settle(
        &self,
        st: &mut BuildState<'_>,
        idx: usize,
        digest: String,
        status: StepStatus,
        result: Value,
        key: String,
    ) {
        st.known.insert(
            idx,
            Known::Done(Done {
                digest,
                status,
                result,
                key,
            }),
        );
        st.walker.settled(idx);
    }

    #[allow(clippy::too_many_arguments)]
    fn settle_cached(
        &self,
        step: &Step,
        idx: usize,
        rec: ActionRecord,
        key: String,
        comps: &KeyComponents,
        opts: &BuildOptions,
        st: &mut BuildState<'_>,
    ) -> Result<()> {
        if step.kind == StepKind::Command {
            self.restore_outputs(step, &rec, &mut st.files)?;
        }
        let status = StepStatus::from(rec.status.as_str());
        st.persister.cache_hit(&step.id, &key, comps, status)?;
        st.reporter.settled(
            idx,
            step,
            Settled::Cached,
            status,
            &key,
            0.0,
            "up to date".into(),
            rec.result.clone(),
        );
        if status.is_failure() && !opts.keep_going {
            st.stop = true;
        }
        self.settle(st, idx, rec.output_digest, status, rec.result, key);
        Ok(())
    }

    /// Start every queued step that admission lets in, in order.
    fn admit(
        &self,
        set: &PipelineSet,
        opts: &BuildOptions,
        st: &mut BuildState<'_>,
        tasks: &mut tokio::task::JoinSet<FinishedStep>,
    ) -> Result<()> {
        let mut i = 0;
        while i < st.runnable.len() {
            let step = &set.steps[st.runnable[i].idx];
            let Some(grant) = st.admission.try_admit(step) else {
                i += 1;
                continue;
            };
            let r = st.runnable.remove(i).expect("index in range");
            st.reporter.started(&step.id, &r.reason);
            let mut request = self.request(set, step, &r.key, opts, st)?;
            request.device = grant.devices.first().copied();
            let task = Task {
                idx: r.idx,
                key: r.key,
                comps: r.comps,
                reason: r.reason,
                grant,
                request,
                cache: self.cache.clone(),
                executor: self.executor.clone(),
                remeasure: opts.remeasure,
            };
            tasks.spawn_blocking(move || task.run());
        }
        Ok(())
    }

    /// A task ended: release its resources, store and report its outcome.
    fn finish(
        &self,
        set: &PipelineSet,
        opts: &BuildOptions,
        st: &mut BuildState<'_>,
        finished: FinishedStep,
    ) -> Result<()> {
        st.admission.release(&finished.grant);
        let step = &set.steps[finished.idx];
        let out = match finished.outcome {
            TaskOutcome::FoundCached(rec) => {
                st.dirs
                    .give_back(finished.out_dir, step.kind == StepKind::Command);
                return self.settle_cached(
                    step,
                    finished.idx,
                    *rec,
                    finished.key,
                    &finished.comps,
                    opts,
                    st,
                );
            }
            TaskOutcome::Ran(out) => out,
        };
        let ms = finished.duration_ms;
        // The step's files are moved into the CAS before its folder goes.
        let stored = self.store(step, &finished.key, &finished.comps, &out, ms);
        st.dirs
            .give_back(finished.out_dir, step.kind == StepKind::Command);
        let stored = stored?;
        st.persister.ran(
            stored.record,
            stored.samples,
            &step.id,
            &finished.key,
            out.status,
            ms,
        )?;
        if out.status.stops_build() && !opts.keep_going {
            st.stop = true;
        }
        st.reporter.settled(
            finished.idx,
            step,
            Settled::Ran,
            out.status,
            &finished.key,
            ms,
            finished.reason,
            stored.result.clone(),
        );
        self.settle(
            st,
            finished.idx,
            stored.digest,
            out.status,
            stored.result,
            finished.key,
        );
        Ok(())
    }

    /// Store a fresh output's files in the CAS and prepare its record as the cache policy
    /// allows (the persister writes it).
    fn store(
        &self,
        step: &Step,
        key: &str,
        comps: &KeyComponents,
        out: &StepOutput,
        ms: f64,
    ) -> Result<Stored> {
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
        let mut samples = None;
        if step.kind.is_measurement() && out.status == StepStatus::Ok {
            if let Some(p) = typed::<ProfileResult>(&result) {
                pool_samples(&self.cache.db.samples(key)?, &p.samples_ms, &mut result);
                samples = Some((p.samples_ms, p.wall_samples_ms));
            }
        }
        let keep = match step.cache {
            CachePolicy::Never => false,
            CachePolicy::All => out.status != StepStatus::Cancelled,
            CachePolicy::Results => !out.infra,
        };
        if !keep {
            // An earlier record under this key (if any) is what dependants keep seeing.
            let digest = match self.cache.db.get_action(key)? {
                Some(r) => r.output_digest,
                None => output_digest(&result, &BTreeMap::new()),
            };
            return Ok(Stored {
                result,
                digest,
                record: None,
                samples,
            });
        }
        let digest = output_digest(&result, &files);
        let record = ActionRecord {
            key: key.to_string(),
            step_id: step.id.clone(),
            kind: step.kind.as_str().into(),
            status: out.status.as_str().into(),
            output_digest: digest.clone(),
            result: result.clone(),
            files,
            components: comps.clone(),
            created_at: crate::cache::db::now(),
            duration_ms: ms,
        };
        Ok(Stored {
            result,
            digest,
            record: Some(record),
            samples,
        })
    }
}

/// Re-measurements accumulate: with samples from earlier runs under the key, the result also
/// carries the pooled figures.
fn pool_samples(earlier: &[(i64, f64)], current: &[f64], result: &mut Value) {
    let runs: HashSet<i64> = earlier.iter().map(|(r, _)| *r).collect();
    if runs.is_empty() {
        return;
    }
    let mut v: Vec<f64> = earlier.iter().map(|(_, x)| *x).collect();
    v.extend_from_slice(current);
    if v.is_empty() {
        return;
    }
    if let Value::Object(m) = result {
        m.insert("measurements".into(), json!(runs.len() + 1));
        m.insert("pooled_median_ms".into(), json!(crate::stats::median(&v)));
        m.insert("pooled_samples".into(), json!(v.len()));
    }
}
