//! Prompt text, after the structure of the paper's appendix B: a preamble with the target's
//! facts, the benchmark line, the reference source; in later turns the result of the previous
//! kernel (correct with latency and speedup, or what failed with the last 40 lines of the
//! runner's output), a profile summary and the previous source. The context pack of
//! `iterative-ctx` goes in front. The wording is this project's own.

use std::fmt::Write;

use super::hardware::{Device, Platform};

/// Lines of runner output a failure's feedback keeps.
pub const OUTPUT_LINES: usize = 40;

/// What the prompt says about the benchmark.
#[derive(Debug, Clone, PartialEq)]
pub struct Benchmark {
    /// Workload folder name.
    pub workload: String,
    /// One line: name, model, operator, inputs and outputs with shapes, FLOPs, scale.
    pub line: String,
    /// The workload file (the reference implementation).
    pub reference: String,
}

/// The result of the previous kernel, as the model is told.
#[derive(Debug, Clone, PartialEq)]
pub enum Feedback {
    /// The previous answer had no ```python block.
    NoCode,
    /// The previous request failed.
    ApiError(String),
    /// Compile error, runtime error or wrong output: `outcome` and the runner's output.
    Failed { outcome: String, output: String },
    Correct {
        latency_ms: Option<f64>,
        xla_ms: Option<f64>,
        speedup: Option<f64>,
        interpret: bool,
    },
}

/// The previous turn: its source (the last kernel that had code), its result and profile.
#[derive(Debug, Clone, PartialEq)]
pub struct Previous {
    pub source: Option<String>,
    pub feedback: Feedback,
    pub profile: Option<String>,
}

/// Beam search's two phases; the other methods always translate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Translate,
    Optimize,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Translate => "translate",
            Phase::Optimize => "optimize",
        }
    }
}

/// Everything one prompt is made of.
#[derive(Debug, Clone)]
pub struct PromptInput<'a> {
    pub device: &'a Device,
    pub bench: &'a Benchmark,
    pub context: Option<&'a str>,
    pub previous: Option<&'a Previous>,
    pub phase: Phase,
}

/// A finished prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    pub system: String,
    pub user: String,
}

impl Prompt {
    /// The text that is hashed into the response's cache key.
    pub fn digest(&self) -> String {
        let mut h = blake3::Hasher::new();
        h.update(&(self.system.len() as u64).to_le_bytes());
        h.update(self.system.as_bytes());
        h.update(self.user.as_bytes());
        h.finalize().to_hex().to_string()
    }

    /// Both parts, for files and for the command agent.
    pub fn text(&self) -> String {
        format!("[system]\n{}\n\n[user]\n{}", self.system, self.user)
    }
}

/// The last `n` lines of `text`.
pub fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn system_text(device: &Device) -> String {
    let api = match device.platform {
        Platform::Gpu => "the Pallas GPU (Triton) API",
        Platform::Tpu | Platform::Cpu => "the Pallas TPU API",
    };
    format!(
        "You are an expert in writing fast, correct JAX Pallas kernels ({api}).\n\
         Reply with exactly one ```python code block that holds a complete Python module; a short \
         explanation before it is fine, nothing after it.\n\
         The module must define `workload(*inputs)` with the same parameters, in the same order, \
         returning the same outputs (shapes, dtypes, nesting) as the reference `workload`, and it \
         must do its main computation inside at least one `pl.pallas_call`.\n\
         The module is imported on its own: import everything it uses; do not import the reference \
         module, read files, print, or start threads or processes."
    )
}

/// The hardware preamble.
pub fn preamble(device: &Device) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Target hardware\n");
    let _ = writeln!(
        s,
        "{}: {}; {}.",
        device.name, device.compute, device.on_chip
    );
    let mut figures = Vec::new();
    if let Some(t) = device.bf16_tflops {
        figures.push(format!("peak dense bf16 throughput {t:.0} TFLOP/s"));
    }
    if let (Some(g), Some(b)) = (device.hbm_gib, device.hbm_gbps) {
        figures.push(format!("{g:.0} GiB of HBM at {b:.0} GB/s"));
    }
    if let Some(r) = device.ridge_point() {
        figures.push(format!(
            "ridge point {r:.0} FLOP/byte (below it a kernel is bound by memory bandwidth, above it by compute)"
        ));
    }
    if !figures.is_empty() {
        let _ = writeln!(s, "Per chip: {}.", figures.join("; "));
    }
    for n in device.notes {
        let _ = writeln!(s, "- {n}");
    }
    s
}

/// How a feedback reads in the prompt.
pub fn feedback_text(f: &Feedback) -> String {
    match f {
        Feedback::NoCode => {
            "Your previous answer contained no ```python code block, so nothing could be evaluated."
                .to_string()
        }
        Feedback::ApiError(m) => format!("The previous request failed without an answer: {m}"),
        Feedback::Failed { outcome, output } => {
            let what = match outcome.as_str() {
                "compile_error" => "did not import or compile for the benchmark's inputs",
                "runtime_error" => "compiled but failed while running",
                "incorrect" => "ran, but its output does not match the reference within the tolerance (or it broke a rule of the harness)",
                _ => "failed",
            };
            format!(
                "INCORRECT: the previous kernel {what} ({outcome}). The last lines of the runner's output:\n```\n{}\n```",
                last_lines(output, OUTPUT_LINES)
            )
        }
        Feedback::Correct {
            latency_ms,
            xla_ms,
            speedup,
            interpret,
        } => {
            let ms = |v: &Option<f64>| {
                v.map(|x| format!("{x:.4} ms"))
                    .unwrap_or_else(|| "not measured".into())
            };
            let mut s = format!(
                "CORRECT: the previous kernel matches the reference. Median latency {}; the XLA-compiled reference takes {}",
                ms(latency_ms),
                ms(xla_ms)
            );
            if let Some(x) = speedup {
                let _ = write!(
                    s,
                    "; speedup {x:.3}x ({})",
                    if *x > 1.0 {
                        "faster than XLA"
                    } else {
                        "not faster than XLA yet"
                    }
                );
            }
            s.push('.');
            if *interpret {
                s.push_str(" (Timed in Pallas interpret mode on the CPU.)");
            }
            s
        }
    }
}

fn instruction(previous: Option<&Previous>, phase: Phase) -> String {
    let translate = "Write a Pallas kernel that computes exactly what the reference `workload` computes for these inputs, \
                     as fast as the target allows. Choose block shapes that divide the input dimensions and respect the \
                     target's tiling rules; accumulate in float32.";
    let optimize_menu = "Pick the one or two changes most likely to help, say which in one sentence, and apply them: \
                         (1) larger or differently shaped blocks, to cut grid steps and per-step overhead; \
                         (2) keeping an operand resident across a grid axis by ordering the grid so its block index does not change; \
                         (3) fusing the surrounding element-wise work into the kernel so data makes one trip through memory; \
                         (4) a float32 scratch accumulator across a reduction axis instead of re-reading partial results; \
                         (5) lane-dense outputs and fewer masked or strided accesses; \
                         (6) marking independent grid axes parallel; \
                         (7) hoisting work that does not depend on the grid position out of the kernel body.";
    match previous.map(|p| &p.feedback) {
        None => match phase {
            Phase::Translate => translate.to_string(),
            Phase::Optimize => format!("{translate} {optimize_menu}"),
        },
        Some(Feedback::NoCode) | Some(Feedback::ApiError(_)) => format!(
            "{translate} Answer with the complete module in one ```python block."
        ),
        Some(Feedback::Failed { .. }) => "Find the cause in the runner's output and fix the previous kernel. Keep what \
             already works, stay within the target's rules, and answer with the complete corrected module."
            .to_string(),
        Some(Feedback::Correct { .. }) => match phase {
            Phase::Translate => "The previous kernel is correct. Make it faster without changing what it computes, \
                 and answer with the complete module."
                .to_string(),
            Phase::Optimize => format!(
                "The previous kernel is correct; make it faster without changing what it computes. {optimize_menu} \
                 Answer with the complete module."
            ),
        },
    }
}

/// Build the prompt for one sample.
pub fn build(input: &PromptInput) -> Prompt {
    let mut u = String::new();
    if let Some(ctx) = input.context.filter(|c| !c.trim().is_empty()) {
        let _ = writeln!(
            u,
            "# Context\n\nReference material for writing Pallas kernels on this target.\n\n{}\n\n---\n",
            ctx.trim_end()
        );
    }
    u.push_str(&preamble(input.device));
    let _ = writeln!(u, "\n# Benchmark\n\n{}\n", input.bench.line);
    let _ = writeln!(
        u,
        "# Reference implementation\n\nThe harness calls `workload(*create_inputs())` (jitted) and compares your `workload` \
         with it on fresh inputs of the same shapes and dtypes.\n\n```python\n{}\n```\n",
        input.bench.reference.trim_end()
    );
    if let Some(p) = input.previous {
        if let Some(src) = &p.source {
            let _ = writeln!(
                u,
                "# Your previous kernel\n\n```python\n{}\n```\n",
                src.trim_end()
            );
        }
        let _ = writeln!(u, "# Result\n\n{}\n", feedback_text(&p.feedback));
        if let Some(profile) = p.profile.as_deref().filter(|s| !s.trim().is_empty()) {
            let _ = writeln!(u, "# Profile\n\n{}\n", profile.trim_end());
        }
    }
    let _ = writeln!(u, "# Task\n\n{}", instruction(input.previous, input.phase));
    Prompt {
        system: system_text(input.device),
        user: u,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::hardware::by_id;

    fn bench() -> Benchmark {
        Benchmark {
            workload: "12p_RMSNorm".into(),
            line: "12p_RMSNorm: rms_norm of Llama-3.1-70B; inputs x bf16[2,16,256]".into(),
            reference: "def workload(x, scale):\n    return x\n".into(),
        }
    }

    #[test]
    fn first_turn_has_preamble_benchmark_reference_and_task() {
        let b = bench();
        let p = build(&PromptInput {
            device: by_id("tpu-v6e").unwrap(),
            bench: &b,
            context: None,
            previous: None,
            phase: Phase::Translate,
        });
        assert!(p.system.contains("```python"));
        assert!(p.system.contains("pallas_call"));
        let u = &p.user;
        let order = [
            "# Target hardware",
            "TPU v6e",
            "918 TFLOP/s",
            "1640 GB/s",
            "ridge point 560",
            "# Benchmark",
            "12p_RMSNorm: rms_norm",
            "# Reference implementation",
            "def workload(x, scale)",
            "# Task",
        ];
        let mut at = 0;
        for needle in order {
            let i = u[at..]
                .find(needle)
                .unwrap_or_else(|| panic!("`{needle}` missing or out of order in:\n{u}"));
            at += i;
        }
        assert!(!u.contains("# Context"));
        assert!(!u.contains("# Result"));
    }

    #[test]
    fn each_platform_gets_its_own_text() {
        let b = bench();
        let make = |id: &str| {
            build(&PromptInput {
                device: by_id(id).unwrap(),
                bench: &b,
                context: None,
                previous: None,
                phase: Phase::Translate,
            })
        };
        let (tpu, gpu, cpu) = (make("tpu-v5e"), make("h100"), make("cpu"));
        assert!(tpu.user.contains("VMEM") && tpu.user.contains("197 TFLOP/s"));
        assert!(gpu.user.contains("Triton") && gpu.user.contains("3350 GB/s"));
        assert!(gpu.system.contains("GPU"));
        assert!(cpu.user.contains("interpret mode") && !cpu.user.contains("TFLOP/s"));
        assert_ne!(tpu.digest(), gpu.digest());
        assert_ne!(tpu.digest(), cpu.digest());
        assert_eq!(make("cpu").digest(), cpu.digest());
    }

    #[test]
    fn later_turns_carry_feedback_profile_and_source() {
        let b = bench();
        let output: String = (1..=60).map(|i| format!("line {i}\n")).collect();
        let prev = Previous {
            source: Some("def workload(x, scale):\n    return pl.pallas_call(...)\n".into()),
            feedback: Feedback::Failed {
                outcome: "runtime_error".into(),
                output,
            },
            profile: None,
        };
        let p = build(&PromptInput {
            device: by_id("cpu").unwrap(),
            bench: &b,
            context: Some("CONTEXT PACK"),
            previous: Some(&prev),
            phase: Phase::Translate,
        });
        let u = &p.user;
        assert!(u.starts_with("# Context"), "{u}");
        assert!(u.contains("CONTEXT PACK"));
        assert!(u.contains("# Your previous kernel") && u.contains("pl.pallas_call(...)"));
        assert!(u.contains("INCORRECT") && u.contains("runtime_error"));
        assert!(u.contains("line 60") && u.contains("line 21\n"));
        assert!(!u.contains("line 20\n"), "only the last 40 lines");
        assert!(u.contains("fix the previous kernel"));

        let prev = Previous {
            source: Some("code".into()),
            feedback: Feedback::Correct {
                latency_ms: Some(0.5),
                xla_ms: Some(1.0),
                speedup: Some(2.0),
                interpret: false,
            },
            profile: Some("median 0.5 ms".into()),
        };
        let p = build(&PromptInput {
            device: by_id("tpu-v6e").unwrap(),
            bench: &b,
            context: None,
            previous: Some(&prev),
            phase: Phase::Optimize,
        });
        assert!(p.user.contains("CORRECT") && p.user.contains("speedup 2.000x"));
        assert!(p.user.contains("0.5000 ms") && p.user.contains("1.0000 ms"));
        assert!(p.user.contains("# Profile\n\nmedian 0.5 ms"));
        assert!(p.user.contains("(3) fusing"));
    }

    #[test]
    fn no_code_feedback_asks_for_a_block() {
        let b = bench();
        let prev = Previous {
            source: None,
            feedback: Feedback::NoCode,
            profile: None,
        };
        let p = build(&PromptInput {
            device: by_id("cpu").unwrap(),
            bench: &b,
            context: None,
            previous: Some(&prev),
            phase: Phase::Translate,
        });
        assert!(p.user.contains("contained no ```python code block"));
        assert!(!p.user.contains("# Your previous kernel"));
    }
}
