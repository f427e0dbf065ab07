//! `jb list` and `jb graph`.

use clap::{Args, ValueEnum};
use serde_json::json;

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
            let rows: Vec<_> = session
                .set
                .pipelines
                .iter()
                .map(|p| {
                    let n = session.set.steps.iter().filter(|s| s.pipeline == p.name).count();
                    json!({"name": p.name, "file": p.path, "default": p.file.default, "steps": p.file.steps.len(), "instances": n, "description": p.file.description})
                })
                .collect();
            if global.json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                for r in rows {
                    println!(
                        "{:12} {:3} steps {:5} instances{}  {}",
                        r["name"].as_str().unwrap_or(""),
                        r["steps"],
                        r["instances"],
                        if r["default"] == true {
                            " (in `all`)"
                        } else {
                            "          "
                        },
                        r["description"].as_str().unwrap_or("")
                    );
                }
            }
        }
        ListWhat::Steps => {
            if global.json {
                let rows: Vec<_> = session.set.steps.iter().map(|s| json!({"id": s.id, "kind": s.kind.as_str(), "deps": s.deps.len(), "inputs": s.inputs})).collect();
                println!("{}", serde_json::to_string_pretty(&rows)?);
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
