//! The shape of a pipeline's YAML with the place of every node: built from the event stream of
//! a YAML parser (saphyr-parser), so flow collections, quoted keys, anchors, comments and list
//! items are located exactly as the parser read them. Typed values come from serde separately;
//! this tree answers "where is `steps.b.needs[1]`?" for errors found after parsing.

use std::collections::{HashMap, HashSet};

use saphyr_parser::{Event, Parser, ScanError};

use super::error::PipelineErrorKind;
use super::span::{Offsets, Span};

/// One step of a path into the tree: a mapping key or a sequence position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seg<'a> {
    Key(&'a str),
    Item(usize),
}

impl<'a> From<&'a str> for Seg<'a> {
    fn from(k: &'a str) -> Self {
        Seg::Key(k)
    }
}

impl<'a> From<&'a String> for Seg<'a> {
    fn from(k: &'a String) -> Self {
        Seg::Key(k)
    }
}

impl From<usize> for Seg<'_> {
    fn from(i: usize) -> Self {
        Seg::Item(i)
    }
}

/// A path from segments of either kind: `path!["steps", name, "needs", 1]`.
#[macro_export]
macro_rules! yaml_path {
    ($($seg:expr),* $(,)?) => {
        [$($crate::pipeline::tree::Seg::from($seg)),*]
    };
}

#[derive(Debug, Clone)]
enum Kind {
    Scalar(String),
    Seq(Vec<usize>),
    /// (key node, value node) in order.
    Map(Vec<(usize, usize)>),
    /// An alias of the node at this index (`None`: an anchor not known where it is used).
    Alias(Option<usize>),
}

#[derive(Debug, Clone)]
struct Node {
    span: Span,
    kind: Kind,
}

/// Every node of a YAML document with its span.
#[derive(Debug, Clone, Default)]
pub struct SpanTree {
    nodes: Vec<Node>,
    root: Option<usize>,
}

/// A collection being read.
struct Open {
    node: usize,
    anchor: usize,
    /// A mapping's key read before its value.
    pending_key: Option<usize>,
    /// A mapping's scalar keys so far (duplicates are refused in linear time).
    keys: HashSet<String>,
}

impl SpanTree {
    /// The tree of the first document of `text`; a syntax error or a duplicate key is an error
    /// at its span.
    pub fn parse(text: &str) -> Result<SpanTree, (Span, PipelineErrorKind)> {
        let offsets = Offsets::new(text);
        let mut tree = SpanTree::default();
        let mut open: Vec<Open> = Vec::new();
        let mut anchors: HashMap<usize, usize> = HashMap::new();
        let mut parser = Parser::new_from_str(text);
        while let Some(event) = parser.next_event() {
            let (event, span) = event.map_err(|e| tree.syntax(&offsets, &open, &e))?;
            let at = offsets.span(
                span.start.index(),
                span.end.index(),
                span.start.line(),
                span.start.col(),
            );
            let (node, anchor) = match event {
                Event::Scalar(value, _, anchor, _) => {
                    (tree.push(at, Kind::Scalar(value.into_owned())), anchor)
                }
                Event::Alias(id) => (tree.push(at, Kind::Alias(anchors.get(&id).copied())), 0),
                Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                    let kind = if matches!(event, Event::SequenceStart(..)) {
                        Kind::Seq(Vec::new())
                    } else {
                        Kind::Map(Vec::new())
                    };
                    let node = tree.push(at, kind);
                    open.push(Open {
                        node,
                        anchor,
                        pending_key: None,
                        keys: HashSet::new(),
                    });
                    continue;
                }
                Event::SequenceEnd | Event::MappingEnd => {
                    let Some(done) = open.pop() else { continue };
                    let end = at.offset + at.len;
                    let s = &mut tree.nodes[done.node].span;
                    s.len = s.len.max(end.saturating_sub(s.offset));
                    (done.node, done.anchor)
                }
                Event::DocumentEnd if tree.root.is_some() => break,
                _ => continue,
            };
            if anchor != 0 {
                anchors.insert(anchor, node);
            }
            tree.attach(&mut open, node)?;
        }
        Ok(tree)
    }

    fn push(&mut self, span: Span, kind: Kind) -> usize {
        self.nodes.push(Node { span, kind });
        self.nodes.len() - 1
    }

    /// Put a finished node into the collection being read (or make it the root).
    fn attach(&mut self, open: &mut [Open], node: usize) -> Result<(), (Span, PipelineErrorKind)> {
        let Some(parent) = open.last_mut() else {
            self.root.get_or_insert(node);
            return Ok(());
        };
        match parent.pending_key.take() {
            None if matches!(self.nodes[parent.node].kind, Kind::Map(_)) => {
                if let Kind::Scalar(name) = &self.nodes[node].kind {
                    if !parent.keys.insert(name.clone()) {
                        return Err((
                            self.nodes[node].span,
                            PipelineErrorKind::DuplicateKey(name.clone()),
                        ));
                    }
                }
                parent.pending_key = Some(node);
            }
            key => match &mut self.nodes[parent.node].kind {
                Kind::Seq(items) => items.push(node),
                Kind::Map(entries) => entries.push((key.expect("a key"), node)),
                _ => unreachable!("only collections are open"),
            },
        }
        Ok(())
    }

    /// The (key, value) of `name` in the mapping `map` (through aliases).
    fn entry(&self, map: usize, name: &str) -> Option<(usize, usize)> {
        match &self.nodes[self.resolve(map)].kind {
            Kind::Map(entries) => entries
                .iter()
                .copied()
                .find(|(k, _)| matches!(&self.nodes[*k].kind, Kind::Scalar(s) if s == name)),
            _ => None,
        }
    }

    fn resolve(&self, node: usize) -> usize {
        match self.nodes[node].kind {
            Kind::Alias(Some(target)) => target,
            _ => node,
        }
    }

    /// The (key, value) nodes at the end of `path`, as far as it goes: the last one found and
    /// whether the whole path was.
    fn walk(&self, path: &[Seg]) -> (Option<(Option<usize>, usize)>, bool) {
        let Some(mut node) = self.root else {
            return (None, false);
        };
        let mut at = (None, node);
        for seg in path {
            let next = match seg {
                Seg::Key(name) => self.entry(node, name).map(|(k, v)| (Some(k), v)),
                Seg::Item(i) => match &self.nodes[self.resolve(node)].kind {
                    Kind::Seq(items) => items.get(*i).map(|v| (None, *v)),
                    _ => None,
                },
            };
            match next {
                Some(n) => {
                    at = n;
                    node = n.1;
                }
                None => return (Some(at), false),
            }
        }
        (Some(at), true)
    }

    /// Where the value at `path` is; else the deepest part of the path that exists.
    pub fn value(&self, path: &[Seg]) -> Span {
        match self.walk(path) {
            (Some((_, v)), true) => self.nodes[v].span,
            (found, _) => self.fallback(found),
        }
    }

    /// Where the key that ends `path` is (an item: the item); else the deepest part that exists.
    pub fn key(&self, path: &[Seg]) -> Span {
        match self.walk(path) {
            (Some((k, v)), true) => self.nodes[k.unwrap_or(v)].span,
            (found, _) => self.fallback(found),
        }
    }

    fn fallback(&self, found: Option<(Option<usize>, usize)>) -> Span {
        match found {
            Some((Some(k), _)) => self.nodes[k].span,
            Some((None, v)) if Some(v) != self.root => self.nodes[v].span,
            _ => Span::START,
        }
    }

    /// The node that starts at byte `offset`, if one does (the innermost: a scalar rather than
    /// the mapping it opens).
    pub fn starting_at(&self, offset: usize) -> Option<Span> {
        self.nodes
            .iter()
            .filter(|n| n.span.offset == offset)
            .map(|n| n.span)
            .min_by_key(|s| s.len)
    }
}

impl SpanTree {
    /// A syntax error where the parser found it; at the end of the file, inside a flow
    /// collection (`[`, `{`) that was never closed, at that collection's opening bracket.
    fn syntax(&self, offsets: &Offsets, open: &[Open], e: &ScanError) -> (Span, PipelineErrorKind) {
        let m = e.marker();
        let mut span = offsets.span(m.index(), m.index() + 1, m.line(), m.col());
        let text = offsets.text();
        if text.as_bytes().get(span.offset) == Some(&b'\n') {
            span.len = 0;
        }
        // A tab is reported after it: point at the tab itself.
        let tabs = text[..span.offset].len() - text[..span.offset].trim_end_matches('\t').len();
        if tabs > 0 && e.info().contains("tab") {
            span = Span {
                offset: span.offset - tabs,
                len: 1,
                line: span.line,
                column: span.column - tabs,
            };
        }
        let mut message = e.info().to_string();
        let at_end = text[span.offset.min(text.len())..].trim().is_empty();
        let unclosed = open
            .iter()
            .rev()
            .map(|o| self.nodes[o.node].span)
            .find(|s| matches!(text.as_bytes().get(s.offset), Some(b'[' | b'{')));
        if let (true, Some(opener)) = (at_end, unclosed) {
            span = Span { len: 1, ..opener };
            let bracket = &text[opener.offset..opener.offset + 1];
            message = format!("this `{bracket}` is never closed ({message})");
        }
        (span, PipelineErrorKind::Syntax(message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(tree: &SpanTree, path: &[Seg]) -> (usize, usize) {
        let s = tree.value(path);
        (s.line, s.column)
    }

    #[test]
    fn block_and_flow_nodes() {
        let text = "name: p\nsteps:\n  a:\n    kind: command\n    needs: [b, \"c\"]\n  'b':\n    run: echo\n";
        let t = SpanTree::parse(text).unwrap();
        assert_eq!(at(&t, &yaml_path!["steps", "a", "needs", 1]), (5, 16));
        assert_eq!(at(&t, &yaml_path!["steps", "a", "needs", 0]), (5, 13));
        let k = t.key(&yaml_path!["steps", "b"]);
        assert_eq!((k.line, k.column, k.len), (6, 3, 3));
        assert_eq!(at(&t, &yaml_path!["steps", "b", "run"]), (7, 10));
        // Missing: the deepest key found.
        let k = t.key(&yaml_path!["steps", "zzz", "run"]);
        assert_eq!((k.line, k.column), (2, 1));
    }

    #[test]
    fn list_items_and_aliases() {
        let text = "x: &d\n  - a\n  - m: 1\ny:\n  z: *d\n";
        let t = SpanTree::parse(text).unwrap();
        assert_eq!(at(&t, &yaml_path!["x", 1, "m"]), (3, 8));
        // Through the alias: the anchored node itself.
        assert_eq!(at(&t, &yaml_path!["y", "z", 0]), (2, 5));
    }

    #[test]
    fn duplicate_keys_and_syntax_errors() {
        let (span, kind) = SpanTree::parse("a: 1\nb: 2\na: 3\n").unwrap_err();
        assert_eq!((span.line, span.column), (3, 1));
        assert!(matches!(kind, PipelineErrorKind::DuplicateKey(k) if k == "a"));
        let (span, kind) = SpanTree::parse("a: [1, 2\n").unwrap_err();
        assert!(matches!(kind, PipelineErrorKind::Syntax(_)));
        // Unclosed at the end of the file: at the bracket.
        assert_eq!((span.line, span.column, span.len), (1, 4, 1));
        let (span, _) = SpanTree::parse("a: [1, 2\nb: ]\n").unwrap_err();
        assert_eq!(span.line, 2);
    }
}
