//! `jb archive create OUT | verify FILE | import FILE`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::archive::{self, ArchiveError, CreateOptions};
use crate::cache::Cache;
use crate::error::exit;
use crate::project::absolute;

use super::session;
use super::GlobalOpts;

#[derive(Debug, Args)]
pub struct ArchiveArgs {
    #[command(subcommand)]
    pub action: ArchiveAction,
}

#[derive(Debug, Subcommand)]
pub enum ArchiveAction {
    /// Write the results (latest record of every step, their blobs and samples), the pipelines
    /// and the input sources to OUT (tar + zstd); the same results give the same bytes.
    Create {
        out: PathBuf,
        /// Every record in the cache, not only the latest of every step.
        #[arg(long)]
        all: bool,
        /// zstd compression level.
        #[arg(long, default_value_t = archive::tarball::DEFAULT_LEVEL)]
        level: i32,
    },
    /// Recompute every digest in FILE; exit 1 on any mismatch.
    Verify { file: PathBuf },
    /// Fill the cache (records, blobs, latest pointers) from FILE after verifying it.
    Import { file: PathBuf },
}

fn fail(global: &GlobalOpts, e: ArchiveError) -> anyhow::Result<i32> {
    let code = e.exit_code();
    if global.json {
        let problems = match &e {
            ArchiveError::Invalid { problems, .. } => problems.clone(),
            other => vec![other.to_string()],
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"ok": false, "problems": problems}))?
        );
    }
    eprintln!("error: {e}");
    Ok(code)
}

pub fn run(global: &GlobalOpts, args: ArchiveArgs) -> anyhow::Result<i32> {
    match args.action {
        ArchiveAction::Create { out, all, level } => {
            let project = session::project(global)?;
            let cache = Cache::open(&project.cache_dir)?;
            let started = std::time::Instant::now();
            let s = match archive::create(
                &cache,
                &project,
                &absolute(&out),
                &CreateOptions { all, level },
            ) {
                Ok(s) => s,
                Err(e) => return fail(global, e),
            };
            let secs = started.elapsed().as_secs_f64();
            if global.json {
                let mut v = serde_json::to_value(&s)?;
                v["seconds"] = serde_json::json!(secs);
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                println!(
                    "{}: {} records, {} blobs ({:.1} MiB), {} sources, {} pipelines, {} tables; {:.1} MiB -> {:.2} MiB in {secs:.2} s",
                    s.path.display(),
                    s.records,
                    s.blobs,
                    s.blob_bytes as f64 / 1048576.0,
                    s.sources,
                    s.pipelines,
                    s.tables,
                    s.uncompressed_bytes as f64 / 1048576.0,
                    s.bytes as f64 / 1048576.0,
                );
                for d in &s.missing_blobs {
                    eprintln!(
                        "warning: blob {d} is missing or corrupt in the cache (not archived)"
                    );
                }
                for p in &s.stale_sources {
                    eprintln!(
                        "warning: input {p} changed since its result was computed (not archived)"
                    );
                }
            }
            Ok(exit::OK)
        }
        ArchiveAction::Verify { file } => match archive::verify(&absolute(&file)) {
            Ok(v) => {
                if global.json {
                    let mut j = serde_json::to_value(&v)?;
                    j["ok"] = serde_json::json!(true);
                    println!("{}", serde_json::to_string_pretty(&j)?);
                } else {
                    println!(
                        "{}: ok ({} entries, {} records, {} blobs, {} sources; every digest recomputed)",
                        v.path.display(),
                        v.entries,
                        v.records,
                        v.blobs,
                        v.sources
                    );
                }
                Ok(exit::OK)
            }
            Err(e) => fail(global, e),
        },
        ArchiveAction::Import { file } => {
            let project = session::project(global)?;
            let cache = Cache::open(&project.cache_dir)?;
            match archive::import(&cache, &absolute(&file)) {
                Ok(s) => {
                    if global.json {
                        println!("{}", serde_json::to_string_pretty(&s)?);
                    } else {
                        println!(
                            "imported into {}: {} records ({} new), {} blobs, {} samples, {} latest pointers, {} extension-table rows",
                            project.cache_dir.display(),
                            s.records,
                            s.new_records,
                            s.blobs,
                            s.samples,
                            s.latest,
                            s.table_rows
                        );
                    }
                    Ok(exit::OK)
                }
                Err(e) => fail(global, e),
            }
        }
    }
}
