//! The step graph: target selection and rendering (dot, mermaid).

use std::collections::BTreeSet;

use crate::error::{JbError, Result};
use crate::pipeline::PipelineSet;

fn glob_match(pattern: &str, text: &str) -> bool {
    glob::Pattern::new(pattern)
        .map(|p| p.matches(text))
        .unwrap_or(false)
}

fn workload_matches(target: &str, workload: &str) -> bool {
    workload == target || workload.split('_').next() == Some(target)
}

/// Indices of the steps a list of targets names. `all` means every step of the default
/// pipelines. A target is a pipeline, `pipeline/step`, a step id, a workload (folder name or id
/// such as `12p`) or a glob over any of those.
pub fn select(set: &PipelineSet, targets: &[String]) -> Result<Vec<usize>> {
    select_in(set, targets, None)
}

/// Like [`select`]; with `pipeline`, a workload target also names that pipeline's steps even when
/// the pipeline is not part of `all` (e.g. `jb build -p tune 8p`).
pub fn select_in(
    set: &PipelineSet,
    targets: &[String],
    pipeline: Option<&str>,
) -> Result<Vec<usize>> {
    let targets: Vec<String> = if targets.is_empty() {
        vec!["all".into()]
    } else {
        targets.to_vec()
    };
    let mut out = BTreeSet::new();
    for t in &targets {
        let before = out.len();
        let exact_id = set.steps.iter().any(|s| s.id == *t);
        let is_glob = !exact_id && t.contains(['*', '?', '[']);
        for (i, s) in set.steps.iter().enumerate() {
            let def = format!("{}/{}", s.pipeline, s.name);
            let hit = if t == "all" {
                s.default
            } else if is_glob {
                glob_match(t, &s.id)
                    || glob_match(t, &def)
                    || glob_match(t, &s.pipeline)
                    || s.workload().is_some_and(|w| glob_match(t, w))
            } else {
                *t == s.id
                    || *t == def
                    || *t == s.pipeline
                    || ((s.default || pipeline == Some(s.pipeline.as_str()))
                        && s.workload().is_some_and(|w| workload_matches(t, w)))
            };
            if hit {
                out.insert(i);
            }
        }
        if out.len() == before {
            let mut known: BTreeSet<String> =
                set.pipelines.iter().map(|p| p.name.clone()).collect();
            known.extend(
                set.steps
                    .iter()
                    .map(|s| format!("{}/{}", s.pipeline, s.name)),
            );
            let hint = crate::suggest::did_you_mean(t, known.iter().map(String::as_str));
            return Err(JbError::Usage(format!(
                "target `{t}` matches no step{hint}; targets are `all`, a pipeline, `pipeline/step`, a step id, a workload (e.g. `12p`) or a glob. Known: {}",
                known.into_iter().collect::<Vec<_>>().join(", ")
            )));
        }
    }
    Ok(out.into_iter().collect())
}

fn node_id(i: usize) -> String {
    format!("s{i}")
}

/// Graphviz dot of the given steps and their dependencies.
pub fn to_dot(set: &PipelineSet, steps: &[usize]) -> String {
    let keep: BTreeSet<usize> = steps.iter().copied().collect();
    let mut s =
        String::from("digraph jb {\n  rankdir=LR;\n  node [shape=box, fontname=\"monospace\"];\n");
    for &i in &keep {
        let st = &set.steps[i];
        s.push_str(&format!(
            "  {} [label=\"{}\\n({})\"];\n",
            node_id(i),
            st.id.replace('"', "\\\""),
            st.kind.as_str()
        ));
    }
    for &i in &keep {
        for d in &set.steps[i].deps {
            if keep.contains(d) {
                s.push_str(&format!("  {} -> {};\n", node_id(*d), node_id(i)));
            }
        }
    }
    s.push_str("}\n");
    s
}

/// Mermaid flowchart of the given steps.
pub fn to_mermaid(set: &PipelineSet, steps: &[usize]) -> String {
    let keep: BTreeSet<usize> = steps.iter().copied().collect();
    let mut s = String::from("flowchart LR\n");
    for &i in &keep {
        let st = &set.steps[i];
        s.push_str(&format!(
            "  {}[\"{} ({})\"]\n",
            node_id(i),
            st.id.replace('"', "'"),
            st.kind.as_str()
        ));
    }
    for &i in &keep {
        for d in &set.steps[i].deps {
            if keep.contains(d) {
                s.push_str(&format!("  {} --> {}\n", node_id(*d), node_id(i)));
            }
        }
    }
    s
}
