//! jb: a content-addressed build executor for accelerator-kernel benchmarks.
//!
//! Pipelines (YAML) expand into a DAG of steps; each step's key hashes everything its result
//! depends on; results live in a SQLite run database and a content-addressed blob store.

pub mod agent;
pub mod archive;
pub mod cache;
pub mod cli;
pub mod config;
pub mod contract;
pub mod device;
pub mod engine;
pub mod error;
pub mod eval;
pub mod exec;
pub mod fingerprint;
pub mod graph;
pub mod key;
pub mod outcome;
pub mod pipeline;
pub mod project;
pub mod pyenv;
pub mod report;
pub mod resolve;
pub mod session;
pub mod settings;
pub mod stats;
pub mod suggest;
pub mod tune;
