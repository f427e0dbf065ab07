//! What every agent offers: one completion for one prompt, with typed errors that say whether
//! the run must stop and whether the outcome may be cached.

use std::time::Duration;

use serde::Serialize;
use serde_json::{json, Value};

use crate::exec::CancelFlag;

/// Sampling parameters: part of every response's cache key.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sampling {
    pub temperature: f64,
    pub max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Sent as `seed` where given (each sample gets the run's seed plus its number).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

impl Default for Sampling {
    fn default() -> Self {
        Sampling {
            temperature: 1.0,
            max_tokens: 16384,
            top_p: None,
            seed: None,
        }
    }
}

impl Sampling {
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or_else(|_| json!({}))
    }
}

/// One request for one sample.
#[derive(Debug, Clone)]
pub struct ChatRequest<'a> {
    pub system: &'a str,
    pub user: &'a str,
    pub sampling: &'a Sampling,
    /// The workload (folder name).
    pub workload: &'a str,
    /// The sample's stable tag within its workload and method (`3`, `c2.t5`, `i1.e0.k4`).
    pub tag: &'a str,
    /// The sample's position within its workload (0-based, in the method's order).
    pub number: usize,
}

/// An answer.
#[derive(Debug, Clone, Default)]
pub struct Completion {
    pub content: String,
    /// The model the endpoint says answered.
    pub model: Option<String>,
    pub finish_reason: Option<String>,
    /// Token usage as the endpoint reported it.
    pub usage: Value,
    /// Requests sent for this answer (1 + retries).
    pub attempts: u32,
    pub elapsed: Duration,
}

/// Why an agent gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// Nothing listens at the endpoint (connection refused, unknown host).
    #[error("cannot reach the agent endpoint {url}: {message}")]
    Unreachable { url: String, message: String },
    /// The endpoint kept failing (429, 5xx, timeouts) through every retry.
    #[error("the agent endpoint {url} failed {attempts} times; last: {last}")]
    Unavailable {
        url: String,
        attempts: u32,
        last: String,
    },
    /// The endpoint refuses this configuration (bad key, unknown model or path): 401/403/404.
    #[error("the agent endpoint {url} refused the request (HTTP {status}): {body}")]
    Refused {
        url: String,
        status: u16,
        body: String,
    },
    /// The endpoint rejected this prompt (HTTP 400/413/422, e.g. too long): an `api_error`
    /// outcome of the sample, deterministic, so it is cached.
    #[error("HTTP {status}: {body}")]
    Rejected { status: u16, body: String },
    /// A 200 answer without usable content.
    #[error("malformed answer: {0}")]
    BadResponse(String),
    /// The agent command failed.
    #[error("agent command: {0}")]
    Command(String),
    /// The answers folder has no answer for a sample.
    #[error("answers: {0}")]
    Answers(String),
    #[error("interrupted")]
    Cancelled,
}

impl AgentError {
    /// Errors after which no further sample can succeed: the run stops (exit code 3) and can be
    /// resumed later from the cache.
    pub fn aborts_run(&self) -> bool {
        matches!(
            self,
            AgentError::Unreachable { .. }
                | AgentError::Unavailable { .. }
                | AgentError::Refused { .. }
                | AgentError::Answers(_)
                | AgentError::Cancelled
        )
    }

    /// Errors that are the sample's own outcome and deterministic: cached like an answer.
    pub fn cacheable(&self) -> bool {
        matches!(self, AgentError::Rejected { .. })
    }
}

/// A source of answers.
pub trait Agent: Send + Sync {
    /// What identifies this agent in cache keys: its kind and model (and command). Never a
    /// secret, never the endpoint's address.
    fn identity(&self) -> Value;
    /// Whether answers are cached (reading a file is not a request worth caching).
    fn caches(&self) -> bool {
        true
    }
    /// One answer for one request.
    fn complete(&self, req: &ChatRequest, cancel: &CancelFlag) -> Result<Completion, AgentError>;
    /// Requests sent so far by this process (retries included).
    fn requests_sent(&self) -> u64;
    /// A short description for messages.
    fn describe(&self) -> String;
}

/// Sleep for `d`, waking early when cancelled; false if cancelled.
pub fn sleep_unless_cancelled(d: Duration, cancel: &CancelFlag) -> bool {
    let end = std::time::Instant::now() + d;
    loop {
        if cancel.is_cancelled() {
            return false;
        }
        let now = std::time::Instant::now();
        if now >= end {
            return true;
        }
        std::thread::sleep((end - now).min(Duration::from_millis(100)));
    }
}
