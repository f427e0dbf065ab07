"""A sandboxed verdict is judged again outside the candidate's process: the verify step writes
every trial's output (jb.outputs) and the recheck op, which never imports the candidate, rebuilds
the trials from the seed and judges those files."""

from __future__ import annotations

import pathlib

import numpy as np

from jb import outputs
from jb.ops import recheck, verify

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
RMSNORM = str(ROOT / "workloads" / "12p_RMSNorm")
# Not exportable (TPU interpret mode on CPU): the kind of candidate that is judged in the sandbox.
TPU_ONLY = {"kind": "candidate", "path": str(FIXTURES / "candidates" / "prng_rmsnorm.py")}
SEED = 9_876_543


def _verified(tmp_path) -> dict:
    r = verify.run({"workload": RMSNORM, "scale": "tiny", "impl": TPU_ONLY, "seed": SEED,
                    "dump_outputs": True, "out_dir": str(tmp_path)})
    assert r["status"] == "correct", r["reasons"]
    return r


def _recheck(tmp_path) -> dict:
    return recheck.run({"workload": RMSNORM, "scale": "tiny", "impl": TPU_ONLY, "seed": SEED,
                        "outputs_dir": str(tmp_path)})


def test_honest_outputs_hold_up(tmp_path):
    r = _verified(tmp_path)
    files = sorted(p.name for p in (tmp_path / outputs.DIR).iterdir())
    assert len(files) == len(r["trials"]) and any(f.startswith("variant-") for f in files)
    again = _recheck(tmp_path)
    assert again["status"] == "correct", again["reasons"]
    # The same trials, rebuilt from the seed alone.
    assert [(t["seed"], t["dist"]) for t in again["trials"]] == [(t["seed"], t["dist"]) for t in r["trials"]]


def test_a_forged_verdict_does_not_survive_its_outputs(tmp_path):
    _verified(tmp_path)
    # What a candidate that forged `correct` would have produced: wrong values in one trial.
    leaves = outputs.load(tmp_path, "trial-2")
    outputs.save(tmp_path, "trial-2", [np.zeros_like(a) for a in leaves])
    again = _recheck(tmp_path)
    assert again["status"] == "incorrect"
    assert any("dist=" in r for r in again["reasons"]), again["reasons"]


def test_missing_or_malformed_outputs_are_rejected(tmp_path):
    _verified(tmp_path)
    (tmp_path / outputs.DIR / "trial-0.npz").unlink()
    (tmp_path / outputs.DIR / "variant-0.npz").write_bytes(b"not an archive")
    again = _recheck(tmp_path)
    assert again["status"] == "rejected"
    assert len(again["reasons"]) == 2 and all("outputs do not show it" in r for r in again["reasons"])


def test_a_shape_changed_by_the_files_is_caught(tmp_path):
    _verified(tmp_path)
    leaves = outputs.load(tmp_path, "trial-1")
    outputs.save(tmp_path, "trial-1", [a.reshape(-1) for a in leaves])
    again = _recheck(tmp_path)
    assert again["status"] == "incorrect", again
