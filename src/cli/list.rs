//! `jb list` and `jb graph`.

use clap::{Args, ValueEnum};

use crate::engine::closure_in_order;
use crate::error::exit;
use crate::graph;

use super::GlobalOpts;
use crate::session::{Python, Session};

#[derive(Debug, Clone, Copy, ValueEnum, Default)]
pub enum ListWhat {
    Workloads,
    #[default]
    Pipelines,
    Steps,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// What to list.
    #[arg(value_enum, default_value_t = ListWhat::Pipelines)]
    pub what: ListWhat,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum GraphFormat {
    Dot,
    Mermaid,
}

#[derive(Debug, Args)]
pub struct GraphArgs {
    /// Targets to draw (default: all).
    pub targets: Vec<String>,
    #[arg(long, value_enum, default_value = "dot")]
    pub format: GraphFormat,
}

pub fn run_list(global: &GlobalOpts, args: ListArgs) -> anyhow::Result<i32> {
    if let ListWhat::Workloads = args.what {
        return crate::cli::list_workloads(global);
    }
    let session = Session::open(&global.session(), Python::Never)?;
    match args.what {
        ListWhat::Pipelines => {
            let rows = session.set.pipeline_rows();
            if global.json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                for r in rows {
                    // The counts unpadded, as they always were.
                    println!(
                        "{:12} {} steps {} instances{}  {}",
                        r.name,
                        r.steps,
                        r.instances,
                        if r.default {
                            " (in `all`)"
                        } else {
                            "          "
                        },
                        r.description.as_deref().unwrap_or("")
                    );
                }
            }
        }
        ListWhat::Steps => {
            if global.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&session.set.step_rows())?
                );
            } else {
                for s in &session.set.steps {
                    println!("{:10} {}", s.kind.as_str(), s.id);
                }
            }
        }
        ListWhat::Workloads => unreachable!(),
    }
    Ok(exit::OK)
}

pub fn run_graph(global: &GlobalOpts, args: GraphArgs) -> anyhow::Result<i32> {
    let session = Session::open(&global.session(), Python::Never)?;
    let selected = graph::select(&session.set, &args.targets)?;
    let order = closure_in_order(&session.set, &selected);
    let text = match args.format {
        GraphFormat::Dot => graph::to_dot(&session.set, &order),
        GraphFormat::Mermaid => graph::to_mermaid(&session.set, &order),
    };
    print!("{text}");
    Ok(exit::OK)
}
