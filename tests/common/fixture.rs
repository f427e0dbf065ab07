//! A run database filled through the library with fixed records (no Python): XLA baselines,
//! hand-tuned defaults and grid results, candidate kernels with every kind of outcome, a
//! `jb eval` one-off, samples, a trace blob and an extension table. (Included by the report and
//! archive tests with `#[path]`.)
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;

use jb::cache::{ActionRecord, Cache};
use jb::key::{hash_hex, output_digest, KeyComponents};
use serde_json::{json, Value};

use crate::common::TestProject;

pub fn env() -> BTreeMap<String, String> {
    [
        ("backend", "tpu"),
        ("device_count", "1"),
        ("device_kind", "TPU v6 lite"),
        ("jax", "0.7.2"),
        ("jaxlib", "0.7.2"),
        ("python", "3.11.9"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

pub struct Fixture<'a> {
    pub project: &'a TestProject,
    pub cache: Cache,
    clock: f64,
}

impl<'a> Fixture<'a> {
    pub fn new(project: &'a TestProject) -> Self {
        let cache = Cache::open(&project.path().join("cache")).unwrap();
        Fixture {
            project,
            cache,
            clock: 1_750_000_000.0,
        }
    }

    /// Store one record whose key and output digest recompute, as the engine would.
    #[allow(clippy::too_many_arguments)]
    pub fn put(
        &mut self,
        step_id: &str,
        kind: &str,
        status: &str,
        result: Value,
        inputs: &[&str],
        files: &[(&str, &[u8])],
    ) -> String {
        let mut comps = KeyComponents::new();
        comps.set("kind", kind);
        comps.set_json("param:step", &json!(step_id));
        for i in inputs {
            let content = std::fs::read(self.project.path().join(i)).unwrap();
            comps.set(format!("input:{i}"), hash_hex(&content));
        }
        if matches!(kind, "compile" | "verify" | "profile") {
            for (k, v) in env() {
                comps.set(format!("env:{k}"), v);
            }
            comps.set("scale", "paper");
        }
        let mut file_digests = BTreeMap::new();
        for (name, data) in files {
            file_digests.insert(name.to_string(), self.cache.cas.put_bytes(data).unwrap());
        }
        let mut result = result;
        result["status"] = json!(status);
        if !file_digests.is_empty() {
            result["files"] = json!(file_digests);
        }
        self.clock += 1.0;
        let rec = ActionRecord {
            key: comps.key(),
            step_id: step_id.into(),
            kind: kind.into(),
            status: status.into(),
            output_digest: output_digest(&result, &file_digests),
            result,
            files: file_digests,
            components: comps,
            created_at: self.clock,
            duration_ms: 100.0,
        };
        self.cache.db.put_action(&rec).unwrap();
        rec.key
    }

    fn profile(&mut self, step: &str, ms: f64, flops: f64, bytes: f64, inputs: &[&str]) -> String {
        let samples: Vec<f64> = (0..5)
            .map(|i| ms * (1.0 + 0.01 * (i as f64 - 2.0)))
            .collect();
        self.put(
            step,
            "profile",
            "ok",
            json!({"median_ms": ms, "samples_ms": samples, "flops": flops, "bytes": bytes, "interpret": false}),
            inputs,
            &[],
        )
    }

    fn compile_ok(&mut self, step: &str, flops: f64, bytes: f64, inputs: &[&str]) -> String {
        self.put(
            step,
            "compile",
            "ok",
            json!({"cost": {"flops": flops, "bytes_accessed": bytes}, "has_pallas_call": step.contains("eval"), "interpret": false}),
            inputs,
            &[],
        )
    }

    fn candidate(
        &mut self,
        pipeline: &str,
        w: &str,
        vars: &str,
        file: &str,
        outcome: &str,
        ms: Option<f64>,
    ) {
        let (flops, bytes) = (1e12, 4e9);
        let id = |s: &str| format!("{pipeline}/{s}[workload={w}{vars}]");
        let inputs = [format!("workloads/{w}/workload.py"), file.to_string()];
        let inputs: Vec<&str> = inputs.iter().map(String::as_str).collect();
        if outcome == "compile_error" {
            self.put(
                &id("compile"),
                "compile",
                "compile_error",
                json!({"reasons": ["NameError: name 'pl' is not defined"]}),
                &inputs,
                &[],
            );
            return;
        }
        // The one-off `jb eval` candidate could not be exported: judged in the sandbox.
        let trust = if pipeline == "jb-eval" {
            "sandboxed"
        } else {
            "artifact"
        };
        self.put(
            &id("compile"),
            "compile",
            "ok",
            json!({"cost": {"flops": flops, "bytes_accessed": bytes}, "has_pallas_call": true, "interpret": false, "trust": trust}),
            &inputs,
            &[],
        );
        let verify = json!({"trials": [{"seed": 1, "dist": "normal", "ok": outcome == "correct"}], "max_abs_err": if outcome == "correct" { 1e-3 } else { 3.5 }, "max_rel_err": 1e-3, "reasons": if outcome == "correct" { json!([]) } else { json!(["max abs err 3.5 > atol 0.01"]) }, "trust": trust});
        self.put(&id("verify"), "verify", outcome, verify, &inputs, &[]);
        if let Some(ms) = ms {
            let samples: Vec<f64> = (0..5)
                .map(|i| ms * (1.0 + 0.01 * (i as f64 - 2.0)))
                .collect();
            self.put(
                &id("profile"),
                "profile",
                "ok",
                json!({"median_ms": ms, "samples_ms": samples, "flops": flops, "bytes": bytes, "interpret": false, "trust": trust}),
                &inputs,
                &[],
            );
        }
    }
}

const WORKLOADS: &[&str] = &[
    "1p_Flash_Attention",
    "5p_Flex_Attention",
    "7p_Ragged_Paged_Attention",
    "8p_GEMM",
    "12p_RMSNorm",
    "19k_Matmul_Subtract_Multiply_ReLU",
];

/// Project files the records name (their hashes are in the keys).
pub fn write_project(p: &TestProject) {
    p.write(
        "pipelines/baseline.yaml",
        "description: fixture\nsteps:\n  compile:\n    kind: compile\n    foreach: [{match: \"workloads/{workload}/workload.py\"}]\n    params: {workload: \"workloads/{workload}\", impl: {kind: xla}}\n",
    );
    for w in WORKLOADS {
        p.write(
            &format!("workloads/{w}/workload.py"),
            &format!("CONFIG = {{'name': '{w}'}}\n"),
        );
    }
    for w in ["1p_Flash_Attention", "7p_Ragged_Paged_Attention", "8p_GEMM"] {
        p.write(
            &format!("tokamax_baselines/{w}/baseline.py"),
            "DEFAULTS = {}\n",
        );
    }
    for (w, c) in [
        ("1p_Flash_Attention", "flash_pallas"),
        ("1p_Flash_Attention", "flash_wrong"),
        ("8p_GEMM", "gemm_broken"),
        ("8p_GEMM", "gemm_tiled"),
        ("12p_RMSNorm", "rmsnorm_pallas"),
    ] {
        p.write(
            &format!("candidates/{w}/{c}.py"),
            &format!("# {c}\ndef workload(*inputs):\n    ...\n"),
        );
    }
    p.write("scratch/my_rmsnorm.py", "# one-off\n");
}

/// The fixed records. Numbers follow the paper's v6e tables where it has them.
pub fn populate(p: &TestProject) -> Fixture<'_> {
    write_project(p);
    let mut f = Fixture::new(p);
    let wl = |w: &str| format!("workloads/{w}/workload.py");
    let base = |w: &str, s: &str| format!("baseline/{s}[workload={w}]");
    let xla: &[(&str, f64, f64, f64)] = &[
        ("1p_Flash_Attention", 25.21, 2.2e12, 8.6e9),
        ("7p_Ragged_Paged_Attention", 18.70, 2.1e11, 1.1e10),
        ("8p_GEMM", 5.36, 3.848290697216e12, 1.1e9),
        ("12p_RMSNorm", 1.1385, 1.34e9, 1.07e9),
    ];
    let run = f.cache.db.start_run("jb build (fixture)", "{}").unwrap();
    for (w, ms, flops, bytes) in xla {
        let i = wl(w);
        f.compile_ok(&base(w, "compile"), *flops, *bytes, &[&i]);
        let key = if *w == "1p_Flash_Attention" {
            let samples: Vec<f64> = (0..5)
                .map(|k| ms * (1.0 + 0.01 * (k as f64 - 2.0)))
                .collect();
            let key = f.put(
                &base(w, "profile"),
                "profile",
                "ok",
                json!({"median_ms": ms, "samples_ms": samples, "flops": flops, "bytes": bytes, "interpret": false, "trace": "trace/host.trace.json.gz"}),
                &[&i],
                &[("trace/host.trace.json.gz", b"fixture trace: not a real profile\n")],
            );
            f.cache
                .db
                .add_samples(&key, run, &samples, &samples)
                .unwrap();
            key
        } else {
            f.profile(&base(w, "profile"), *ms, *flops, *bytes, &[&i])
        };
        let _ = key;
    }
    f.cache.db.finish_run(run, "ok").unwrap();
    // 5p: compiles, fails under the profiler.
    let i = wl("5p_Flex_Attention");
    f.compile_ok(&base("5p_Flex_Attention", "compile"), 1.3e12, 3.0e10, &[&i]);
    f.put(
        &base("5p_Flex_Attention", "profile"),
        "profile",
        "runtime_error",
        json!({"reasons": ["RESOURCE_EXHAUSTED: out of memory allocating 17179869184 bytes"]}),
        &[&i],
        &[],
    );

    // Hand-tuned: 1p tuned and default; 8p tuned, default invalid; 7p unsupported.
    let best = |cfg: &str, ms: f64| json!({"best": {"config": cfg, "params": {}, "median_ms": ms}, "ranked": [{"config": cfg, "median_ms": ms}], "tried": 3, "valid": 1, "invalid": [], "failed": [], "unsupported": []});
    let w = "1p_Flash_Attention";
    let cfg = "block_q=2048,block_k_major=2048,block_k=1024";
    f.profile(
        &format!("tune/profile[workload={w},config={cfg}]"),
        6.45,
        2.2e12,
        8.6e9,
        &[&wl(w)],
    );
    f.put(
        &format!("tune/best[workload={w}]"),
        "grid",
        "ok",
        best(cfg, 6.45),
        &[],
        &[],
    );
    f.profile(
        &format!("tune/default_profile[workload={w}]"),
        7.10,
        2.2e12,
        8.6e9,
        &[&wl(w)],
    );
    let w = "8p_GEMM";
    let cfg = "bm=1024,bn=2048,bk=1024";
    f.profile(
        &format!("tune/profile[workload={w},config={cfg}]"),
        5.59,
        3.848290697216e12,
        1.1e9,
        &[&wl(w)],
    );
    f.put(
        &format!("tune/best[workload={w}]"),
        "grid",
        "ok",
        best(cfg, 5.59),
        &[],
        &[],
    );
    // Invalid: its verify and profile inherit the status and leave no record.
    f.put(
        &format!("tune/default_compile[workload={w}]"),
        "compile",
        "invalid",
        json!({"reasons": ["bn=2048 does not divide N=28672"]}),
        &[&wl(w)],
        &[],
    );
    f.put(
        "tune/best[workload=7p_Ragged_Paged_Attention]",
        "grid",
        "unsupported",
        json!({"reasons": ["every configuration is unsupported on this backend"], "tried": 9, "valid": 0, "invalid": [], "failed": [], "unsupported": [{"config": "kv=16,q=32"}], "ranked": []}),
        &[],
        &[],
    );

    // Candidates (the eval pipeline).
    let c = |w: &str, n: &str| (format!(",candidate={n}"), format!("candidates/{w}/{n}.py"));
    let (v, file) = c("1p_Flash_Attention", "flash_pallas");
    f.candidate(
        "eval",
        "1p_Flash_Attention",
        &v,
        &file,
        "correct",
        Some(9.44),
    );
    let (v, file) = c("1p_Flash_Attention", "flash_wrong");
    f.candidate("eval", "1p_Flash_Attention", &v, &file, "incorrect", None);
    let (v, file) = c("8p_GEMM", "gemm_broken");
    f.candidate("eval", "8p_GEMM", &v, &file, "compile_error", None);
    let (v, file) = c("8p_GEMM", "gemm_tiled");
    f.candidate("eval", "8p_GEMM", &v, &file, "correct", Some(7.15));
    let (v, file) = c("12p_RMSNorm", "rmsnorm_pallas");
    f.candidate("eval", "12p_RMSNorm", &v, &file, "correct", Some(0.9));
    // A `jb eval` one-off, faster than the eval candidate.
    f.candidate(
        "jb-eval",
        "12p_RMSNorm",
        "",
        "scratch/my_rmsnorm.py",
        "correct",
        Some(0.8),
    );
    f
}

/// An extension table, as another module of jb would add to the run database.
pub fn add_extension_table(cache_dir: &Path) {
    let conn = rusqlite::Connection::open(cache_dir.join("jb.sqlite")).unwrap();
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS ext_samples (method TEXT NOT NULL, workload TEXT NOT NULL, idx INTEGER NOT NULL, outcome TEXT, tokens INTEGER, PRIMARY KEY (method, workload, idx));
         INSERT OR REPLACE INTO ext_samples VALUES ('best-of-n', '8p_GEMM', 2, 'correct', 812), ('best-of-n', '8p_GEMM', 1, 'compile_error', 640);",
    )
    .unwrap();
}
