//! `jb cache stats|gc|clean`.

use std::collections::HashSet;

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
    /// Drop records that no step uses any more and blobs nothing refers to.
    Gc,
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
        CacheAction::Gc => {
            let live: HashSet<String> = cache.db.latest_keys()?.into_iter().collect();
            let mut dropped = 0;
            let mut referenced = HashSet::new();
            for (key, _, files) in cache.db.all_actions()? {
                if live.contains(&key) {
                    referenced.extend(files.into_values());
                } else {
                    cache.db.delete_action(&key)?;
                    dropped += 1;
                }
            }
            let mut freed = 0u64;
            let mut removed = 0;
            for (digest, size) in cache.cas.list() {
                if !referenced.contains(&digest) {
                    cache.cas.remove(&digest);
                    freed += size;
                    removed += 1;
                }
            }
            crate::engine::locks::prune_key_locks(&project.cache_dir);
            let tmp = project.cache_dir.join("tmp");
            if let Ok(entries) = std::fs::read_dir(&tmp) {
                for e in entries.flatten() {
                    let _ = std::fs::remove_dir_all(e.path())
                        .or_else(|_| std::fs::remove_file(e.path()));
                }
            }
            println!(
                "gc: dropped {dropped} stale records and {removed} blobs ({:.1} MiB)",
                freed as f64 / 1048576.0
            );
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
