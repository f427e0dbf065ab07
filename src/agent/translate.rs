//! The `translate` step: one request to the agent for one sample, run by the build engine so
//! that its answer is an action record like any other step's result. The step's key covers
//! exactly what the answer depends on — the prompt's digest, the agent's identity (kind and
//! model), the sampling parameters and the sample's tag — so a rerun, or a run resumed after a
//! crash, sends no request whose answer is already stored. The prompt, the raw answer and the
//! extracted candidate go into the CAS.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::{json, Value};

use super::agent::{Agent, ChatRequest, Sampling};
use super::extract::extract_code;
use super::prompt::Prompt;
use crate::cache::Cas;
use crate::engine::StepReport;
use crate::exec::dispatch::Handler;
use crate::exec::{StepOutput, StepRequest};
use crate::pipeline::{CachePolicy, PipelineFile, StepDef, StepKind};

/// One sample to translate.
#[derive(Debug, Clone)]
pub struct TranslateJob {
    pub workload: String,
    pub tag: String,
    pub number: usize,
    pub prompt: Prompt,
    /// This sample's sampling parameters (the seed, if any, already offset by `number`).
    pub sampling: Sampling,
}

/// What a translate step produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Translated {
    /// `ok` (code extracted), `no_code`, `api_error`, `error` (the run must stop), or the
    /// engine's `cancelled`/`not_run`.
    pub status: String,
    pub code: Option<String>,
    pub error: Option<String>,
    pub key: Option<String>,
    /// Answered from the cache (no request sent).
    pub cached: bool,
    pub usage: Value,
}

/// The step name of a sample: `<workload>-<tag>` with `.` as `-`.
pub fn step_name(workload: &str, tag: &str) -> String {
    let clean = |s: &str| {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '-'
                }
            })
            .collect::<String>()
    };
    format!("{}-{}", clean(workload), clean(tag))
}

/// The step's parameters: everything the answer depends on, and nothing else (no endpoint, no
/// key, no workload name beyond what the prompt says).
pub fn step_params(job: &TranslateJob, agent: &Value) -> Value {
    json!({
        "prompt": job.prompt.digest(),
        "agent": agent,
        "sampling": job.sampling.to_json(),
        "sample": job.tag,
    })
}

/// A generated pipeline with one translate step per job.
pub fn pipeline_spec(name: &str, jobs: &[TranslateJob], agent: &dyn Agent) -> PipelineFile {
    let identity = agent.identity();
    let cache = if agent.caches() {
        CachePolicy::Results
    } else {
        CachePolicy::Never
    };
    jobs.iter()
        .fold(PipelineFile::generated(name), |file, job| {
            file.step(
                step_name(&job.workload, &job.tag),
                StepDef::new(StepKind::Translate)
                    .description(format!("sample {} of {}", job.tag, job.workload))
                    .params(step_params(job, &identity))
                    .cache(cache),
            )
        })
}

fn write(
    dir: &std::path::Path,
    name: &str,
    text: &str,
    files: &mut BTreeMap<String, std::path::PathBuf>,
) {
    let p = dir.join(name);
    if std::fs::write(&p, text).is_ok() {
        files.insert(name.to_string(), p);
    }
}

/// Run one translate step: ask the agent, keep the prompt, the answer and the code.
pub fn run_step(agent: &dyn Agent, job: &TranslateJob, req: &StepRequest) -> StepOutput {
    let chat = ChatRequest {
        system: &job.prompt.system,
        user: &job.prompt.user,
        sampling: &job.sampling,
        workload: &job.workload,
        tag: &job.tag,
        number: job.number,
    };
    let mut files = BTreeMap::new();
    write(&req.out_dir, "prompt.md", &job.prompt.text(), &mut files);
    match agent.complete(&chat, &req.cancel) {
        Ok(c) => {
            write(&req.out_dir, "answer.md", &c.content, &mut files);
            let code = extract_code(&c.content);
            let mut result = json!({
                "usage": c.usage,
                "finish_reason": c.finish_reason,
                "model": c.model,
                "attempts": c.attempts,
                "request_ms": c.elapsed.as_secs_f64() * 1e3,
                "answer_chars": c.content.chars().count(),
            });
            let status = match &code {
                Some(code) => {
                    write(&req.out_dir, "candidate.py", code, &mut files);
                    result["code_lines"] = json!(code.lines().count());
                    "ok"
                }
                None => {
                    result["reasons"] = json!(["the answer has no ```python code block"]);
                    "no_code"
                }
            };
            let mut out = StepOutput::new(status, result);
            out.files = files;
            out
        }
        Err(e) if e.aborts_run() => {
            let status = if matches!(e, super::AgentError::Cancelled) {
                "cancelled"
            } else {
                "error"
            };
            let mut out = StepOutput::infra(status, e.to_string());
            out.result["abort"] = json!(true);
            out
        }
        Err(e) => {
            let mut out = StepOutput::new("api_error", json!({"reasons": [e.to_string()]}));
            out.infra = !e.cacheable();
            out.files = files;
            out
        }
    }
}

/// The engine's handler for a batch of jobs (by step name).
pub fn handler(agent: Arc<dyn Agent>, jobs: Arc<HashMap<String, TranslateJob>>) -> Handler {
    Box::new(move |req: &StepRequest| match jobs.get(&req.step.name) {
        Some(job) => run_step(agent.as_ref(), job, req),
        None => StepOutput::infra(
            "error",
            format!("no translate job for step {}", req.step.id),
        ),
    })
}

fn first_reason(result: &Value) -> Option<String> {
    result["reasons"]
        .as_array()
        .and_then(|a| a.first())
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// What each job's step produced, from the build's reports (and the CAS for the code).
pub fn collect(
    pipeline: &str,
    jobs: &[TranslateJob],
    reports: &[StepReport],
    cas: &Cas,
) -> Vec<Translated> {
    jobs.iter()
        .map(|job| {
            let id = format!("{pipeline}/{}", step_name(&job.workload, &job.tag));
            let Some(r) = reports.iter().find(|r| r.step == id) else {
                return Translated {
                    status: "not_run".into(),
                    code: None,
                    error: Some("the build stopped before this sample".into()),
                    key: None,
                    cached: false,
                    usage: Value::Null,
                };
            };
            let mut status = r.status.to_string();
            let mut error = first_reason(&r.result);
            let code = if status == "ok" {
                let digest = r.result["files"]["candidate.py"].as_str();
                match digest.map(|d| cas.get(d)) {
                    Some(Ok(bytes)) => Some(String::from_utf8_lossy(&bytes).into_owned()),
                    Some(Err(e)) => {
                        status = "error".into();
                        error = Some(format!("the candidate of {id} is unreadable: {e}"));
                        None
                    }
                    None => {
                        status = "error".into();
                        error = Some(format!("{id} kept no candidate file"));
                        None
                    }
                }
            } else {
                None
            };
            Translated {
                status,
                code,
                error,
                key: Some(r.key.clone()),
                cached: r.cached,
                usage: r.result.get("usage").cloned().unwrap_or(Value::Null),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::keys::{components, FileHashes, KeyContext};
    use crate::pipeline::{generated_pipeline, parse_pipeline};

    fn job(tag: &str, user: &str, temperature: f64) -> TranslateJob {
        TranslateJob {
            workload: "12p_RMSNorm".into(),
            tag: tag.into(),
            number: 0,
            prompt: Prompt {
                system: "s".into(),
                user: user.into(),
            },
            sampling: Sampling {
                temperature,
                ..Sampling::default()
            },
        }
    }

    struct Dummy(&'static str);
    impl Agent for Dummy {
        fn identity(&self) -> Value {
            json!({"kind": "openai", "model": self.0})
        }
        fn complete(
            &self,
            _req: &ChatRequest,
            _cancel: &crate::exec::CancelFlag,
        ) -> Result<crate::agent::Completion, crate::agent::AgentError> {
            unreachable!()
        }
        fn requests_sent(&self) -> u64 {
            0
        }
        fn describe(&self) -> String {
            String::new()
        }
    }

    /// The step's key for a job, as the engine computes it.
    fn key(j: &TranslateJob, model: &'static str) -> String {
        let spec = pipeline_spec("agent-x", std::slice::from_ref(j), &Dummy(model));
        let p = generated_pipeline("jb agent", spec).unwrap();
        let def = p.file.steps.values().next().unwrap();
        let step = crate::pipeline::Step {
            id: "x".into(),
            pipeline: "agent-x".into(),
            name: "x".into(),
            kind: def.kind,
            vars: Default::default(),
            params: def.params.clone(),
            inputs: vec![],
            outputs: vec![],
            run: None,
            deps: vec![],
            resources: Default::default(),
            timeout: None,
            memory_mb: None,
            cache: def.cache,
            salt: None,
            default: false,
            at: crate::error::Location {
                file: "x".into(),
                line: 1,
                column: 1,
            },
        };
        components(
            &step,
            std::path::Path::new("/"),
            &[],
            &KeyContext::default(),
            &mut FileHashes::default(),
        )
        .unwrap()
        .key()
    }

    #[test]
    fn key_covers_prompt_model_sampling_and_sample_only() {
        let base = key(&job("0", "u", 1.0), "m");
        assert_eq!(base, key(&job("0", "u", 1.0), "m"));
        assert_ne!(base, key(&job("1", "u", 1.0), "m"), "sample index");
        assert_ne!(base, key(&job("0", "v", 1.0), "m"), "prompt");
        assert_ne!(base, key(&job("0", "u", 0.5), "m"), "sampling");
        assert_ne!(base, key(&job("0", "u", 1.0), "n"), "model");
        let mut other_workload = job("0", "u", 1.0);
        other_workload.workload = "8p_GEMM".into();
        other_workload.number = 7;
        assert_eq!(
            base,
            key(&other_workload, "m"),
            "only what the request depends on"
        );
    }

    #[test]
    fn typed_pipeline_reads_back_from_its_yaml() {
        let jobs = [job("0", "u", 1.0), job("1", "u", 0.5)];
        let typed = pipeline_spec("agent-x", &jobs, &Dummy("m"));
        let text = serde_norway::to_string(&typed).unwrap();
        let parsed = parse_pipeline(std::path::Path::new("<t>"), &text).unwrap();
        assert_eq!(parsed.file, typed);
        assert_eq!(
            serde_json::to_string(&parsed.file).unwrap(),
            serde_json::to_string(&typed).unwrap()
        );
        let def = &typed.steps["12p_RMSNorm-1"];
        assert_eq!(def.kind, crate::pipeline::StepKind::Translate);
        assert_eq!(def.description.as_deref(), Some("sample 1 of 12p_RMSNorm"));
        assert!(!typed.default);
    }

    #[test]
    fn step_names_are_valid() {
        assert_eq!(step_name("12p_RMSNorm", "c0.t1"), "12p_RMSNorm-c0-t1");
        assert_eq!(step_name("8p_GEMM", "i1.e0.k4"), "8p_GEMM-i1-e0-k4");
    }
}
