//! The search methods, written against a [`Runner`] (translate a batch of prompts, evaluate a
//! batch of candidates) so they can be tested without an endpoint or Python:
//!
//! - best-of-N: N independent samples from the first prompt;
//! - iterative refinement: C independent chains of T turns; each turn sees the previous turn's
//!   kernel, its result and profile (`iterative-ctx`: the same with a context pack in front);
//! - beam search: a translate phase then an optimise phase; every iteration expands each of the
//!   B beam elements into K candidates and keeps the best B of the beam and its children
//!   (correct before incorrect, then by speedup; runtime errors before compile errors).
//!
//! Samples are numbered per workload in the order they are drawn (turn-major for iterative,
//! iteration-major for beam), which is the order of the fast1@N curve.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::accounting::Outcome;
use super::agent::Sampling;
use super::feedback::Evaluation;
use super::hardware::Device;
use super::prompt::{self, Benchmark, Feedback, Phase, Previous, Prompt, PromptInput};
use super::translate::TranslateJob;

/// A method and its parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum Method {
    BestOfN {
        samples: usize,
    },
    Iterative {
        chains: usize,
        turns: usize,
    },
    Beam {
        beam: usize,
        candidates: usize,
        translate_iters: usize,
        optimize_iters: usize,
    },
}

impl Method {
    /// Samples per benchmark.
    pub fn budget(&self) -> usize {
        match self {
            Method::BestOfN { samples } => *samples,
            Method::Iterative { chains, turns } => chains * turns,
            Method::Beam {
                beam,
                candidates,
                translate_iters,
                optimize_iters,
            } => beam * candidates * (translate_iters + optimize_iters),
        }
    }
}

/// The answer of a translate step.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Code(String),
    NoCode,
    ApiError(String),
}

/// A translated sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Translation {
    pub answer: Answer,
    /// The translate step's key.
    pub key: Option<String>,
    /// Answered from the cache.
    pub cached: bool,
}

/// What runs the samples: the CLI's runner uses the build engine; tests use a fake.
pub trait Runner {
    /// One translation per job, in order. An error stops the method (the endpoint is gone, the
    /// run was interrupted).
    fn translate(&mut self, jobs: &[TranslateJob]) -> anyhow::Result<Vec<Translation>>;
    /// One evaluation per (workload, code), in order.
    fn evaluate(&mut self, candidates: &[(String, String)]) -> anyhow::Result<Vec<Evaluation>>;
}

/// Everything prompts are made from.
pub struct Plan<'a> {
    pub device: &'a Device,
    pub benches: &'a [Benchmark],
    /// Context pack text per workload (`iterative-ctx`); empty for the other methods.
    pub contexts: HashMap<String, String>,
    pub sampling: Sampling,
}

/// One finished sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub workload: String,
    pub number: usize,
    pub tag: String,
    pub chain: Option<usize>,
    /// Turn (iterative) or iteration (beam).
    pub step: usize,
    pub phase: Phase,
    /// The sample this one refined.
    pub parent: Option<usize>,
    pub translation: Translation,
    pub eval: Option<Evaluation>,
    pub outcome: Outcome,
}

impl Sample {
    pub fn code(&self) -> Option<&str> {
        match &self.translation.answer {
            Answer::Code(c) => Some(c),
            _ => None,
        }
    }

    pub fn speedup(&self) -> Option<f64> {
        self.eval.as_ref().and_then(|e| e.speedup)
    }

    pub fn feedback(&self) -> Feedback {
        match (&self.translation.answer, &self.eval) {
            (Answer::NoCode, _) => Feedback::NoCode,
            (Answer::ApiError(m), _) => Feedback::ApiError(m.clone()),
            (Answer::Code(_), Some(e)) => e.feedback.clone(),
            (Answer::Code(_), None) => Feedback::Failed {
                outcome: "eval_error".into(),
                output: "the candidate was not evaluated".into(),
            },
        }
    }

    pub fn profile(&self) -> Option<String> {
        self.eval.as_ref().and_then(|e| e.profile.clone())
    }
}

/// Every sample of every workload, in the benchmarks' order.
pub type Samples = Vec<(String, Vec<Sample>)>;

/// A sample to draw: where it sits and what it refines.
struct Draw {
    workload: String,
    tag: String,
    chain: Option<usize>,
    step: usize,
    phase: Phase,
    parent: Option<usize>,
    previous: Option<Previous>,
}

struct State<'p, 'a> {
    plan: &'p Plan<'a>,
    samples: BTreeMap<String, Vec<Sample>>,
}

impl<'p, 'a> State<'p, 'a> {
    fn new(plan: &'p Plan<'a>) -> Self {
        State {
            plan,
            samples: plan
                .benches
                .iter()
                .map(|b| (b.workload.clone(), Vec::new()))
                .collect(),
        }
    }

    fn bench(&self, workload: &str) -> &Benchmark {
        self.plan
            .benches
            .iter()
            .find(|b| b.workload == workload)
            .expect("a planned workload")
    }

    fn prompt(&self, d: &Draw) -> Prompt {
        prompt::build(&PromptInput {
            device: self.plan.device,
            bench: self.bench(&d.workload),
            context: self.plan.contexts.get(&d.workload).map(String::as_str),
            previous: d.previous.as_ref(),
            phase: d.phase,
        })
    }

    /// What a refinement of `idx` is told: its result, profile and source (`source_idx`, the
    /// latest sample of the lineage that had code).
    fn previous(&self, workload: &str, idx: usize, source_idx: Option<usize>) -> Previous {
        let s = &self.samples[workload];
        Previous {
            source: source_idx.and_then(|i| s[i].code().map(str::to_string)),
            feedback: s[idx].feedback(),
            profile: s[idx].profile(),
        }
    }

    /// Translate and evaluate one batch; returns the new samples' (workload, number).
    fn draw(
        &mut self,
        runner: &mut dyn Runner,
        draws: Vec<Draw>,
        on_sample: &mut dyn FnMut(&Sample),
    ) -> anyhow::Result<Vec<(String, usize)>> {
        let mut next: HashMap<String, usize> = self
            .samples
            .iter()
            .map(|(w, v)| (w.clone(), v.len()))
            .collect();
        let mut jobs = Vec::with_capacity(draws.len());
        for d in &draws {
            let n = next.get_mut(&d.workload).expect("a planned workload");
            let mut sampling = self.plan.sampling.clone();
            sampling.seed = sampling.seed.map(|s| s.wrapping_add(*n as u64));
            jobs.push(TranslateJob {
                workload: d.workload.clone(),
                tag: d.tag.clone(),
                number: *n,
                prompt: self.prompt(d),
                sampling,
            });
            *n += 1;
        }
        let translations = runner.translate(&jobs)?;
        anyhow::ensure!(
            translations.len() == jobs.len(),
            "the runner translated {} of {} samples",
            translations.len(),
            jobs.len()
        );
        let mut cands = Vec::new();
        let mut cand_of = Vec::new();
        for (j, t) in jobs.iter().zip(&translations) {
            if let Answer::Code(c) = &t.answer {
                cand_of.push(Some(cands.len()));
                cands.push((j.workload.clone(), c.clone()));
            } else {
                cand_of.push(None);
            }
        }
        let evals = runner.evaluate(&cands)?;
        anyhow::ensure!(
            evals.len() == cands.len(),
            "the runner evaluated {} of {} candidates",
            evals.len(),
            cands.len()
        );
        let mut out = Vec::new();
        for ((d, job), (t, ci)) in draws
            .into_iter()
            .zip(jobs)
            .zip(translations.into_iter().zip(cand_of))
        {
            let eval = ci.map(|i| evals[i].clone());
            let outcome = match (&t.answer, &eval) {
                (Answer::ApiError(_), _) => Outcome::ApiError,
                (Answer::NoCode, _) => Outcome::NoCode,
                (Answer::Code(_), Some(e)) => e.outcome,
                (Answer::Code(_), None) => Outcome::EvalError,
            };
            let s = Sample {
                workload: d.workload.clone(),
                number: job.number,
                tag: d.tag,
                chain: d.chain,
                step: d.step,
                phase: d.phase,
                parent: d.parent,
                translation: t,
                eval,
                outcome,
            };
            on_sample(&s);
            out.push((d.workload.clone(), job.number));
            let v = self
                .samples
                .get_mut(&d.workload)
                .expect("a planned workload");
            debug_assert_eq!(v.len(), job.number);
            v.push(s);
        }
        Ok(out)
    }

    fn into_samples(mut self) -> Samples {
        self.plan
            .benches
            .iter()
            .map(|b| {
                (
                    b.workload.clone(),
                    self.samples.remove(&b.workload).unwrap_or_default(),
                )
            })
            .collect()
    }
}

fn best_of_n(
    state: &mut State,
    runner: &mut dyn Runner,
    n: usize,
    on_sample: &mut dyn FnMut(&Sample),
) -> anyhow::Result<()> {
    let mut draws = Vec::new();
    for b in state.plan.benches {
        for i in 0..n {
            draws.push(Draw {
                workload: b.workload.clone(),
                tag: i.to_string(),
                chain: None,
                step: 0,
                phase: Phase::Translate,
                parent: None,
                previous: None,
            });
        }
    }
    state.draw(runner, draws, on_sample)?;
    Ok(())
}

fn iterative(
    state: &mut State,
    runner: &mut dyn Runner,
    chains: usize,
    turns: usize,
    on_sample: &mut dyn FnMut(&Sample),
) -> anyhow::Result<()> {
    // (workload, chain) -> (latest sample, latest sample with code)
    let mut heads: HashMap<(String, usize), (Option<usize>, Option<usize>)> = HashMap::new();
    for turn in 0..turns {
        let mut draws = Vec::new();
        for b in state.plan.benches {
            for c in 0..chains {
                let (last, last_code) = heads
                    .get(&(b.workload.clone(), c))
                    .copied()
                    .unwrap_or((None, None));
                draws.push(Draw {
                    workload: b.workload.clone(),
                    tag: format!("c{c}.t{turn}"),
                    chain: Some(c),
                    step: turn,
                    phase: Phase::Translate,
                    parent: last,
                    previous: last.map(|i| state.previous(&b.workload, i, last_code)),
                });
            }
        }
        let drawn = state.draw(runner, draws, on_sample)?;
        for (w, n) in drawn {
            let s = &state.samples[&w][n];
            let chain = s.chain.expect("iterative samples have a chain");
            let has_code = s.code().is_some();
            let e = heads.entry((w, chain)).or_insert((None, None));
            e.0 = Some(n);
            if has_code {
                e.1 = Some(n);
            }
        }
    }
    Ok(())
}

/// Beam ranking: correct kernels by speedup, then wrong output, runtime error, compile error.
fn score(s: &Sample) -> Option<(u8, f64)> {
    let tier = match s.outcome {
        Outcome::CorrectFaster | Outcome::CorrectSlower | Outcome::CorrectUnmeasured => 4,
        Outcome::Incorrect => 3,
        Outcome::RuntimeError => 2,
        Outcome::CompileError => 1,
        Outcome::EvalError => 0,
        Outcome::ApiError | Outcome::NoCode => return None,
    };
    Some((tier, s.speedup().unwrap_or(0.0)))
}

/// The best `width` of `pool` (sample numbers), distinct code only, newer first among equals.
fn select(samples: &[Sample], pool: &[usize], width: usize) -> Vec<usize> {
    let mut ranked: Vec<(usize, (u8, f64))> = pool
        .iter()
        .filter_map(|&i| score(&samples[i]).map(|sc| (i, sc)))
        .collect();
    ranked.sort_by(|a, b| {
        b.1 .0
            .cmp(&a.1 .0)
            .then(b.1 .1.total_cmp(&a.1 .1))
            .then(b.0.cmp(&a.0))
    });
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (i, _) in ranked {
        if out.len() == width {
            break;
        }
        if seen.insert(samples[i].code().unwrap_or_default().to_string()) {
            out.push(i);
        }
    }
    out
}

fn beam_search(
    state: &mut State,
    runner: &mut dyn Runner,
    width: usize,
    per_element: usize,
    translate_iters: usize,
    optimize_iters: usize,
    on_sample: &mut dyn FnMut(&Sample),
) -> anyhow::Result<()> {
    // workload -> beam (sample numbers; empty = start from the reference)
    let mut beams: HashMap<String, Vec<usize>> = HashMap::new();
    for it in 0..translate_iters + optimize_iters {
        let phase = if it < translate_iters {
            Phase::Translate
        } else {
            Phase::Optimize
        };
        let mut draws = Vec::new();
        for b in state.plan.benches {
            let beam = beams.get(&b.workload).cloned().unwrap_or_default();
            for e in 0..width {
                let parent = (!beam.is_empty()).then(|| beam[e % beam.len()]);
                for k in 0..per_element {
                    draws.push(Draw {
                        workload: b.workload.clone(),
                        tag: format!("i{it}.e{e}.k{k}"),
                        chain: Some(e),
                        step: it,
                        phase,
                        parent,
                        previous: parent.map(|p| state.previous(&b.workload, p, Some(p))),
                    });
                }
            }
        }
        let drawn = state.draw(runner, draws, on_sample)?;
        for b in state.plan.benches {
            let mut pool = beams.get(&b.workload).cloned().unwrap_or_default();
            pool.extend(
                drawn
                    .iter()
                    .filter(|(w, _)| *w == b.workload)
                    .map(|(_, n)| *n),
            );
            let next = select(&state.samples[&b.workload], &pool, width);
            beams.insert(b.workload.clone(), next);
        }
    }
    Ok(())
}

/// Run a method; `on_sample` sees every sample as it finishes.
pub fn run(
    method: &Method,
    plan: &Plan,
    runner: &mut dyn Runner,
    on_sample: &mut dyn FnMut(&Sample),
) -> anyhow::Result<Samples> {
    let mut state = State::new(plan);
    match *method {
        Method::BestOfN { samples } => best_of_n(&mut state, runner, samples, on_sample)?,
        Method::Iterative { chains, turns } => {
            iterative(&mut state, runner, chains, turns, on_sample)?
        }
        Method::Beam {
            beam,
            candidates,
            translate_iters,
            optimize_iters,
        } => beam_search(
            &mut state,
            runner,
            beam,
            candidates,
            translate_iters,
            optimize_iters,
            on_sample,
        )?,
    }
    Ok(state.into_samples())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::hardware::by_id;

    /// Answers by a rule on the job; evaluates code by its first word: `fast` (2x), `slow`
    /// (0.5x), `wrong`, `broken`.
    struct Fake {
        answer: Box<dyn Fn(&TranslateJob) -> Answer>,
        prompts: Vec<(String, String, String)>,
        batches: Vec<usize>,
    }

    impl Runner for Fake {
        fn translate(&mut self, jobs: &[TranslateJob]) -> anyhow::Result<Vec<Translation>> {
            self.batches.push(jobs.len());
            Ok(jobs
                .iter()
                .map(|j| {
                    self.prompts
                        .push((j.workload.clone(), j.tag.clone(), j.prompt.user.clone()));
                    Translation {
                        answer: (self.answer)(j),
                        key: Some(format!("{}/{}", j.workload, j.tag)),
                        cached: false,
                    }
                })
                .collect())
        }

        fn evaluate(&mut self, c: &[(String, String)]) -> anyhow::Result<Vec<Evaluation>> {
            Ok(c.iter()
                .map(|(_, code)| {
                    let (status, speedup) = match code.split_whitespace().next() {
                        Some("fast") => ("correct", Some(2.0)),
                        Some("slow") => ("correct", Some(0.5)),
                        Some("wrong") => ("incorrect", None),
                        _ => ("compile_error", None),
                    };
                    let outcome = Outcome::of_eval(status, speedup, Some("artifact"));
                    Evaluation {
                        outcome,
                        status: status.into(),
                        speedup,
                        kernel_ms: speedup.map(|s| 1.0 / s),
                        xla_ms: Some(1.0),
                        feedback: if outcome.is_correct() {
                            Feedback::Correct {
                                latency_ms: speedup.map(|s| 1.0 / s),
                                xla_ms: Some(1.0),
                                speedup,
                                interpret: false,
                            }
                        } else {
                            Feedback::Failed {
                                outcome: outcome.as_str().into(),
                                output: format!("{status} because of {code}"),
                            }
                        },
                        profile: speedup.map(|s| format!("PROFILE {s}")),
                    }
                })
                .collect())
        }
    }

    fn benches() -> Vec<Benchmark> {
        ["12p_RMSNorm", "8p_GEMM"]
            .iter()
            .map(|w| Benchmark {
                workload: w.to_string(),
                line: format!("{w} line"),
                reference: format!("# reference of {w}\ndef workload(x):\n    return x\n"),
            })
            .collect()
    }

    fn plan(b: &[Benchmark]) -> Plan<'_> {
        Plan {
            device: by_id("cpu").unwrap(),
            benches: b,
            contexts: HashMap::new(),
            sampling: Sampling::default(),
        }
    }

    fn fake(f: impl Fn(&TranslateJob) -> Answer + 'static) -> Fake {
        Fake {
            answer: Box::new(f),
            prompts: Vec::new(),
            batches: Vec::new(),
        }
    }

    #[test]
    fn best_of_n_draws_n_independent_samples() {
        let b = benches();
        let p = plan(&b);
        let mut r = fake(|j| match j.number {
            0 => Answer::NoCode,
            1 => Answer::Code("wrong".into()),
            _ => Answer::Code("fast".into()),
        });
        let mut seen = 0;
        let out = run(&Method::BestOfN { samples: 3 }, &p, &mut r, &mut |_| {
            seen += 1
        })
        .unwrap();
        assert_eq!(seen, 6);
        assert_eq!(r.batches, [6]);
        for (_, s) in &out {
            let o: Vec<Outcome> = s.iter().map(|x| x.outcome).collect();
            assert_eq!(
                o,
                [Outcome::NoCode, Outcome::Incorrect, Outcome::CorrectFaster]
            );
            assert_eq!(
                s.iter().map(|x| x.tag.as_str()).collect::<Vec<_>>(),
                ["0", "1", "2"]
            );
        }
        // Independent: every prompt of a workload is the same first-turn prompt.
        let first: Vec<&String> = r
            .prompts
            .iter()
            .filter(|p| p.0 == "8p_GEMM")
            .map(|p| &p.2)
            .collect();
        assert!(first
            .iter()
            .all(|u| *u == first[0] && !u.contains("# Result")));
    }

    #[test]
    fn iterative_chains_feed_back_and_stay_independent() {
        let b = benches();
        let p = plan(&b);
        // chain 0: broken -> no code -> fast; chain 1: wrong -> slow -> fast
        let mut r = fake(|j| {
            let (c, t) = (j.tag.as_bytes()[1] - b'0', j.tag.as_bytes()[4] - b'0');
            match (c, t) {
                (0, 0) => Answer::Code("broken c0".into()),
                (0, 1) => Answer::NoCode,
                (1, 0) => Answer::Code("wrong c1".into()),
                (1, 1) => Answer::Code("slow c1".into()),
                _ => Answer::Code(format!("fast c{c} t{t}")),
            }
        });
        let out = run(
            &Method::Iterative {
                chains: 2,
                turns: 3,
            },
            &p,
            &mut r,
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(r.batches, [4, 4, 4], "one batch per turn, all chains");
        let s = &out[0].1;
        assert_eq!(
            s.iter().map(|x| x.tag.as_str()).collect::<Vec<_>>(),
            ["c0.t0", "c1.t0", "c0.t1", "c1.t1", "c0.t2", "c1.t2"],
            "turn-major numbering"
        );
        assert_eq!(s[2].parent, Some(0));
        assert_eq!(s[5].parent, Some(3));
        let prompt = |tag: &str| {
            r.prompts
                .iter()
                .find(|p| p.0 == "12p_RMSNorm" && p.1 == tag)
                .unwrap()
                .2
                .clone()
        };
        assert!(!prompt("c0.t0").contains("# Result"));
        let t1 = prompt("c0.t1");
        assert!(t1.contains("broken c0") && t1.contains("compile_error because of broken c0"));
        assert!(!t1.contains("wrong c1"), "chains are independent");
        // After a no-code turn: the feedback says so, the source is the last code of the chain.
        let t2 = prompt("c0.t2");
        assert!(t2.contains("contained no ```python code block"));
        assert!(t2.contains("broken c0"));
        // Correct previous: speedup and profile.
        let c1t2 = prompt("c1.t2");
        assert!(c1t2.contains("slow c1") && c1t2.contains("speedup 0.500x"));
        assert!(c1t2.contains("PROFILE 0.5"));
    }

    #[test]
    fn beam_keeps_the_best_and_switches_phase() {
        let b = benches();
        let p = plan(&b);
        let mut r = fake(|j| {
            let it = j.tag.as_bytes()[1] - b'0';
            let k = j.tag.rsplit('k').next().unwrap().parse::<usize>().unwrap();
            match (it, k) {
                (0, 0) if j.tag == "i0.e0.k0" => Answer::Code(format!("slow {}", j.tag)),
                (0, 1) => Answer::Code(format!("wrong {}", j.tag)),
                (0, _) => Answer::NoCode,
                (_, 0) => Answer::Code(format!("fast {}", j.tag)),
                _ => Answer::Code(format!("broken {}", j.tag)),
            }
        });
        let m = Method::Beam {
            beam: 2,
            candidates: 3,
            translate_iters: 1,
            optimize_iters: 2,
        };
        assert_eq!(m.budget(), 18);
        let out = run(&m, &p, &mut r, &mut |_| {}).unwrap();
        let s = &out[1].1;
        assert_eq!(s.len(), 18);
        assert_eq!(r.batches, [12, 12, 12]);
        // Iteration 0 starts from the reference; iteration 1 refines the best two: the slow
        // correct kernel (element 0) and the newer of the two wrong ones (element 1).
        assert!(s[..6]
            .iter()
            .all(|x| x.parent.is_none() && x.phase == Phase::Translate));
        let it1: Vec<&Sample> = s.iter().filter(|x| x.step == 1).collect();
        assert!(it1.iter().all(|x| x.phase == Phase::Optimize));
        assert_eq!(it1[0].parent, Some(0), "slow correct i0.e0.k0 ranks first");
        assert_eq!(
            it1[3].parent,
            Some(4),
            "wrong i0.e1.k1 ranks before the older wrong"
        );
        let prompt = &r
            .prompts
            .iter()
            .find(|p| p.0 == "8p_GEMM" && p.1 == "i1.e0.k0")
            .unwrap()
            .2;
        assert!(prompt.contains("slow i0.e0.k0") && prompt.contains("(1) larger"));
        // Iteration 2 refines the fast kernels of iteration 1.
        let it2: Vec<&Sample> = s.iter().filter(|x| x.step == 2).collect();
        let parents: HashSet<usize> = it2.iter().filter_map(|x| x.parent).collect();
        for p in parents {
            assert_eq!(s[p].outcome, Outcome::CorrectFaster);
        }
    }

    #[test]
    fn beam_restarts_from_the_reference_when_nothing_has_code() {
        let b = benches();
        let p = plan(&b);
        let mut r = fake(|_| Answer::NoCode);
        let out = run(
            &Method::Beam {
                beam: 1,
                candidates: 2,
                translate_iters: 2,
                optimize_iters: 0,
            },
            &p,
            &mut r,
            &mut |_| {},
        )
        .unwrap();
        assert!(out[0].1.iter().all(|x| x.parent.is_none()));
    }

    #[test]
    fn runner_errors_stop_the_method() {
        struct Failing;
        impl Runner for Failing {
            fn translate(&mut self, _: &[TranslateJob]) -> anyhow::Result<Vec<Translation>> {
                anyhow::bail!("endpoint gone")
            }
            fn evaluate(&mut self, _: &[(String, String)]) -> anyhow::Result<Vec<Evaluation>> {
                unreachable!()
            }
        }
        let b = benches();
        let p = plan(&b);
        let e = run(
            &Method::BestOfN { samples: 1 },
            &p,
            &mut Failing,
            &mut |_| {},
        )
        .unwrap_err();
        assert!(e.to_string().contains("endpoint gone"));
    }

    #[test]
    fn seeds_are_offset_by_the_sample_number() {
        let b = benches();
        let mut p = plan(&b);
        p.sampling.seed = Some(100);
        struct Seeds(Vec<Option<u64>>);
        impl Runner for Seeds {
            fn translate(&mut self, jobs: &[TranslateJob]) -> anyhow::Result<Vec<Translation>> {
                self.0.extend(jobs.iter().map(|j| j.sampling.seed));
                Ok(jobs
                    .iter()
                    .map(|_| Translation {
                        answer: Answer::NoCode,
                        key: None,
                        cached: false,
                    })
                    .collect())
            }
            fn evaluate(&mut self, _: &[(String, String)]) -> anyhow::Result<Vec<Evaluation>> {
                Ok(vec![])
            }
        }
        let mut r = Seeds(vec![]);
        run(&Method::BestOfN { samples: 2 }, &p, &mut r, &mut |_| {}).unwrap();
        assert_eq!(r.0, [Some(100), Some(101), Some(100), Some(101)]);
    }
}
