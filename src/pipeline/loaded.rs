//! A pipeline ready to expand: read from a file (its text parsed, with the place of every YAML
//! node kept for errors) or built by a generator (`jb eval`, `jb agent`) as typed values, with no
//! text and no positions. Both are validated the same way.

use std::path::{Path, PathBuf};

use super::depth;
use super::error::{PipelineError, PipelineErrorKind as Kind};
use super::schema::{PipelineFile, StepKind};
use super::span::Span;
use super::tree::{Seg, SpanTree};
use crate::error::{JbError, Location, Result};
use crate::yaml_path;

/// Where a pipeline came from.
#[derive(Debug, Clone)]
pub enum Origin {
    /// A YAML file: its text and the place of each of its nodes.
    File { text: String, tree: SpanTree },
    /// Built as typed values by a generator (named by the pipeline's `path`, e.g. `<jb eval>`):
    /// its errors have no line and column.
    Generated,
}

/// A validated pipeline: its schema values and where they came from (for errors).
#[derive(Debug, Clone)]
pub struct LoadedPipeline {
    pub name: String,
    /// The file, relative to the project root; for a generated pipeline, `<generator>`.
    pub path: PathBuf,
    pub origin: Origin,
    pub file: PipelineFile,
}

impl LoadedPipeline {
    /// The YAML text (empty for a generated pipeline).
    pub fn text(&self) -> &str {
        match &self.origin {
            Origin::File { text, .. } => text,
            Origin::Generated => "",
        }
    }

    /// An error at `span` of this file (a generated pipeline's: at no position).
    pub fn error(&self, span: Span, kind: Kind) -> JbError {
        match &self.origin {
            Origin::File { text, .. } => PipelineError::new(&self.path, span, kind)
                .with_text(text)
                .into(),
            Origin::Generated => PipelineError::new(&self.path, Span::NONE, kind).into(),
        }
    }

    fn value_span(&self, path: &[Seg]) -> Span {
        match &self.origin {
            Origin::File { tree, .. } => tree.value(path),
            Origin::Generated => Span::NONE,
        }
    }

    fn key_span(&self, path: &[Seg]) -> Span {
        match &self.origin {
            Origin::File { tree, .. } => tree.key(path),
            Origin::Generated => Span::NONE,
        }
    }

    /// An error at the value found at `path` (or the deepest part of it that exists).
    pub fn value_error(&self, path: &[Seg], kind: Kind) -> JbError {
        self.error(self.value_span(path), kind)
    }

    /// An error at the key that ends `path` (or the deepest part of it that exists).
    pub fn key_error(&self, path: &[Seg], kind: Kind) -> JbError {
        self.error(self.key_span(path), kind)
    }

    /// Where the value at `rest` under step `step` is.
    pub fn step_span(&self, step: &str, rest: &[Seg]) -> Span {
        let mut path = vec![Seg::Key("steps"), Seg::Key(step)];
        path.extend_from_slice(rest);
        self.value_span(&path)
    }

    /// An error at the value found at `rest` under step `step`.
    pub fn step_error(&self, step: &str, rest: &[Seg], kind: Kind) -> JbError {
        self.error(self.step_span(step, rest), kind)
    }

    /// Where the key at `path` is (line 0 in a generated pipeline).
    pub fn location(&self, path: &[Seg]) -> Location {
        let span = self.key_span(path);
        Location {
            file: self.path.clone(),
            line: span.line,
            column: span.column,
        }
    }
}

/// Parse and validate the pipeline file `path` whose text is `text`.
pub fn parse_pipeline(path: &Path, text: &str) -> Result<LoadedPipeline> {
    depth::check(path, text)?;
    let tree = SpanTree::parse(text)
        .map_err(|(span, kind)| PipelineError::new(path, span, kind).with_text(text))?;
    let file: PipelineFile = serde_norway::from_str(text)
        .map_err(|e| PipelineError::from_serde(path, text, Some(&tree), &e))?;
    let name = file.name.clone().unwrap_or_else(|| {
        path.file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string()
    });
    let loaded = LoadedPipeline {
        name,
        path: path.to_path_buf(),
        origin: Origin::File {
            text: text.to_string(),
            tree,
        },
        file,
    };
    validate(&loaded)?;
    Ok(loaded)
}

/// Validate a pipeline built as typed values by `generator` (e.g. `jb eval`); its errors name
/// `<generator>`. The pipeline must have a name.
pub fn generated_pipeline(generator: &str, file: PipelineFile) -> Result<LoadedPipeline> {
    let loaded = LoadedPipeline {
        name: file.name.clone().unwrap_or_default(),
        path: PathBuf::from(format!("<{generator}>")),
        origin: Origin::Generated,
        file,
    };
    validate(&loaded)?;
    Ok(loaded)
}

/// What a pipeline must satisfy on its own (before expansion).
fn validate(p: &LoadedPipeline) -> Result<()> {
    if !valid_name(&p.name) {
        return Err(p.value_error(
            &yaml_path!["name"],
            Kind::InvalidPipelineName(p.name.clone()),
        ));
    }
    if p.file.steps.is_empty() {
        return Err(p.value_error(&yaml_path!["steps"], Kind::NoSteps));
    }
    if let Some((i, bad)) = p
        .file
        .allow_outside
        .iter()
        .enumerate()
        .find(|(_, r)| !Path::new(r).is_absolute() || r.split('/').any(|c| c == ".."))
    {
        return Err(p.value_error(
            &yaml_path!["allow_outside", i],
            Kind::AllowOutside(bad.clone()),
        ));
    }
    for (name, def) in &p.file.steps {
        let key = yaml_path!["steps", name];
        if !valid_name(name) {
            return Err(p.key_error(&key, Kind::InvalidStepName(name.clone())));
        }
        if def.kind == StepKind::Command && def.run.is_none() {
            return Err(p.key_error(&key, Kind::CommandNeedsRun(name.clone())));
        }
        if def.kind != StepKind::Command && def.run.is_some() {
            return Err(p.key_error(
                &yaml_path!["steps", name, "run"],
                Kind::RunNotForKind(name.clone()),
            ));
        }
        for (i, axis) in def.foreach.iter().enumerate() {
            axis.axis().map_err(|message| {
                p.step_error(
                    name,
                    &yaml_path!["foreach", i],
                    Kind::Foreach {
                        step: name.clone(),
                        message,
                    },
                )
            })?;
        }
        if let Some(t) = def.timeout {
            if t <= 0.0 || !t.is_finite() {
                return Err(p.step_error(
                    name,
                    &yaml_path!["timeout"],
                    Kind::BadTimeout(name.clone()),
                ));
            }
        }
    }
    Ok(())
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}
