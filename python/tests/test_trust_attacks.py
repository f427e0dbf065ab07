"""Issue 10: every trust_* attack of examples/adversarial fails once the candidate only runs in the
export stage (a fresh worker process here; jb's sandbox in production) and the judge runs the
exported program in a process that never imports the candidate (this one).

Each test asserts the judge's verdict and that the attack could not reach the judge: the candidate
file is never imported here, the harness functions it targets are untouched.
"""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest

import jb.compare
import jb.ops.common
from trust_support import ADVERSARIAL, RMSNORM, export_in_worker, imported_files, judge, worker_requests

pytestmark = pytest.mark.skipif(not (RMSNORM / "workload.py").is_file(), reason="12p_RMSNorm missing")


def headers(path: pathlib.Path) -> dict:
    return {k: v.strip() for k, v in re.findall(r"^# (target|expect|exploit): (.+)$", path.read_text(), re.M)}


def attack(name: str) -> pathlib.Path:
    return ADVERSARIAL / f"trust_{name}.py"


def run_attack(name: str, tmp_path: pathlib.Path) -> tuple[dict | None, pathlib.Path, str]:
    path = attack(name)
    answer, stderr = export_in_worker(path, RMSNORM, tmp_path)
    return answer, tmp_path / "export", stderr


@pytest.fixture(autouse=True)
def judge_stays_clean():
    code = (jb.compare.compare.__code__, jb.ops.common.stats.__code__)
    yield
    assert (jb.compare.compare.__code__, jb.ops.common.stats.__code__) == code
    leaked = {str(p.resolve()) for p in ADVERSARIAL.glob("trust_*.py")} & imported_files()
    assert not leaked, f"the judge process imported candidate code: {leaked}"


def test_every_trust_attack_has_headers():
    files = sorted(ADVERSARIAL.glob("trust_*.py"))
    assert len(files) >= 10
    for path in files:
        h = headers(path)
        assert {"target", "expect", "exploit"} <= set(h), path.name
        assert (ADVERSARIAL.parents[1] / "workloads" / h["target"]).is_dir(), path.name


def test_forged_protocol_line_never_reaches_the_judge(tmp_path):
    answer, export_dir, _ = run_attack("fake_protocol", tmp_path)
    # The export worker's answer is the candidate's forgery (it found the pipe and the request id)...
    assert answer is not None and answer["result"]["status"] == "ok" and "export_ms" not in answer["result"]
    # ...but the forgery carries no program: the judge rejects what the export stage left.
    verdict = judge("verify", RMSNORM, export_dir)
    assert verdict["status"] == "rejected", verdict
    assert any("index.json" in r for r in verdict["reasons"]), verdict["reasons"]
    assert verdict["trust"] == "artifact"
    assert headers(attack("fake_protocol"))["expect"] == verdict["status"]


def test_poisoned_reference_copies_are_not_the_judges(tmp_path):
    answer, export_dir, _ = run_attack("overwrite_reference", tmp_path)
    assert answer["result"]["status"] == "ok", answer
    verdict = judge("verify", RMSNORM, export_dir)
    assert verdict["status"] == "incorrect", verdict
    assert verdict["max_abs_err"] and verdict["max_abs_err"] > 0.1
    assert headers(attack("overwrite_reference"))["expect"] == verdict["status"]


def test_code_swap_is_caught_in_the_export_stage_and_cannot_reach_the_judge(tmp_path):
    answer, export_dir, _ = run_attack("swap_code", tmp_path)
    result = answer["result"]
    assert result["status"] == "rejected", result
    assert any("__code__" in r and "jb.compare.compare" in r for r in result["reasons"]), result["reasons"]
    # Even judged, its program is what it is: zeros.
    verdict = judge("verify", RMSNORM, export_dir)
    assert verdict["status"] == "incorrect", verdict
    stats = jb.ops.common.stats([1.0, 2.0, 3.0])
    assert stats["median_ms"] == 2.0


def test_blinded_guard_does_not_blind_the_judge(tmp_path):
    answer, export_dir, _ = run_attack("edit_guard", tmp_path)
    assert answer["result"]["status"] == "ok", answer  # the export stage's guard was blinded...
    verdict = judge("verify", RMSNORM, export_dir)
    assert verdict["status"] == "incorrect", verdict  # ...the judge's compare was never touched
    assert headers(attack("edit_guard"))["expect"] == verdict["status"]


def test_profiled_program_is_the_verified_program(tmp_path):
    answer, export_dir, _ = run_attack("profile_switch", tmp_path)
    assert answer["result"]["status"] == "ok", answer
    verdict = judge("verify", RMSNORM, export_dir)
    assert verdict["status"] == "correct", verdict
    profiled = judge("profile", RMSNORM, export_dir)
    assert profiled["status"] == "ok" and profiled["trust"] == "artifact", profiled
    # The exported program gives the honest answer whoever calls it, even from a frame of the
    # profile op's file (the stack the attack looks for): the judge's program has no Python in it.
    from jb.impl import resolve
    from jb.workload import load_workload

    wl = load_workload(RMSNORM, "tiny")
    impl = resolve({"kind": "exported", "path": str(export_dir)}, wl, "cpu", True)
    assert impl.ok, impl
    inputs = wl.create_inputs()
    namespace = {"fn": impl.fn, "inputs": inputs}
    profile_file = str(pathlib.Path(jb.ops.common.__file__).with_name("profile.py"))
    exec(compile("out = fn(*inputs)", profile_file, "exec"), namespace)  # noqa: S102 - a frame "in" profile.py
    expected = wl.fn(*inputs)
    np.testing.assert_allclose(np.asarray(namespace["out"], np.float32), np.asarray(expected, np.float32), atol=2e-2, rtol=2e-2)


def test_host_callback_cannot_be_exported_and_is_rejected_sandboxed(tmp_path):
    answer, _, _ = run_attack("host_callback", tmp_path)
    result = answer["result"]
    assert result["status"] == "not_exportable", result
    assert "callback" in (result["error"] or "").lower() or any("callback" in r for r in result["reasons"]), result
    # jb then runs the whole evaluation in a fresh sandboxed worker, as the candidate kind.
    args = {"workload": str(RMSNORM), "scale": "tiny", "trials": [{"seed": 1, "dist": "normal"}],
            "impl": {"kind": "candidate", "path": str(attack("host_callback"))}}
    answers, _, _ = worker_requests([{"op": "verify", "args": args}], env={"JB_SANDBOXED": "1"})
    verdict = answers[0]["result"]
    assert verdict["status"] == "rejected" and verdict["trust"] == "sandboxed", verdict
    assert any("host callbacks" in r for r in verdict["reasons"]), verdict["reasons"]
    assert headers(attack("host_callback"))["expect"] == verdict["status"]


def test_baked_answer_in_small_constants_is_rejected(tmp_path):
    answer, export_dir, _ = run_attack("huge_constant", tmp_path)
    assert answer["result"]["status"] == "ok", answer
    verdict = judge("verify", RMSNORM, export_dir)
    assert verdict["status"] == "rejected", verdict
    assert any("embedded constant" in r for r in verdict["reasons"]), verdict["reasons"]
    compiled = judge("compile", RMSNORM, export_dir)
    assert compiled["status"] == "rejected", compiled


@pytest.mark.parametrize("name", ["write_files", "daemon"])
def test_damaging_attacks_stay_unarmed_outside_the_sandbox(name, tmp_path):
    """Unarmed (no sandbox, no JB_ATTACK_ARMED) they are honest kernels: exported and judged correct.
    What the sandbox blocks when they are armed is tested on the Rust side (tests/trust*.rs)."""
    answer, export_dir, stderr = run_attack(name, tmp_path)
    assert answer["result"]["status"] == "ok", (answer, stderr[-2000:])
    assert "WROTE" not in stderr
    verdict = judge("verify", RMSNORM, export_dir)
    assert verdict["status"] == "correct" == headers(attack(name))["expect"], verdict


def test_secrets_attack_sees_what_the_export_stage_is_given(tmp_path):
    """Without the sandbox the export worker inherits the environment (the sandbox empties it: Rust tests)."""
    answer, stderr = export_in_worker(attack("env_network"), RMSNORM, tmp_path, env={"OPENAI_API_KEY": "sk-planted"})
    assert answer["result"]["status"] == "ok", answer
    assert "OPENAI_API_KEY" in stderr  # unsandboxed, the planted secret is visible: what the sandbox must stop
    verdict = judge("verify", RMSNORM, tmp_path / "export")
    assert verdict["status"] == "correct", verdict


# Files "caught-by" a trial class or variant (issue 12) are verify's own: their catch depends on its
# secret seeds and trial plan (python/tests/test_trials_adversarial.py); not repeated here.
EXISTING = [p for p in sorted(ADVERSARIAL.glob("*.py"))
            if not p.stem.startswith("trust_") and headers(p).get("expect") not in ("crashed", "timeout", None)
            and "\n# caught-by: " not in p.read_text()]
VARIANTS = {"hardcoded_shape": [{"emb_dim": 384}]}


@pytest.mark.parametrize("path", EXISTING, ids=lambda p: p.stem)
def test_existing_adversarial_files_keep_their_status_through_export_and_judge(path, tmp_path):
    """The in-process attacks of examples/adversarial get the status their header expects when jb
    judges the exported program (or, not exportable, runs them sandboxed)."""
    h = headers(path)
    workload = ADVERSARIAL.parents[1] / "workloads" / h["target"]
    variants = VARIANTS.get(path.stem)
    extra = {"variants": variants} if variants else {}
    args = {"workload": str(workload), "scale": "tiny", "impl": {"kind": "candidate", "path": str(path)},
            "out_dir": str(tmp_path), **extra}
    trials = {"trials": [{"seed": 1, "dist": "normal"}, {"seed": 2, "dist": "uniform"}]}
    answers, stderr, _ = worker_requests([{"op": "export", "args": args}])
    exported = answers[0]["result"]
    if exported["status"] == "not_exportable":
        verify_args = {**args, **trials}
        verify_args.pop("out_dir")
        answers, _, _ = worker_requests([{"op": "verify", "args": verify_args}], env={"JB_SANDBOXED": "1"})
        status = answers[0]["result"]["status"]
    elif exported["status"] != "ok":
        status = exported["status"]
    else:
        spec = {"kind": "exported", "path": str(tmp_path / "export"), **extra}
        status = judge("verify", workload, tmp_path / "export", impl=spec, **extra, **trials)["status"]
    assert status == h["expect"], (path.name, exported.get("reasons"), exported.get("error"), stderr[-1000:])
