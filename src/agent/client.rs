//! An OpenAI-compatible chat-completions endpoint (`POST {base}/chat/completions`), with retries
//! and exponential backoff on 429/5xx/timeouts that honour `Retry-After`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};

use super::agent::{sleep_unless_cancelled, Agent, AgentError, ChatRequest, Completion};
use super::backoff::{parse_retry_after, retryable_status, Backoff};
use crate::exec::CancelFlag;

pub struct OpenAiClient {
    base_url: String,
    model: String,
    /// Sent as a bearer token; never stored, logged or hashed into keys.
    api_key: Option<String>,
    backoff: Backoff,
    http: reqwest::blocking::Client,
    requests: AtomicU64,
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let t: String = s.chars().take(n).collect();
        format!("{t}...")
    }
}

/// The text of the first choice: a string, or the text parts of a list of parts.
pub fn answer_text(body: &Value) -> Result<String, AgentError> {
    let choice = body.get("choices").and_then(|c| c.get(0)).ok_or_else(|| {
        AgentError::BadResponse(format!(
            "no `choices` in the answer: {}",
            truncate(&body.to_string(), 300)
        ))
    })?;
    let content = choice.get("message").and_then(|m| m.get("content"));
    match content {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => Ok(parts
            .iter()
            .filter_map(|p| {
                p.get("text")
                    .and_then(Value::as_str)
                    .or_else(|| p.as_str())
                    .map(str::to_string)
            })
            .collect::<Vec<_>>()
            .join("")),
        _ => Err(AgentError::BadResponse(format!(
            "the first choice has no text content (finish_reason {})",
            choice.get("finish_reason").unwrap_or(&Value::Null)
        ))),
    }
}

impl OpenAiClient {
    /// `base_url` like `http://host:port/v1`; `timeout` bounds one request.
    pub fn new(
        base_url: &str,
        model: &str,
        api_key: Option<String>,
        timeout: Duration,
        backoff: Backoff,
    ) -> Result<OpenAiClient, AgentError> {
        let http = reqwest::blocking::Client::builder()
            .timeout(timeout)
            .connect_timeout(Duration::from_secs(30).min(timeout))
            .user_agent(concat!("jb/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| AgentError::Unreachable {
                url: base_url.to_string(),
                message: format!("cannot create an HTTP client: {e}"),
            })?;
        Ok(OpenAiClient {
            base_url: base_url.trim_end_matches('/').to_string(),
            model: model.to_string(),
            api_key: api_key.filter(|k| !k.is_empty()),
            backoff,
            http,
            requests: AtomicU64::new(0),
        })
    }

    pub fn url(&self) -> String {
        format!("{}/chat/completions", self.base_url)
    }

    pub fn body(&self, req: &ChatRequest) -> Value {
        let s = req.sampling;
        let mut body = json!({
            "model": self.model,
            "messages": [
                {"role": "system", "content": req.system},
                {"role": "user", "content": req.user},
            ],
            "temperature": s.temperature,
            "max_tokens": s.max_tokens,
        });
        if let Some(p) = s.top_p {
            body["top_p"] = json!(p);
        }
        if let Some(seed) = s.seed {
            body["seed"] = json!(seed);
        }
        body
    }
}

impl Agent for OpenAiClient {
    fn identity(&self) -> Value {
        json!({"kind": "openai", "model": self.model})
    }

    fn describe(&self) -> String {
        format!("{} at {}", self.model, self.base_url)
    }

    fn requests_sent(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }

    fn complete(&self, req: &ChatRequest, cancel: &CancelFlag) -> Result<Completion, AgentError> {
        let url = self.url();
        let body = self.body(req);
        let started = Instant::now();
        let mut last = String::new();
        let attempts = self.backoff.retries + 1;
        for attempt in 0..attempts {
            if cancel.is_cancelled() {
                return Err(AgentError::Cancelled);
            }
            let mut rb = self.http.post(&url).json(&body);
            if let Some(k) = &self.api_key {
                rb = rb.bearer_auth(k);
            }
            self.requests.fetch_add(1, Ordering::SeqCst);
            let mut retry_after = None;
            match rb.send() {
                Err(e) if e.is_connect() => {
                    return Err(AgentError::Unreachable {
                        url,
                        message: error_chain(&e),
                    })
                }
                Err(e) => last = format!("request failed: {}", error_chain(&e)),
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    retry_after = resp
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| parse_retry_after(v, SystemTime::now()));
                    let text = match resp.text() {
                        Ok(t) => t,
                        Err(e) => {
                            last = format!("reading the answer failed: {}", error_chain(&e));
                            String::new()
                        }
                    };
                    if status == 200 && last.is_empty() {
                        let v: Value = serde_json::from_str(&text).map_err(|e| {
                            AgentError::BadResponse(format!(
                                "not JSON ({e}): {}",
                                truncate(&text, 300)
                            ))
                        })?;
                        let content = answer_text(&v)?;
                        let choice = &v["choices"][0];
                        return Ok(Completion {
                            content,
                            model: v.get("model").and_then(Value::as_str).map(str::to_string),
                            finish_reason: choice
                                .get("finish_reason")
                                .and_then(Value::as_str)
                                .map(str::to_string),
                            usage: v.get("usage").cloned().unwrap_or(Value::Null),
                            attempts: attempt + 1,
                            elapsed: started.elapsed(),
                        });
                    }
                    if last.is_empty() {
                        let body = truncate(text.trim(), 500);
                        if matches!(status, 401 | 403 | 404) {
                            return Err(AgentError::Refused { url, status, body });
                        }
                        if !retryable_status(status) {
                            return Err(AgentError::Rejected { status, body });
                        }
                        last = format!("HTTP {status}: {body}");
                    }
                }
            }
            if attempt + 1 < attempts {
                let delay = self.backoff.delay(attempt, retry_after);
                tracing::warn!(
                    "{url}: {last}; retry {} of {} in {:.1} s",
                    attempt + 1,
                    self.backoff.retries,
                    delay.as_secs_f64()
                );
                if !sleep_unless_cancelled(delay, cancel) {
                    return Err(AgentError::Cancelled);
                }
                last.clear();
            }
        }
        Err(AgentError::Unavailable {
            url,
            attempts,
            last,
        })
    }
}

/// An error with its causes (reqwest's top-level message alone is vague).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        let m = c.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        src = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::Sampling;

    #[test]
    fn answer_text_forms() {
        let v = json!({"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}]});
        assert_eq!(answer_text(&v).unwrap(), "hi");
        let v = json!({"choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}}]});
        assert_eq!(answer_text(&v).unwrap(), "ab");
        assert!(matches!(
            answer_text(&json!({"error": "x"})),
            Err(AgentError::BadResponse(_))
        ));
        assert!(matches!(
            answer_text(&json!({"choices": [{"message": {"content": null}}]})),
            Err(AgentError::BadResponse(_))
        ));
    }

    #[test]
    fn request_body_has_sampling_and_no_key() {
        let c = OpenAiClient::new(
            "http://h:1/v1/",
            "m",
            Some("secret".into()),
            Duration::from_secs(5),
            Backoff::default(),
        )
        .unwrap();
        assert_eq!(c.url(), "http://h:1/v1/chat/completions");
        let s = Sampling {
            temperature: 0.5,
            max_tokens: 100,
            top_p: Some(0.9),
            seed: Some(10),
        };
        let req = ChatRequest {
            system: "sys",
            user: "usr",
            sampling: &s,
            workload: "w",
            tag: "3",
            number: 3,
        };
        let b = c.body(&req);
        assert_eq!(b["model"], "m");
        assert_eq!(b["temperature"], 0.5);
        assert_eq!(b["max_tokens"], 100);
        assert_eq!(b["top_p"], 0.9);
        assert_eq!(b["seed"], 10);
        assert_eq!(b["messages"][0]["role"], "system");
        assert_eq!(b["messages"][1]["content"], "usr");
        assert!(!b.to_string().contains("secret"));
        assert!(!c.identity().to_string().contains("secret"));
    }
}
