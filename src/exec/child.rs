//! Running a child process under a wall-clock limit, a cancellation flag and a memory limit.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::CancelFlag;

#[derive(Debug)]
pub enum Ended {
    Exited(ExitStatus),
    TimedOut,
    Cancelled,
    OutOfMemory { rss_mb: u64 },
}

/// Kill a child, its whole process group (children are started in their own group) and every
/// descendant still attached to it (those that left the group with `setsid` included).
pub fn kill_group(pid: u32) {
    let all = tree(pid);
    unsafe {
        libc::kill(-(pid as i32), libc::SIGKILL);
        for p in all {
            libc::kill(p as i32, libc::SIGKILL);
        }
    }
}

/// The direct children of a process (all its threads' children; Linux).
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(t.path().join("children")) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
    }
    out
}

/// A process and all its descendants (a sandboxed worker is bwrap -> bwrap -> python).
pub fn tree(pid: u32) -> Vec<u32> {
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() && out.len() < 4096 {
        let kids = children(out[i]);
        for k in kids {
            if !out.contains(&k) {
                out.push(k);
            }
        }
        i += 1;
    }
    out
}

/// Resident memory of a process and all its descendants, in MiB (Linux; 0 elsewhere).
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
    }
    tree(pid).into_iter().map(one).sum::<u64>() / 1024
}

/// Make `cmd`'s process die when jb dies (even by SIGKILL): `PR_SET_PDEATHSIG` in the child,
/// and no core dumps. Spawn it with [`spawn_tied`]: the death signal follows the spawning
/// *thread*, so the spawn must happen on a thread that lives as long as jb.
pub fn die_with_jb(cmd: &mut Command) {
    die_with_jb_keeping(cmd, None);
}

/// [`die_with_jb`], but the descriptor `keep` (say the seccomp filter that bubblewrap reads with
/// `--seccomp FD`) stays open across the exec; every other descriptor from 3 up is still closed.
pub fn die_with_jb_keeping(cmd: &mut Command, keep: Option<i32>) {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: only async-signal-safe calls (prctl, getppid, setrlimit, _exit) after fork.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            // jb died between fork and prctl: the signal will never come.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            let core = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &core);
            // No descriptor of jb's (the run database, sockets) survives the exec, whatever
            // flags it was opened with: close_range(3, ~0, CLOSE_RANGE_CLOEXEC).
            const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
            libc::syscall(
                libc::SYS_close_range,
                3 as libc::c_uint,
                libc::c_uint::MAX,
                CLOSE_RANGE_CLOEXEC,
            );
            if let Some(fd) = keep {
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

type SpawnJob = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Spawn `cmd` tied to jb's life ([`die_with_jb`]) from a thread that never exits, so a pooled
/// worker does not die with the (short-lived) scheduler thread that happened to start it.
pub fn spawn_tied(cmd: Command) -> std::io::Result<Child> {
    spawn_tied_keeping(cmd, None)
}

/// [`spawn_tied`], keeping the descriptor `keep` open in the child ([`die_with_jb_keeping`]).
pub fn spawn_tied_keeping(mut cmd: Command, keep: Option<i32>) -> std::io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnJob>>> = OnceLock::new();
    die_with_jb_keeping(&mut cmd, keep);
    let tx = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("jb-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("start the spawner thread");
        Mutex::new(tx)
    });
    let (reply_tx, reply_rx) = mpsc::channel();
    tx.lock()
        .unwrap_or_else(|p| p.into_inner())
        .send((cmd, reply_tx))
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?;
    reply_rx
        .recv()
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?
}

/// Resolves on the first SIGINT, SIGTERM or SIGHUP: jb treats all three as an interrupt.
pub async fn termination_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).ok();
    let mut hup = signal(SignalKind::hangup()).ok();
    let wait = |s: &mut Option<tokio::signal::unix::Signal>| {
        let s = s.take();
        async move {
            match s {
                Some(mut s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = wait(&mut term) => {}
        _ = wait(&mut hup) => {}
    }
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
