//! The end of a child's stderr, kept in memory: a thread drains the pipe (so a chatty command
//! never blocks on it) and keeps the last [`KEEP`] bytes. A command step reports the last lines
//! on failure; nothing is written to disk (creating two log files per step was a large part of a
//! cold build's time).

use std::io::Read;
use std::process::ChildStderr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Bytes of stderr kept.
pub const KEEP: usize = 64 * 1024;

/// A running drain of one pipe.
pub struct StderrTail {
    buf: Arc<Mutex<Vec<u8>>>,
    done: std::sync::mpsc::Receiver<()>,
}

impl StderrTail {
    pub fn start(mut pipe: ChildStderr) -> Self {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let (tx, done) = std::sync::mpsc::channel();
        let shared = buf.clone();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 8192];
            while let Ok(n) = pipe.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                let mut b = shared.lock().unwrap_or_else(|p| p.into_inner());
                b.extend_from_slice(&chunk[..n]);
                if b.len() > 2 * KEEP {
                    let cut = b.len() - KEEP;
                    b.drain(..cut);
                }
            }
            let _ = tx.send(());
        });
        StderrTail { buf, done }
    }

    /// The last `lines` lines, once the pipe closed (or after `grace`: a descendant that left
    /// the process group may hold the pipe open for ever).
    pub fn lines(self, lines: usize, grace: Duration) -> String {
        let _ = self.done.recv_timeout(grace);
        let b = self.buf.lock().unwrap_or_else(|p| p.into_inner());
        let start = b.len().saturating_sub(KEEP);
        let text = String::from_utf8_lossy(&b[start..]);
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    #[test]
    fn keeps_the_last_lines_of_a_long_stream() {
        let mut child = Command::new("/bin/sh")
            .arg("-c")
            .arg("i=0; while [ $i -lt 20000 ]; do echo line $i >&2; i=$((i+1)); done")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let tail = StderrTail::start(child.stderr.take().unwrap());
        assert!(child.wait().unwrap().success());
        let text = tail.lines(3, Duration::from_secs(5));
        assert_eq!(text, "line 19997\nline 19998\nline 19999");
    }
}
