//! `jb archive create OUT | verify FILE | import FILE | keygen OUT`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::archive::report::{Created, Failure, KeyPairWritten, VerifiedOk};
use crate::archive::{self, ArchiveError, CreateOptions, ImportOptions, VerifyOptions};
use crate::cache::Cache;
use crate::error::exit;
use crate::project::absolute;

use super::GlobalOpts;
use crate::session;

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
        /// Sign the manifest with this ed25519 secret key (from `jb archive keygen`, an
        /// unencrypted OpenSSH ed25519 key, or an unencrypted minisign key).
        #[arg(long, value_name = "KEY")]
        sign: Option<PathBuf>,
    },
    /// Recompute every digest in FILE and check its signature; exit 1 on any mismatch.
    Verify {
        file: PathBuf,
        /// Require a signature by this public key (`.pub` from keygen, `ssh-ed25519 ...`, or a
        /// minisign public key); repeat to trust several.
        #[arg(long = "key", value_name = "PUB")]
        keys: Vec<PathBuf>,
    },
    /// Fill the cache (records, blobs, samples, latest pointers) from FILE after verifying it;
    /// never overwrites what the cache holds (a conflict imports nothing).
    Import {
        file: PathBuf,
        /// Import only if FILE is signed by this public key (repeat to trust several).
        #[arg(long = "require-key", value_name = "PUB")]
        require_keys: Vec<PathBuf>,
    },
    /// Write a new ed25519 key pair: OUT (secret, mode 0600) and OUT.pub.
    Keygen {
        out: PathBuf,
        /// The key's comment (e.g. who you are).
        #[arg(long, default_value = "jb archive key")]
        comment: String,
        /// Replace existing files.
        #[arg(long)]
        force: bool,
    },
}

fn public_keys(paths: &[PathBuf]) -> Result<Vec<archive::sign::PublicKey>, ArchiveError> {
    paths
        .iter()
        .map(|p| archive::sign::load_public(&absolute(p)))
        .collect()
}

fn signature_line(s: &Option<archive::verify::SignedBy>) -> String {
    match s {
        Some(s) if s.trusted => format!(
            "signed by {} ({}), a trusted key",
            s.fingerprint, s.comment
        ),
        Some(s) => format!(
            "signed by {} ({}); the signature checks, but only --key with a key you trust says who that is",
            s.fingerprint, s.comment
        ),
        None => "unsigned: the digests are self-consistent, but anyone could have produced them".into(),
    }
}

fn fail(global: &GlobalOpts, e: ArchiveError) -> anyhow::Result<i32> {
    let code = e.exit_code();
    if global.json {
        println!("{}", serde_json::to_string_pretty(&Failure::from(&e))?);
    }
    eprintln!("error: {e}");
    Ok(code)
}

pub fn run(global: &GlobalOpts, args: ArchiveArgs) -> anyhow::Result<i32> {
    match args.action {
        ArchiveAction::Keygen {
            out,
            comment,
            force,
        } => match archive::sign::keygen(&absolute(&out), &comment, force) {
            Ok(k) => {
                let pub_path = archive::sign::pub_path(&out);
                if global.json {
                    let written = KeyPairWritten {
                        secret_key: out,
                        public_key: pub_path,
                        fingerprint: k.fingerprint(),
                        comment,
                    };
                    println!("{}", serde_json::to_string_pretty(&written)?);
                } else {
                    println!(
                        "wrote {} (secret, keep it) and {} ({})",
                        out.display(),
                        pub_path.display(),
                        k.fingerprint()
                    );
                }
                Ok(exit::OK)
            }
            Err(e) => fail(global, e),
        },
        ArchiveAction::Create {
            out,
            all,
            level,
            sign,
        } => {
            let key = match sign
                .map(|k| archive::sign::load_secret(&absolute(&k)))
                .transpose()
            {
                Ok(k) => k,
                Err(e) => return fail(global, e),
            };
            let project = session::project(&global.session())?;
            let cache = Cache::open(&project.cache_dir)?;
            let started = std::time::Instant::now();
            let s = match archive::create(
                &cache,
                &project,
                &absolute(&out),
                &CreateOptions { all, level },
                key.as_ref(),
            ) {
                Ok(s) => s,
                Err(e) => return fail(global, e),
            };
            let secs = started.elapsed().as_secs_f64();
            if global.json {
                let created = Created {
                    summary: s,
                    seconds: secs,
                };
                println!("{}", serde_json::to_string_pretty(&created)?);
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
                if let Some(fp) = &s.signed_by {
                    println!("signed by {fp}");
                }
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
        ArchiveAction::Verify { file, keys } => match public_keys(&keys)
            .and_then(|trusted| archive::verify(&absolute(&file), &VerifyOptions { trusted }))
        {
            Ok(v) => {
                if global.json {
                    println!("{}", serde_json::to_string_pretty(&VerifiedOk::from(v))?);
                } else {
                    println!(
                        "{}: ok ({} entries, {} records, {} blobs, {} sources; every digest recomputed)",
                        v.path.display(),
                        v.entries,
                        v.records,
                        v.blobs,
                        v.sources
                    );
                    println!("{}", signature_line(&v.signature));
                }
                Ok(exit::OK)
            }
            Err(e) => fail(global, e),
        },
        ArchiveAction::Import { file, require_keys } => {
            let require_key = match public_keys(&require_keys) {
                Ok(k) => k,
                Err(e) => return fail(global, e),
            };
            let project = session::project(&global.session())?;
            let cache = Cache::open(&project.cache_dir)?;
            match archive::import(&cache, &absolute(&file), &ImportOptions { require_key }) {
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
                        if s.latest_kept > 0 {
                            println!(
                                "kept the cache's own latest result for {} step(s) the archive also has",
                                s.latest_kept
                            );
                        }
                        println!("{}", signature_line(&s.signature));
                    }
                    Ok(exit::OK)
                }
                Err(e) => fail(global, e),
            }
        }
    }
}
