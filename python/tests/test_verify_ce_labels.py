"""Issue 27.2: two wrong 13p kernels (a tiled vocabulary's label mask without the tile offset, and
one that never reads the labels) passed verify 8/8 at cpu scale: with uniformly random labels
they move the mean loss by ~std(logits)/sqrt(tokens), the size of an honest bf16 program's
rounding. The `confident` trial (labels that carry the answer) makes them `incorrect` at verify,
by a wide margin, while an honest bf16-end-to-end program stays correct on every trial."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from jb import inputs as jbi
from jb.ops import verify
from jb.workload import load_workload

ROOT = pathlib.Path(__file__).resolve().parents[2]
CE = str(ROOT / "workloads" / "13p_Cross_Entropy")
ADV = ROOT / "examples" / "adversarial"
HONEST_BF16 = ROOT / "python" / "tests" / "fixtures" / "candidates" / "honest_ce_bf16.py"
SEED = 20_261_203


def _verify(path: pathlib.Path, **extra) -> dict:
    args = {"workload": CE, "scale": "tiny", "impl": {"kind": "candidate", "path": str(path)}, "seed": SEED,
            "variants": []}
    args.update(extra)
    return verify.run(args)


def test_confident_labels_carry_the_answer():
    wl = load_workload(CE, "tiny")
    base = wl.create_inputs()
    hidden, weight, labels = jbi.make_trial(wl, base, 7, "confident")
    logits = np.asarray(hidden, np.float32) @ np.asarray(weight, np.float32)
    lab = np.asarray(labels)
    assert np.mean(logits.argmax(axis=1) == lab) > 0.6  # the label is the argmax on most tokens
    assert np.mean(logits.argmax(axis=1) == lab) < 1.0  # ... not all (lse - max is not the loss)
    loss = np.mean(np.log(np.sum(np.exp(logits - logits.max(1, keepdims=True)), 1)) + logits.max(1)
                   - logits[np.arange(lab.size), lab])
    assert 0.05 < loss < 3.0, loss
    # every trial of 13p includes it
    assert "confident" in jbi.trial_plan(wl)


@pytest.mark.parametrize("name", ["wrong_ce_mask_offset", "wrong_ce_ignore_labels"])
def test_label_bugs_are_incorrect_at_verify(name):
    r = _verify(ADV / f"{name}.py")
    assert r["status"] == "incorrect", (r["status"], r["reasons"], r.get("error"))
    assert r["has_pallas_call"] is True
    by = {t["dist"]: t for t in r["trials"]}
    # Caught by the confident trial, far beyond the bound (not a margin case)...
    assert not by["confident"]["ok"] and by["confident"]["elem_ratio"] > 5, by["confident"]
    assert by["confident"]["max_abs_err"] > 1.0
    # ... and invisible to the random-label trials (why the trial exists).
    assert by["normal"]["ok"], by["normal"]


def test_honest_bf16_program_is_correct_on_every_trial():
    r = _verify(HONEST_BF16, allow_pure_jax=True)
    assert r["status"] == "correct", r["reasons"]
    assert {t["dist"] for t in r["trials"]} >= {"normal", "large_logits", "confident"}
    assert all(t["elem_ratio"] < 0.5 for t in r["trials"]), [(t["dist"], t["elem_ratio"]) for t in r["trials"]]


def test_the_row_maximum_as_target_does_not_get_past():
    """Attack on the trial itself: if every confident label were the argmax, `lse - max` would be
    exact there. A quarter of its tokens keep random labels, and the random-label trials see it."""
    r = _verify(ROOT / "python" / "tests" / "fixtures" / "candidates" / "ce_row_max_target.py", allow_pure_jax=True)
    assert r["status"] == "incorrect", r["reasons"]
    by = {t["dist"]: t for t in r["trials"]}
    assert not by["confident"]["ok"] and not by["normal"]["ok"], r["reasons"]
