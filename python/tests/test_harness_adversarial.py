"""Every adversarial candidate in examples/adversarial gets its expected status (tiny scale).

Each file declares ``# target: <workload>`` and ``# expect: <status>``. The in-process ones go
through the verify op; ``crashed``/``timeout`` ones kill or stall the worker and are enforced by jb
(Rust side) -- here their headers are checked, and test_harness_worker.py checks that a crashing
candidate takes the worker down without a forged response.
"""

from __future__ import annotations

import pathlib
import re

import pytest

from jb import guard
from jb.ops import verify

ROOT = pathlib.Path(__file__).resolve().parents[2]
ADVERSARIAL = ROOT / "examples" / "adversarial"
IN_PROCESS = {"correct", "incorrect", "compile_error", "runtime_error", "rejected"}
OUT_OF_PROCESS = {"crashed", "timeout"}
TRIALS = [{"seed": 1, "dist": "normal"}, {"seed": 2, "dist": "uniform"}]

# Reason fragments that must appear, so each file is caught by the check it targets (not by luck).
EXPECTED_REASON = {
    "background_thread": "still running",
    "cache_results": "host callbacks",
    "mutate_input": "mutated",
    "patch_timer": "time.perf_counter",
    "patch_block_until_ready": "block_until_ready",
    "patch_profiler": "jax.profiler",
    "no_pallas": "no pallas_call",
    "nondeterministic": "two runs on the same inputs differ",
    "huge_constant": "as big as",
    "wrong_dtype": "dtype",
    "wrong_shape": "shape",
    "nan_output": "non-finite",
    "tuple_output": "structure",
}
# Extra verify args per file (held-out shape variants for the hard-coded-shape kernel).
EXTRA_ARGS = {"hardcoded_shape": {"variants": [{"emb_dim": 384}]}}
EXPECTED_REASON["hardcoded_shape"] = "variant="
EXPECTED_ERROR_CLASS = {"import_error": "import", "pallas_misuse": "pallas_api"}


def headers(path: pathlib.Path) -> dict:
    text = path.read_text()
    out = dict(re.findall(r"^# (target|expect|exploit): (.+)$", text, re.M))
    return {k: v.strip() for k, v in out.items()}


# trust_*.py attack the process that judges them (forged answers, exits, daemons): they are run
# through export + judge by test_trust_attacks.py, never imported into this test process.
# Files with a "# caught-by:" header (wrong-but-plausible kernels, one per trial class of issue 12)
# need the per-operator trials and shape variants: python/tests/test_trials_adversarial.py runs them.
FILES = sorted(
    p for p in ADVERSARIAL.glob("*.py")
    if not p.stem.startswith("trust_") and "\n# caught-by: " not in p.read_text()
)


def test_every_file_has_headers():
    assert len(FILES) >= 20
    for path in FILES:
        h = headers(path)
        assert {"target", "expect", "exploit"} <= set(h), path.name
        assert h["expect"] in IN_PROCESS | OUT_OF_PROCESS, path.name
        assert (ROOT / "workloads" / h["target"]).is_dir() or h["target"] in ("12p_RMSNorm", "8p_GEMM"), path.name
    assert {headers(p)["expect"] for p in FILES} >= {"incorrect", "rejected", "compile_error", "crashed", "timeout"}


@pytest.mark.parametrize("path", [p for p in FILES if headers(p)["expect"] in IN_PROCESS], ids=lambda p: p.stem)
def test_adversarial_status(path):
    h = headers(path)
    workload = ROOT / "workloads" / h["target"]
    if not (workload / "workload.py").is_file():
        pytest.skip(f"workload {h['target']} not present")
    snapshot = guard.baseline()
    try:
        args = {"workload": str(workload), "scale": "tiny", "trials": TRIALS, "impl": {"kind": "candidate", "path": str(path)}}
        r = verify.run({**args, **EXTRA_ARGS.get(path.stem, {})})
    finally:
        guard.restore(snapshot)  # keep the test process clean whatever the candidate did
        leftover = guard.check(snapshot)
        guard.rebaseline()  # e.g. a background thread that cannot be stopped: accept it from now on
    assert r["status"] == h["expect"], (path.name, r["status"], r["reasons"], r.get("error"))
    fragment = EXPECTED_REASON.get(path.stem)
    if fragment:
        assert any(fragment in reason for reason in r["reasons"]), (path.name, r["reasons"])
    if path.stem in EXPECTED_ERROR_CLASS:
        assert r["error_class"] == EXPECTED_ERROR_CLASS[path.stem], (path.name, r["error_class"], r["error"])
    if r["status"] == "rejected":
        assert r.get("tainted") is True
    assert not [r for r in leftover if "still running" not in r], "the op must restore what the candidate patched"
