"""Helpers of the test_trust_* tests: the export stage in a fresh ``python -m jb.worker`` process, the
judge in this process (it never imports candidate code, so it is safe to run here)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

from jb.contract import WORKER_PROTOCOL

ROOT = pathlib.Path(__file__).resolve().parents[2]
ADVERSARIAL = ROOT / "examples" / "adversarial"
RMSNORM = ROOT / "workloads" / "12p_RMSNorm"
GEMM = ROOT / "workloads" / "8p_GEMM"
FIXTURES = ROOT / "python" / "tests" / "fixtures"
TRIALS = [{"seed": 1, "dist": "normal"}, {"seed": 2, "dist": "uniform"}]


def worker_env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "python")
    env.setdefault("JAX_PLATFORMS", "cpu")
    env.pop("JB_ATTACK_ARMED", None)
    env.pop("JB_SANDBOXED", None)
    env.update(extra or {})
    return env


def worker_requests(requests: list[dict], env: dict | None = None, timeout: float = 300) -> tuple[list[dict], str, int]:
    """Send ``requests`` to a fresh worker (ids 1..n); (every line it wrote after ready, stderr, rc)."""
    lines = "".join(json.dumps({"id": i + 1, "protocol": WORKER_PROTOCOL, **r}) + "\n"
                    for i, r in enumerate(requests))
    proc = subprocess.run(
        [sys.executable, "-u", "-m", "jb.worker"], input=lines, capture_output=True, text=True,
        cwd=ROOT, env=worker_env(env), timeout=timeout,
    )
    out = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert out and out[0].get("event") == "ready", (proc.stdout[-2000:], proc.stderr[-4000:])
    return out[1:], proc.stderr, proc.returncode


def export_in_worker(candidate: pathlib.Path, workload: pathlib.Path, out_dir: pathlib.Path,
                     env: dict | None = None) -> tuple[dict | None, str]:
    """The export op on ``candidate`` in a fresh worker: (its answer line or None, stderr)."""
    args = {"workload": str(workload), "scale": "tiny", "impl": {"kind": "candidate", "path": str(candidate)},
            "out_dir": str(out_dir), "project_root": str(ROOT)}
    answers, stderr, _ = worker_requests([{"op": "export", "args": args}], env)
    return (answers[0] if answers else None), stderr


def judge(op: str, workload: pathlib.Path, export_dir: pathlib.Path, **extra) -> dict:
    """Run ``op`` (compile | verify | profile) on the exported programs, in this process."""
    import importlib

    module = importlib.import_module(f"jb.ops.{op}")
    args = {"workload": str(workload), "scale": "tiny", "impl": {"kind": "exported", "path": str(export_dir)}}
    if op == "verify" and "trials" not in extra:
        args["trials"] = TRIALS
    if op == "profile":
        args.update(warmup=1, iters=3, input_sets=1)
    args.update(extra)
    return module.run(args)


def imported_files() -> set[str]:
    """Source files of every module this process has imported."""
    out = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path:
            out.add(str(pathlib.Path(path).resolve()))
    return out
