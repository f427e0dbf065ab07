//! Running a child process under a wall-clock limit, a cancellation flag and a memory limit.

use std::process::{Child, ExitStatus};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::CancelFlag;

#[derive(Debug)]
pub enum Ended {
    Exited(ExitStatus),
    TimedOut,
    Cancelled,
    OutOfMemory { rss_mb: u64 },
}

/// Kill a child and its whole process group (children are started in their own group).
pub fn kill_group(pid: u32) {
    unsafe {
        libc::kill(-(pid as i32), libc::SIGKILL);
        libc::kill(pid as i32, libc::SIGKILL);
    }
}

/// Resident memory of a process and its direct children, in MiB (Linux; 0 elsewhere).
pub fn rss_mb(pid: u32) -> u64 {
    fn one(pid: u32) -> u64 {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| {
                    l.split_whitespace()
                        .nth(1)
                        .and_then(|v| v.parse::<u64>().ok())
                })
            })
            .unwrap_or(0)
            / 1024
    }
    let mut total = one(pid);
    if let Ok(children) = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")) {
        for c in children
            .split_whitespace()
            .filter_map(|c| c.parse::<u32>().ok())
        {
            total += one(c);
        }
    }
    total
}

/// Wait for `child`, killing its group on timeout, cancellation or memory excess.
pub fn wait(
    mut child: Child,
    timeout: Option<Duration>,
    memory_mb: Option<u64>,
    cancel: &CancelFlag,
) -> Ended {
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let start = Instant::now();
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(Ok(status)) => {
                kill_group(pid); // leftovers of the group
                return Ended::Exited(status);
            }
            Ok(Err(_)) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                kill_group(pid);
                return Ended::Cancelled;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        let verdict = if cancel.is_cancelled() {
            Some(Ended::Cancelled)
        } else if timeout.is_some_and(|t| start.elapsed() > t) {
            Some(Ended::TimedOut)
        } else if let Some(limit) = memory_mb {
            let rss = rss_mb(pid);
            (rss > limit).then_some(Ended::OutOfMemory { rss_mb: rss })
        } else {
            None
        };
        if let Some(v) = verdict {
            kill_group(pid);
            let _ = rx.recv_timeout(Duration::from_secs(5));
            return v;
        }
    }
}
