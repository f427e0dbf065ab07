//! `jb explain`: why a step would run.

use clap::Args;

use crate::engine::{closure_in_order, PlanAction};
use crate::error::exit;
use crate::graph;

use super::GlobalOpts;
use crate::session::{Python, Session};

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// Steps to explain (same target syntax as `jb build`).
    #[arg(required = true)]
    pub targets: Vec<String>,
}

pub fn run(global: &GlobalOpts, args: ExplainArgs) -> anyhow::Result<i32> {
    let session = Session::open(&global.session(), Python::IfNeeded)?;
    let selected = graph::select(&session.set, &args.targets)?;
    let order = closure_in_order(&session.set, &selected);
    let engine = session.engine()?;
    let plan = engine.plan(&session.set, &order, false)?;
    let wanted: std::collections::HashSet<&str> = selected
        .iter()
        .map(|&i| session.set.steps[i].id.as_str())
        .collect();
    let plan: Vec<_> = plan
        .into_iter()
        .filter(|p| wanted.contains(p.step.as_str()))
        .collect();
    if global.json {
        println!("{}", serde_json::to_string_pretty(&plan)?);
    } else {
        for p in &plan {
            match p.action {
                PlanAction::Cached => println!("{}: up to date", p.step),
                PlanAction::Blocked => println!("{}: blocked: {}", p.step, p.reason),
                PlanAction::Run => println!("{}: would run: {}", p.step, p.reason),
            }
        }
    }
    Ok(exit::OK)
}
