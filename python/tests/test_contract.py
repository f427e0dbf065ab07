"""The typed boundary messages (jb.contract): samples decode, versions are checked, the worker and
the Ray node speak the contract's version. The cross-language half is tests/contract.rs."""

from __future__ import annotations

import json
import subprocess
import sys

from jb import contract, ray_node

from trust_support import ROOT, worker_env


def test_every_sample_round_trips_unchanged():
    for item in contract.samples():
        back = contract.roundtrip(json.dumps(item))
        assert "error" not in back, back
        assert back["message"] == item["message"], item["kind"]


def test_another_version_is_a_named_error():
    for kind, field, want in (("worker_request", "protocol", contract.WORKER_PROTOCOL),
                              ("ray_request", "protocol", contract.RAY_PROTOCOL),
                              ("export_index", "format", contract.EXPORT_INDEX_FORMAT)):
        item = next(s for s in contract.samples() if s["kind"] == kind)
        item["message"][field] = want + 1
        back = contract.roundtrip(json.dumps(item))
        assert f"{field} {want + 1} where this side speaks {want}" in back["error"], back


def test_unknown_fields_and_statuses_are_refused():
    answer = next(s for s in contract.samples() if s["kind"] == "worker_answer")
    wrong_status = json.loads(json.dumps(answer))
    wrong_status["message"]["result"]["status"] = "corect"
    assert "not a step status" in contract.roundtrip(json.dumps(wrong_status))["error"]
    extra = json.loads(json.dumps(answer))
    extra["message"]["surprise"] = 1
    assert "error" in contract.roundtrip(json.dumps(extra))


def test_the_ray_node_spells_the_contracts_worker_protocol():
    # ray_node imports nothing of jb (it is shipped by value), so it keeps its own copy.
    assert ray_node.WORKER_PROTOCOL == contract.WORKER_PROTOCOL


def test_the_worker_announces_its_protocol_and_refuses_another():
    lines = "".join(json.dumps(r) + "\n" for r in (
        {"id": 1, "op": "shutdown", "args": {}},  # no protocol: refused
        {"id": 2, "op": "shutdown", "args": {}, "protocol": contract.WORKER_PROTOCOL - 1},
        {"id": 3, "op": "shutdown", "args": {}, "protocol": contract.WORKER_PROTOCOL},
    ))
    proc = subprocess.run([sys.executable, "-u", "-m", "jb.worker"], input=lines, capture_output=True,
                          text=True, cwd=ROOT, env=worker_env(None), timeout=300)
    out = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    ready = contract.decode(contract.WorkerReady, out[0], boundary="ready")
    assert ready.protocol == contract.WORKER_PROTOCOL
    missing, old, shutdown = out[1:]
    assert (missing["id"], missing["ok"], missing["error"]["type"]) == (1, False, "BadRequest"), missing
    assert (old["id"], old["ok"]) == (2, False) and "where this side speaks" in old["error"]["message"], old
    assert (shutdown["id"], shutdown["ok"]) == (3, True), shutdown
    assert proc.returncode == 0
