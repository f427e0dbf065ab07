"""Issue 22 item 2: shape variants judge what they can. At a held-out variant a candidate that does
not compile, refuses the shape at run time, or answers with another shape is `specialized`
(recorded with the reason, not incorrect); one that answers with the variant's shapes is judged
(wrong there: incorrect). `variants` in the result says which ran; the recheck of a sandboxed
step agrees."""

from __future__ import annotations

import json
import pathlib

import pytest

from jb import outputs
from jb import variants as jb_variants
from jb.ops import recheck, verify

ROOT = pathlib.Path(__file__).resolve().parents[2]
RMSNORM = str(ROOT / "workloads" / "12p_RMSNorm")
FIX = ROOT / "python" / "tests" / "fixtures" / "candidates"
ADV = ROOT / "examples" / "adversarial"
SEED = 4_242_424
VARIANT = [{"emb_dim": 384}]


def _verify(path: pathlib.Path, **extra) -> dict:
    args = {"workload": RMSNORM, "scale": "tiny", "impl": {"kind": "candidate", "path": str(path)}, "seed": SEED,
            "variants": VARIANT}
    args.update(extra)
    return verify.run(args)


@pytest.mark.parametrize("name,why", [("rmsnorm_specialized.py", "does not compile at this shape"),
                                      ("rmsnorm_own_config.py", "built for another shape")])
def test_a_specialized_kernel_is_correct_and_says_so(name, why):
    r = _verify(FIX / name)
    assert r["status"] == "correct", r["reasons"]
    assert r["variants"]["status"] == "specialized" and not r["variants"]["judged"], r["variants"]
    (sp,) = r["variants"]["specialized"]
    assert sp["override"] == VARIANT[0] and why in sp["reason"], sp
    (trial,) = [t for t in r["trials"] if "variant" in t]
    assert trial["specialized"] is True and trial["ok"] is True
    assert any(why in n for n in r["notes"]), r["notes"]


def test_hardcoded_shape_that_runs_at_the_variant_is_still_incorrect():
    r = _verify(ADV / "hardcoded_shape.py")
    assert r["status"] == "incorrect", r["reasons"]
    assert r["variants"] == {"status": "judged", "judged": [{"override": VARIANT[0], "ok": False}], "specialized": []}


def test_a_nan_refusal_is_an_answer_and_judged():
    """The dodge: answer with the variant's shape, NaN-filled, as if NaN meant 'unsupported'."""
    r = _verify(ADV / "wrong_variant_refusal.py")
    assert r["status"] == "incorrect", r["reasons"]
    assert r["variants"]["status"] == "judged"
    assert all(t["ok"] for t in r["trials"] if "variant" not in t)  # exact at its own shape


def test_refusing_the_benchmark_shape_is_not_specialized():
    r = _verify(FIX / "rmsnorm_refuses_all.py", allow_pure_jax=True)
    assert r["status"] == "compile_error", (r["status"], r["reasons"])


def test_an_honest_general_kernel_is_judged_at_the_variant():
    r = _verify(ROOT / "candidates" / "12p_RMSNorm" / "rmsnorm_pallas.py")
    assert r["status"] == "correct" and r["variants"]["status"] == "judged", r["variants"]


def test_recheck_accepts_a_specialized_marker_and_judges_outputs(tmp_path):
    r = _verify(FIX / "rmsnorm_specialized.py", dump_outputs=True, out_dir=str(tmp_path))
    assert r["status"] == "correct"
    name = outputs.name_of(0, 0)
    assert jb_variants.load_marker(tmp_path, name) is not None
    args = {"workload": RMSNORM, "scale": "tiny", "impl": {"kind": "candidate", "path": str(FIX / "rmsnorm_specialized.py")},
            "seed": SEED, "variants": VARIANT, "outputs_dir": str(tmp_path)}
    again = recheck.run(args)
    assert again["status"] == "correct", again["reasons"]
    assert again["variants"]["status"] == "specialized"
    # A marker beside real outputs does not hide them: the outputs are judged.
    wrong = tmp_path / "wrong"
    v = _verify(ADV / "hardcoded_shape.py", dump_outputs=True, out_dir=str(wrong))
    assert v["status"] == "incorrect"
    jb_variants.save_marker(wrong, name, "forged")
    forged = recheck.run({**args, "outputs_dir": str(wrong)})
    assert forged["status"] == "incorrect" and forged["variants"]["status"] == "judged", forged
    # A malformed marker is no marker (the missing outputs are then rejected).
    (tmp_path / outputs.DIR / f"{name}.specialized.json").write_text(json.dumps(["x"]))
    assert recheck.run(args)["status"] == "rejected"
