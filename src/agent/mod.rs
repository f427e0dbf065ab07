//! Agent methods: asking a language model (or a command, or a folder of answers) for candidate
//! kernels and evaluating them as JAXBench does — best-of-N, iterative refinement, iterative
//! refinement with a context pack, and beam search.
//!
//! One concern per file:
//! - [`agent`]: the [`Agent`] trait, requests, completions and typed errors;
//! - [`client`] (OpenAI-compatible endpoint), [`command_agent`], [`file_agent`]: the agents;
//! - [`backoff`]: retry delays (exponential, honouring `Retry-After`);
//! - [`extract`]: the code of an answer (its largest, last ```python block);
//! - `hardware`: the device table the prompt preamble is written from ([`crate::device`]);
//! - [`benchmark`]: the benchmark line (the worker's `describe`, cached) and reference source;
//! - [`context`]: the context pack (`context/` in the repository) of `iterative-ctx`;
//! - [`prompt`]: prompt text (preamble, benchmark line, reference, feedback, profile, source);
//! - [`feedback`]: an evaluation result turned into a sample outcome and prompt feedback;
//! - [`methods`]: the search strategies, written against the [`methods::Runner`] trait;
//! - [`translate`]: the `translate` step (cached in jb's action records) and its pipeline;
//! - [`accounting`]: outcome counts, best-so-far, geomean (floor 1x), fast1@N;
//! - [`store`]: the run database tables (`agent_runs`, `agent_samples`);
//! - [`table`]: the summary table `jb agent` prints; [`report`]: what `jb agent --json` prints;
//! - [`runner`]: the [`methods::Runner`] of `jb agent` (translate steps and evaluations run by
//!   the build engine).

pub mod accounting;
#[allow(clippy::module_inception)]
pub mod agent;
pub mod backoff;
pub mod benchmark;
pub mod client;
pub mod command_agent;
pub mod context;
pub mod extract;
pub mod feedback;
pub mod file_agent;
/// The device table (kept at this path for existing callers).
pub use crate::device as hardware;
pub mod methods;
pub mod prompt;
pub mod report;
pub mod runner;
pub mod store;
pub mod study;
pub mod table;
pub mod translate;

pub use agent::{Agent, AgentError, ChatRequest, Completion, Sampling};
