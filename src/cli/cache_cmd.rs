//! `jb cache stats|gc|clean`.

use clap::{Args, Subcommand};

use crate::cache::Cache;
use crate::error::exit;

use super::GlobalOpts;
use crate::session;

#[derive(Debug, Args)]
pub struct CacheArgs {
    #[command(subcommand)]
    pub action: CacheAction,
}

#[derive(Debug, Subcommand)]
pub enum CacheAction {
    /// Sizes and counts.
    Stats,
    /// Drop records superseded in their slot (the same step at the same scale, backend and
    /// parameters has a newer one) and blobs nothing kept refers to. Results of every scale and
    /// of every candidate file are kept.
    Gc {
        /// Say what would be dropped, and drop nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Remove every cached result (the Python environment is kept).
    Clean,
}

pub fn run(global: &GlobalOpts, args: CacheArgs) -> anyhow::Result<i32> {
    let project = session::project(&global.session())?;
    let cache = Cache::open(&project.cache_dir)?;
    match args.action {
        CacheAction::Stats => {
            let s = cache.stats()?;
            if global.json {
                println!("{}", serde_json::to_string_pretty(&s)?);
            } else {
                println!("cache {}", s.cache_dir.display());
                println!(
                    "  blobs: {} ({:.1} MiB)",
                    s.blobs,
                    s.blob_bytes as f64 / 1048576.0
                );
                println!("  database: {:.1} MiB", s.db_bytes as f64 / 1048576.0);
                for (t, n) in s.tables {
                    println!("  {t}: {n}");
                }
            }
        }
        CacheAction::Gc { dry_run } => {
            let plan = crate::cache::gc::plan(&cache)?;
            if !dry_run {
                crate::cache::gc::apply(&cache, &plan)?;
                crate::engine::locks::prune_key_locks(&project.cache_dir);
                let tmp = project.cache_dir.join("tmp");
                if let Ok(entries) = std::fs::read_dir(&tmp) {
                    for e in entries.flatten() {
                        let _ = std::fs::remove_dir_all(e.path())
                            .or_else(|_| std::fs::remove_file(e.path()));
                    }
                }
            }
            if global.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&serde_json::json!({
                        "dry_run": dry_run,
                        "kept": plan.kept,
                        "dropped": plan.dropped,
                        "blobs": plan.blobs.len(),
                        "blob_bytes": plan.blob_bytes(),
                    }))?
                );
            } else {
                let verb = if dry_run { "would drop" } else { "dropped" };
                for d in &plan.dropped {
                    println!(
                        "  {verb} {} (scale {}, key {}): superseded by {}",
                        d.step_id,
                        d.scale,
                        short(&d.key),
                        short(&d.superseded_by)
                    );
                }
                println!(
                    "gc{}: {verb} {} superseded record(s) and {} blob(s) ({:.1} MiB), kept {} record(s)",
                    if dry_run { " --dry-run" } else { "" },
                    plan.dropped.len(),
                    plan.blobs.len(),
                    plan.blob_bytes() as f64 / 1048576.0,
                    plan.kept
                );
            }
        }
        CacheAction::Clean => {
            drop(cache);
            for name in [
                "cas",
                "tmp",
                "locks",
                "jb.sqlite",
                "jb.sqlite-wal",
                "jb.sqlite-shm",
                "fingerprint.json",
            ] {
                let p = project.cache_dir.join(name);
                let _ = std::fs::remove_dir_all(&p).or_else(|_| std::fs::remove_file(&p));
            }
            println!(
                "cleaned {} (the Python environment is kept)",
                project.cache_dir.display()
            );
        }
    }
    Ok(exit::OK)
}

/// A key's first 12 characters.
fn short(key: &str) -> &str {
    &key[..key.len().min(12)]
}
