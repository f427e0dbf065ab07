//! An external command as the agent: `sh -c CMD` gets the prompt on stdin (the system part, a
//! blank line, the user part) and writes its answer on stdout. The sample is described in the
//! environment: `JB_AGENT_WORKLOAD`, `JB_AGENT_SAMPLE` (its tag), `JB_AGENT_NUMBER`,
//! `JB_AGENT_MODEL`, `JB_AGENT_TEMPERATURE`, `JB_AGENT_MAX_TOKENS`.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::agent::{Agent, AgentError, ChatRequest, Completion};
use crate::exec::child::{self, Ended};
use crate::exec::CancelFlag;

pub struct CommandAgent {
    pub command: String,
    pub model: String,
    pub timeout: Duration,
    pub cwd: std::path::PathBuf,
    requests: AtomicU64,
}

impl CommandAgent {
    pub fn new(command: &str, model: &str, timeout: Duration, cwd: &std::path::Path) -> Self {
        CommandAgent {
            command: command.to_string(),
            model: model.to_string(),
            timeout,
            cwd: cwd.to_path_buf(),
            requests: AtomicU64::new(0),
        }
    }
}

fn tail(text: &str, lines: usize) -> String {
    let v: Vec<&str> = text.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

impl Agent for CommandAgent {
    fn identity(&self) -> Value {
        json!({"kind": "command", "command": self.command, "model": self.model})
    }

    fn describe(&self) -> String {
        format!("command `{}`", self.command)
    }

    fn requests_sent(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }

    fn complete(&self, req: &ChatRequest, cancel: &CancelFlag) -> Result<Completion, AgentError> {
        let started = Instant::now();
        let dir = tempfile::tempdir().map_err(|e| AgentError::Command(e.to_string()))?;
        let out_path = dir.path().join("stdout");
        let err_path = dir.path().join("stderr");
        let (out, err) = match (
            std::fs::File::create(&out_path),
            std::fs::File::create(&err_path),
        ) {
            (Ok(o), Ok(e)) => (o, e),
            _ => return Err(AgentError::Command("cannot create temporary files".into())),
        };
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(&self.command)
            .current_dir(&self.cwd)
            .env("JB_AGENT_WORKLOAD", req.workload)
            .env("JB_AGENT_SAMPLE", req.tag)
            .env("JB_AGENT_NUMBER", req.number.to_string())
            .env("JB_AGENT_MODEL", &self.model)
            .env("JB_AGENT_TEMPERATURE", req.sampling.temperature.to_string())
            .env("JB_AGENT_MAX_TOKENS", req.sampling.max_tokens.to_string())
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(err)
            .process_group(0);
        self.requests.fetch_add(1, Ordering::SeqCst);
        let mut child = cmd
            .spawn()
            .map_err(|e| AgentError::Command(format!("cannot start `sh`: {e}")))?;
        let prompt = format!("{}\n\n{}", req.system, req.user);
        let stdin = child.stdin.take();
        let writer = std::thread::spawn(move || {
            if let Some(mut s) = stdin {
                // A command that does not read its stdin closes the pipe: not an error.
                let _ = s.write_all(prompt.as_bytes());
            }
        });
        let ended = child::wait(child, Some(self.timeout), None, cancel);
        let _ = writer.join();
        let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
        match ended {
            Ended::Exited(s) if s.success() => {
                let content = std::fs::read(&out_path)
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .map_err(|e| AgentError::Command(e.to_string()))?;
                Ok(Completion {
                    content,
                    model: Some(self.model.clone()),
                    finish_reason: Some("stop".into()),
                    usage: Value::Null,
                    attempts: 1,
                    elapsed: started.elapsed(),
                })
            }
            Ended::Exited(s) => Err(AgentError::Command(format!(
                "`{}` exited with {s}: {}",
                self.command,
                tail(&stderr, 20)
            ))),
            Ended::TimedOut => Err(AgentError::Command(format!(
                "`{}` took longer than {:.0} s",
                self.command,
                self.timeout.as_secs_f64()
            ))),
            Ended::Cancelled => Err(AgentError::Cancelled),
            Ended::OutOfMemory { rss_mb } => Err(AgentError::Command(format!(
                "`{}` exceeded the memory limit ({rss_mb} MiB)",
                self.command
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::Sampling;

    fn req<'a>(s: &'a Sampling) -> ChatRequest<'a> {
        ChatRequest {
            system: "SYSTEM",
            user: "USER",
            sampling: s,
            workload: "12p_RMSNorm",
            tag: "c1.t0",
            number: 4,
        }
    }

    #[test]
    fn prompt_on_stdin_answer_on_stdout() {
        let s = Sampling::default();
        let dir = tempfile::tempdir().unwrap();
        let a = CommandAgent::new(
            "cat; echo; echo \"$JB_AGENT_WORKLOAD $JB_AGENT_SAMPLE $JB_AGENT_NUMBER\"",
            "m",
            Duration::from_secs(20),
            dir.path(),
        );
        let c = a.complete(&req(&s), &CancelFlag::default()).unwrap();
        assert!(c.content.starts_with("SYSTEM\n\nUSER"), "{}", c.content);
        assert!(c.content.contains("12p_RMSNorm c1.t0 4"));
        assert_eq!(a.requests_sent(), 1);
    }

    #[test]
    fn failure_and_timeout_are_errors() {
        let s = Sampling::default();
        let dir = tempfile::tempdir().unwrap();
        let a = CommandAgent::new(
            "echo broken >&2; exit 3",
            "m",
            Duration::from_secs(20),
            dir.path(),
        );
        match a.complete(&req(&s), &CancelFlag::default()) {
            Err(AgentError::Command(m)) => assert!(m.contains("broken"), "{m}"),
            other => panic!("{other:?}"),
        }
        let a = CommandAgent::new("sleep 5", "m", Duration::from_millis(300), dir.path());
        assert!(matches!(
            a.complete(&req(&s), &CancelFlag::default()),
            Err(AgentError::Command(_))
        ));
    }
}
