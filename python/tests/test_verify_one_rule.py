"""One correctness rule, one owner (issue 22.1): verify, the profile step's timed-output check and
the recheck of sandboxed verdicts make the same judgement (jb.compare.judge / DeviceCheck on
jb.compare.bounds), so an honest bf16 program that verify accepts is not rejected seconds later by
a stricter rule, and a wrong one is caught by each (tiny scale)."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from jb import tolerance
from jb.compare import DeviceCheck, bounds, judge
from jb.ops import profile, recheck, verify

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
SEED = 4_242


def _wl(name):
    return str(ROOT / "workloads" / name)


HONEST = [
    ("22k_Conv2d_InstanceNorm_Divide", FIXTURES / "candidates" / "instnorm_bf16_e2e.py"),
    ("13p_Cross_Entropy", FIXTURES / "candidates" / "ce_bf16_e2e.py"),
]


@pytest.mark.parametrize("name,path", HONEST, ids=[h[0] for h in HONEST])
def test_an_honest_bf16_program_passes_every_judge(name, path, tmp_path):
    impl = {"kind": "candidate", "path": str(path)}
    common = {"workload": _wl(name), "scale": "tiny", "impl": impl, "seed": SEED, "allow_pure_jax": True}
    v = verify.run({**common, "dump_outputs": True, "out_dir": str(tmp_path)})
    assert v["status"] == "correct", v["reasons"]
    again = recheck.run({**common, "outputs_dir": str(tmp_path)})
    assert again["status"] == "correct", again["reasons"]
    # The timed-output check (was: the workload's flat atol/rtol, which rejected both programs).
    p = profile.run({**common, "warmup": 1, "iters": 3, "trace_iters": 0})
    assert p["status"] == "ok", p["reasons"]
    assert p["tolerance"]["kind"] == "noise"


def test_device_check_agrees_with_judge():
    """DeviceCheck (on the device) and judge (on the host) on the same bounds: the same verdicts."""
    rng = np.random.default_rng(0)
    import ml_dtypes

    bf16 = ml_dtypes.bfloat16
    a = rng.standard_normal((32, 256)).astype(bf16)
    b = (rng.standard_normal((256, 24)) * 0.05).astype(bf16)
    hi = a.astype(np.float32) @ b.astype(np.float32)
    ref = hi.astype(bf16)
    labels = rng.integers(0, 5, (7,)).astype(np.int32)
    reference, high = (ref, labels), (hi, labels)
    rule = tolerance.Rule()
    check = DeviceCheck(reference, high, None, rule)
    assert check.kind == "noise" and len(bounds(reference, high, None, rule)) == 2
    dropped = (a[:, :-1].astype(np.float32) @ b[:-1].astype(np.float32)).astype(bf16)
    cases = {
        "honest": (ref, labels),
        "halves": ((a[:, :128].astype(np.float32) @ b[:128].astype(np.float32)
                    + a[:, 128:].astype(np.float32) @ b[128:].astype(np.float32)).astype(bf16), labels),
        "dropped": (dropped, labels),
        "zeros": (np.zeros_like(ref), labels),
        "nan": (np.where(np.arange(ref.size).reshape(ref.shape) == 3, np.nan, ref.astype(np.float32)).astype(bf16), labels),
        "labels": (ref, (labels + 1).astype(np.int32)),
        "one_elem": ((hi + np.where(np.arange(hi.size).reshape(hi.shape) == 5, 1.0, 0.0)).astype(bf16), labels),
    }
    seen = {}
    for what, cand in cases.items():
        host = judge(reference, high, None, cand, rule)
        dev = check.verdict(check.dispatch(list(cand)))
        assert host.ok == dev.ok, (what, host, dev)
        seen[what] = host.ok
    assert seen == {"honest": True, "halves": True, "dropped": False, "zeros": False, "nan": False,
                    "labels": False, "one_elem": False}


# ----------------------------------------------------------------------------------------------
# Issue 27.2: cross-entropy kernels wrong about the labels are incorrect at verify


@pytest.mark.parametrize("stem", ["wrong_ce_mask_offset", "wrong_ce_ignore_labels"])
def test_label_bugs_are_incorrect_at_verify(stem):
    path = ROOT / "examples" / "adversarial" / f"{stem}.py"
    r = verify.run({"workload": _wl("13p_Cross_Entropy"), "scale": "tiny", "seed": SEED,
                    "impl": {"kind": "candidate", "path": str(path)}})
    assert r["status"] == "incorrect", r["reasons"]
    by_dist = {t["dist"]: t for t in r["trials"] if "variant" not in t}
    # The random-label trials cannot tell (the mean loss hardly depends on random labels) ...
    assert all(by_dist[d]["ok"] for d in ("normal", "uniform", "signed", "small", "large", "sparse")), r["trials"]
    # ... the trial whose logits know the labels does, by far.
    assert not by_dist["confident"]["ok"] and by_dist["confident"]["rms_ratio"] > 10, by_dist["confident"]
