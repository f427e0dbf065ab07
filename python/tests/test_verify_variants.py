"""Shape variants judge what they can (issue 22.2): a variant the candidate does not compile at is
``specialized`` (recorded with the reason, not incorrect); one where it compiles and is wrong is
incorrect, and a wrong answer disguised as a refusal is judged (tiny scale)."""

from __future__ import annotations

import pathlib

import pytest

from jb.ops import recheck, verify

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
ADV = ROOT / "examples" / "adversarial"
RMSNORM = str(ROOT / "workloads" / "12p_RMSNorm")
TWO = [{"seed": 1, "dist": "normal"}, {"seed": 2, "dist": "uniform"}]


def _verify(path, **extra):
    return verify.run({"workload": RMSNORM, "scale": "tiny", "trials": TWO, "seed": 11,
                       "impl": {"kind": "candidate", "path": str(path)}, **extra})


def test_a_kernel_tuned_to_its_shape_is_correct_and_specialized(tmp_path):
    r = _verify(FIXTURES / "candidates" / "rmsnorm_specialized.py", dump_outputs=True, out_dir=str(tmp_path))
    assert r["status"] == "correct", r["reasons"]
    v = r["variants"]
    assert v["status"] == "specialized" and v["ran"] == [] and len(v["specialized"]) == 1, v
    assert "does not compile at this shape" in v["specialized"][0]["reason"]
    assert "tuned for an embedding of 256" in v["specialized"][0]["reason"]
    assert any(n.startswith("variants: specialized") for n in r["notes"])
    rec = [t for t in r["trials"] if "variant" in t][0]
    assert rec["specialized"] is True and rec["ok"] is True
    # The trusted recheck of a sandboxed verdict agrees (no output written for that variant).
    again = recheck.run({"workload": RMSNORM, "scale": "tiny", "trials": TWO, "seed": 11, "outputs_dir": str(tmp_path),
                         "impl": {"kind": "candidate", "path": "unused"}})
    assert again["status"] == "correct", again["reasons"]
    assert [t.get("specialized") for t in again["trials"] if "variant" in t] == [True]


def test_a_generic_kernel_has_its_variants_judged():
    r = _verify(ROOT / "candidates" / "12p_RMSNorm" / "rmsnorm_pallas.py")
    assert r["status"] == "correct", r["reasons"]
    assert r["variants"]["status"] == "judged" and len(r["variants"]["ran"]) == 1, r["variants"]


@pytest.mark.parametrize("stem,fragment", [
    ("hardcoded_shape", "bound"),            # compiles at the variant and is wrong there
    ("wrong_variant_half_shape", "bound"),   # keeps the shape, wrong values
    ("wrong_variant_dtype_dodge", "dtype"),        # a wrong answer disguised as "does not fit"
])
def test_compiles_and_wrong_at_a_variant_is_incorrect(stem, fragment):
    r = _verify(ADV / f"{stem}.py")
    assert r["status"] == "incorrect", r["reasons"]
    bad = [t for t in r["trials"] if not t["ok"]]
    assert bad and all("variant" in t for t in bad), r["trials"]  # the plain trials pass
    assert fragment in bad[0]["reason"], bad[0]["reason"]
    assert r["variants"]["status"] == "judged" and not r["variants"]["specialized"]
