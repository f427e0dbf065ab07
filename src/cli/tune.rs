//! `jb tune`: the grid search of the hand-tuned baselines (pipelines/tune.yaml).

use clap::Args;

use crate::error::{exit, JbError};

use super::build::{self, BuildArgs};
use super::GlobalOpts;
use crate::resolve;
use crate::session::{Python, Session};

#[derive(Debug, Args)]
pub struct TuneArgs {
    /// Workloads to tune (default: every one with a hand-tuned baseline).
    pub workloads: Vec<String>,
    /// List the expanded configurations; run nothing.
    #[arg(long, short = 'n')]
    pub dry_run: bool,
    /// Steps run at once. Default: the number of CPUs here; with `--executor ray`, 64.
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    #[arg(long, short = 'k', default_value_t = true)]
    pub keep_going: bool,
    #[arg(long)]
    pub remeasure: bool,
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
}

pub fn run(global: &GlobalOpts, args: TuneArgs) -> anyhow::Result<i32> {
    let project = crate::session::project(&global.session())?;
    let mut workloads = Vec::new();
    for w in &args.workloads {
        workloads.push(resolve::workload(&project, w)?);
    }
    if args.dry_run {
        // Planning needs no Python: the spaces are data.
        let session = Session::open(&global.session(), Python::Never)?;
        let rows = crate::tune::configurations(&session.set, &workloads, &session.scale);
        if rows.is_empty() {
            return Err(JbError::Usage("no configurations: is there a tokamax_baselines/<workload>/space.yaml for these workloads?".into()).into());
        }
        if global.json {
            println!("{}", serde_json::to_string_pretty(&rows)?);
        } else {
            let mut per: std::collections::BTreeMap<String, usize> = Default::default();
            for r in &rows {
                let workload = r.workload.as_deref().unwrap_or("");
                *per.entry(workload.to_string()).or_default() += 1;
                println!("{:32} {}", workload, r.name_str());
            }
            for (w, n) in per {
                println!("{w}: {n} configurations");
            }
            println!("{} configurations at scale {}", rows.len(), session.scale);
        }
        return Ok(exit::OK);
    }
    let targets = if workloads.is_empty() {
        vec!["tune".to_string()]
    } else {
        workloads
            .iter()
            .flat_map(|w| {
                [
                    format!("tune/best[workload={w}]"),
                    format!("tune/default_profile[workload={w}]"),
                ]
            })
            .collect()
    };
    build::run(
        global,
        BuildArgs {
            targets,
            pipeline: None,
            jobs: args.jobs,
            keep_going: args.keep_going,
            dry_run: false,
            remeasure: args.remeasure,
            timeout: args.timeout,
        },
    )
}
