//! Settings with one definition each: the default step limits and every `JB_*` environment
//! variable jb reads or sets.
//!
//! `jb --help` prints [`env_help`], `docs/environment.md` is [`env_markdown`] (a test keeps the
//! file equal to it), and a test scans `src/` and `python/jb/` so that a `JB_*` name used
//! anywhere is listed here, and nothing listed here is unused.

use std::time::Duration;

/// A step's timeout when neither the step nor its pipeline sets one.
pub const DEFAULT_STEP_TIMEOUT_S: u64 = 1800;

/// [`DEFAULT_STEP_TIMEOUT_S`] as a duration.
pub fn default_step_timeout() -> Duration {
    Duration::from_secs(DEFAULT_STEP_TIMEOUT_S)
}

/// Who reads a variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// The user sets it; jb reads it.
    Read,
    /// jb sets it for what it runs (a command step, the worker, an agent command).
    Set,
}

/// One environment variable of jb's.
#[derive(Debug, Clone, Copy)]
pub struct EnvVar {
    pub name: &'static str,
    pub direction: Direction,
    pub meaning: &'static str,
}

const fn read(name: &'static str, meaning: &'static str) -> EnvVar {
    EnvVar {
        name,
        direction: Direction::Read,
        meaning,
    }
}

const fn set(name: &'static str, meaning: &'static str) -> EnvVar {
    EnvVar {
        name,
        direction: Direction::Set,
        meaning,
    }
}

/// Every `JB_*` variable, users' first.
pub const ENV: &[EnvVar] = &[
    read(
        "JB_CACHE_DIR",
        "the cache folder (--cache-dir; default <project>/cache)",
    ),
    read(
        "JB_PYENV",
        "the Python environment to use instead of jb's own (--pyenv)",
    ),
    read(
        "JB_BASE_PYTHON",
        "the Python jb builds its environment from (default: newest >= 3.12)",
    ),
    read("JB_EXECUTOR", "where steps run: local or ray (--executor)"),
    read(
        "JB_RAY_ADDRESS",
        "the Ray cluster's address (--ray-address)",
    ),
    read(
        "JB_LOG",
        "filter of jb's own log on stderr (default warn; e.g. debug)",
    ),
    read(
        "JB_DIAGNOSTICS",
        "pipeline errors' rendering: fancy or plain",
    ),
    read(
        "JB_SALT",
        "a string mixed into every step key (forces a rebuild of everything)",
    ),
    read(
        "JB_BWRAP",
        "the bubblewrap binary to sandbox candidates with",
    ),
    read(
        "JB_SANDBOX_SCRATCH_MB",
        "a sandbox's scratch-disk limit in MiB",
    ),
    read(
        "JB_PRESTART",
        "0: do not start the next candidate's sandboxed export worker ahead (default 1)",
    ),
    read(
        "JB_PYTHON_DIR",
        "jb's Python package folder (default <project>/python)",
    ),
    read(
        "JB_DETECT_ROOT",
        "the root under which accelerators' device nodes are looked for (tests)",
    ),
    read(
        "JB_GPU_PLATFORM",
        "the GPU platform to export for (cuda or rocm)",
    ),
    read(
        "JB_RAY_TRACE",
        "a file the Ray driver appends its timeline to (measurements)",
    ),
    read(
        "JB_RAY_NODE_DIR",
        "a Ray node's folder for blobs and trees (default <tmp>/jb-ray-node)",
    ),
    read(
        "JB_RAY_NODE_ID",
        "a Ray node's name in results (default: Ray's node id)",
    ),
    read(
        "JB_BIN",
        "the jb binary scripts and benchmarks run (default target/release/jb)",
    ),
    set("JB_STEP", "a command step's id"),
    set("JB_OUT_DIR", "a command step's output folder"),
    set("JB_SCALE", "the session's scale (tiny, cpu, paper)"),
    set("JB_BACKEND", "the session's backend (cpu, tpu, gpu)"),
    set("JB_SANDBOXED", "1 inside the candidate sandbox"),
    set("JB_AGENT_WORKLOAD", "an agent command's workload"),
    set("JB_AGENT_SAMPLE", "an agent command's sample tag"),
    set("JB_AGENT_NUMBER", "an agent command's sample number"),
    set("JB_AGENT_MODEL", "an agent command's model name"),
    set(
        "JB_AGENT_TEMPERATURE",
        "an agent command's sampling temperature",
    ),
    set("JB_AGENT_MAX_TOKENS", "an agent command's token limit"),
];

/// Prefix of the variables a command step gets for its `vars` (`JB_VAR_<name>`).
pub const VAR_PREFIX: &str = "JB_VAR_";

/// The variable named `name`, if jb has one.
pub fn env_var(name: &str) -> Option<&'static EnvVar> {
    ENV.iter().find(|v| v.name == name)
}

/// The environment section of `jb --help`.
pub fn env_help() -> String {
    let mut out = String::from("Environment (read by jb):\n");
    let width = ENV.iter().map(|v| v.name.len()).max().unwrap_or(0);
    for dir in [Direction::Read, Direction::Set] {
        if dir == Direction::Set {
            out.push_str("\nEnvironment (set by jb for what it runs):\n");
        }
        for v in ENV.iter().filter(|v| v.direction == dir) {
            out.push_str(&format!("  {:width$}  {}\n", v.name, v.meaning));
        }
    }
    out.push_str(&format!(
        "  {:width$}  a command step's `vars`, one variable each\n",
        format!("{VAR_PREFIX}<name>")
    ));
    out.push_str(&format!(
        "\nA step without a timeout gets {DEFAULT_STEP_TIMEOUT_S} s."
    ));
    out
}

/// `docs/environment.md`.
pub fn env_markdown() -> String {
    let mut out = String::from(
        "# Environment variables\n\n<!-- generated from src/settings.rs; `cargo test --lib settings` checks it -->\n\n",
    );
    for (dir, title) in [
        (Direction::Read, "Read by jb"),
        (Direction::Set, "Set by jb for what it runs"),
    ] {
        out.push_str(&format!(
            "## {title}\n\n| variable | meaning |\n|---|---|\n"
        ));
        for v in ENV.iter().filter(|v| v.direction == dir) {
            out.push_str(&format!("| `{}` | {} |\n", v.name, v.meaning));
        }
        out.push('\n');
    }
    out.push_str(&format!(
        "`{VAR_PREFIX}<name>`: a command step's `vars`, one variable each.\n\n\
         A step without a timeout gets {DEFAULT_STEP_TIMEOUT_S} s.\n"
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::path::Path;

    static NAME: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"\bJB_[A-Z_]+").unwrap());

    fn names_in(dir: &Path, out: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                names_in(&path, out);
                continue;
            }
            let ext = path.extension().and_then(|e| e.to_str());
            if !matches!(ext, Some("rs") | Some("py")) || path.ends_with("settings.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            out.extend(
                NAME.find_iter(&text)
                    .map(|m| m.as_str())
                    .filter(|n| !n.starts_with(VAR_PREFIX))
                    .map(|n| n.trim_end_matches('_').to_string()),
            );
        }
    }

    #[test]
    fn every_jb_variable_in_the_sources_is_registered_and_every_registered_one_is_used() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut used = BTreeSet::new();
        names_in(&root.join("src"), &mut used);
        names_in(&root.join("python/jb"), &mut used);
        let registered: BTreeSet<String> = ENV.iter().map(|v| v.name.to_string()).collect();
        let unknown: Vec<_> = used.difference(&registered).collect();
        assert!(
            unknown.is_empty(),
            "JB_ variables not in src/settings.rs: {unknown:?}"
        );
        let unused: Vec<_> = registered.difference(&used).collect();
        assert!(unused.is_empty(), "registered but never used: {unused:?}");
        assert_eq!(registered.len(), ENV.len(), "a variable registered twice");
    }

    #[test]
    fn the_environment_doc_is_generated_from_the_registry() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/environment.md");
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        if on_disk != env_markdown() && std::env::var_os("JB_BLESS").is_some() {
            std::fs::write(&path, env_markdown()).unwrap();
            return;
        }
        assert_eq!(
            on_disk,
            env_markdown(),
            "docs/environment.md is stale: run `JB_BLESS=1 cargo test --lib settings`"
        );
    }

    #[test]
    fn help_names_every_variable() {
        let help = env_help();
        for v in ENV {
            assert!(help.contains(v.name), "{}", v.name);
        }
        assert!(env_var("JB_PYENV").is_some() && env_var("JB_NOPE").is_none());
    }
}
