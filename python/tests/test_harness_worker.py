"""The worker as a subprocess: `python -u -m jb.worker`, line-delimited JSON over stdio."""

from __future__ import annotations

import json
import os
import pathlib
import select
import subprocess
import sys

import pytest

from jb.contract import WORKER_PROTOCOL

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"


class Worker:
    def __init__(self):
        env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
        self.proc = subprocess.Popen(
            [sys.executable, "-u", "-m", "jb.worker"], cwd=ROOT, env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.next_id = 0

    def read(self, timeout: float = 120.0) -> dict | None:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise TimeoutError("worker did not answer")
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None

    def send_raw(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def request(self, op: str, args: dict | None = None, timeout: float = 120.0) -> dict:
        self.next_id += 1
        self.send_raw(json.dumps({"id": self.next_id, "op": op, "args": args or {}, "protocol": WORKER_PROTOCOL}))
        response = self.read(timeout)
        assert response is not None, "worker closed stdout"
        assert response["id"] == self.next_id
        return response

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            stream.close()


@pytest.fixture(scope="module")
def worker():
    w = Worker()
    ready = w.read(60)
    assert ready["event"] == "ready" and ready["pid"] == w.proc.pid and ready["jax"] and ready["python"]
    yield w
    w.close()


def test_fingerprint_and_errors(worker):
    r = worker.request("fingerprint")
    assert r["ok"] and r["result"]["backend"] == "cpu"
    r = worker.request("no_such_op")
    assert r["ok"] is False and r["error"]["type"] == "UnknownOp" and "no_such_op" in r["error"]["message"]
    worker.send_raw("this is not json")
    r = worker.read()
    assert r["ok"] is False and r["id"] is None and r["error"]["type"] == "BadRequest"
    # A harness failure (missing workload) is ok:false with a traceback, and the worker survives it.
    r = worker.request("describe", {"workload": str(ROOT / "workloads" / "does_not_exist"), "scale": "tiny"})
    assert r["ok"] is False and r["error"]["traceback"]
    assert worker.request("fingerprint")["ok"]


def test_candidate_output_cannot_corrupt_protocol(worker):
    if not (ROOT / "workloads" / "12p_RMSNorm" / "workload.py").is_file():
        pytest.skip("12p_RMSNorm not present")
    args = {"workload": "workloads/12p_RMSNorm", "scale": "tiny",
            "impl": {"kind": "candidate", "path": str(FIXTURES / "candidates" / "noisy_rmsnorm.py")},
            "trials": [{"seed": 3, "dist": "signed"}]}
    r = worker.request("compile", args)
    assert r["ok"] and r["result"]["status"] == "ok" and r["result"]["has_pallas_call"]
    r = worker.request("verify", args)
    assert r["ok"] and r["result"]["status"] == "correct", r
    r = worker.request("profile", dict(args, warmup=1, iters=3))
    assert r["ok"] and r["result"]["status"] == "ok" and len(r["result"]["samples_ms"]) == 3


def test_candidate_failure_is_a_result(worker):
    args = {"workload": "workloads/12p_RMSNorm", "scale": "tiny",
            "impl": {"kind": "candidate", "path": "examples/adversarial/import_error.py"}}
    r = worker.request("compile", args)
    assert r["ok"] and r["result"]["status"] == "compile_error" and r["result"]["error_class"] == "import"


def test_tampering_in_an_earlier_op_is_still_caught(worker):
    args = {"workload": "workloads/12p_RMSNorm", "scale": "tiny",
            "impl": {"kind": "candidate", "path": "examples/adversarial/patch_timer.py"}}
    r = worker.request("compile", args)
    assert r["ok"] and r["result"]["status"] == "rejected" and r["result"]["tainted"]
    assert any("time.perf_counter" in reason for reason in r["result"]["reasons"])
    # The worker restored its timer: a clean candidate in the same worker is not blamed.
    clean = dict(args, impl={"kind": "candidate", "path": "candidates/12p_RMSNorm/rmsnorm_pallas.py"}, trials=[{"seed": 1, "dist": "normal"}])
    r = worker.request("verify", clean)
    assert r["ok"] and r["result"]["status"] == "correct", r["result"]["reasons"]


def test_shutdown(worker):
    r = worker.request("shutdown")
    assert r["ok"]
    assert worker.proc.wait(timeout=30) == 0


def test_crashing_candidate_kills_worker_without_response():
    w = Worker()
    try:
        assert w.read(60)["event"] == "ready"
        w.send_raw(json.dumps({"id": 1, "op": "compile", "protocol": WORKER_PROTOCOL, "args": {
            "workload": "workloads/8p_GEMM", "scale": "tiny",
            "impl": {"kind": "candidate", "path": "examples/adversarial/crash_exit.py"}}}))
        assert w.read(120) is None  # EOF: no (forged) response
        assert w.proc.wait(timeout=30) == 3
    finally:
        w.close()


def test_end_of_input_exits_cleanly():
    w = Worker()
    try:
        assert w.read(60)["event"] == "ready"
        w.proc.stdin.close()
        assert w.proc.wait(timeout=30) == 0
    finally:
        w.close()
