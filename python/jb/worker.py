"""The jb worker: ``python -u -m jb.worker``, line-delimited JSON over stdio (docs/architecture.md).

The real stdout is kept (dup'ed) for the protocol; file descriptor 1 and ``sys.stdout`` point at
stderr, so anything user code prints (Python or C) never corrupts the protocol.

    <- {"event": "ready", "pid": ..., "python": ..., "jax": ..., "backend": ..., "protocol": 2}
    -> {"id": 7, "op": "compile", "args": {...}, "protocol": 2}
    <- {"id": 7, "ok": true, "result": {...}, "elapsed_ms": ...}
    <- {"id": 7, "ok": false, "error": {"type": ..., "message": ..., "traceback": ...}, "elapsed_ms": ...}

A failure that is the implementation's fault is a result (``ok: true``, ``result.status``); an
exception escaping an op is a harness failure (``ok: false``). Unknown ops and malformed requests
are ``ok: false`` too, and so is a request of another protocol version (the shapes and the
version are ``jb.contract``'s, which the Rust side mirrors in ``src/contract/worker.rs``).
``shutdown`` answers, then the worker exits 0; so does end of input.
Non-finite floats in results are sent as null (strict JSON).
"""

from __future__ import annotations

import importlib
import json
import math
import os
import sys
import time
import traceback

from jb.contract import WORKER_PROTOCOL as PROTOCOL_VERSION
from jb.contract import ContractError, parse_worker_request
OP_NAMES = ("fingerprint", "peak", "describe", "compile", "export", "verify", "recheck", "profile", "shutdown")


def _take_stdout():
    """Return a line-buffered writer on the real stdout; fd 1 and sys.stdout now go to stderr."""
    sys.stdout.flush()
    proto_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(proto_fd, "w", buffering=1, encoding="utf-8", closefd=True)


def _clean(value):
    """Strict-JSON copy: non-finite floats -> None, numpy scalars -> Python, tuples -> lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_clean(v) for v in value]
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return _clean(item())
        except (TypeError, ValueError):
            pass
    return repr(value)


class Worker:
    def __init__(self, out):
        self.out = out
        self.ops = {}
        for name in OP_NAMES:
            self.ops[name] = importlib.import_module(f"jb.ops.{name}").run
        self._write = out.write
        self._flush = out.flush
        self._dumps = json.dumps

    def send(self, message: dict) -> None:
        self._write(self._dumps(_clean(message), allow_nan=False) + "\n")
        self._flush()

    def ready(self) -> None:
        import platform

        import jax

        self.send({
            "event": "ready", "pid": os.getpid(), "python": platform.python_version(), "jax": jax.__version__,
            "backend": jax.default_backend(), "protocol": PROTOCOL_VERSION,
        })

    def handle(self, line: str) -> bool:
        """Answer one request line; returns False when the worker should exit."""
        t0 = time.perf_counter()
        rid = None
        try:
            request = parse_worker_request(line)
            rid, op, args = request.id, request.op, request.args
        except ContractError as exc:
            self.send({"id": exc.request_id, "ok": False,
                       "error": {"type": "BadRequest", "message": str(exc), "traceback": ""}})
            return True
        fn = self.ops.get(op)
        if fn is None:
            self.send({
                "id": rid, "ok": False,
                "error": {"type": "UnknownOp", "message": f"unknown op {op!r}; expected one of {list(OP_NAMES)}", "traceback": ""},
            })
            return True
        try:
            result = fn(args)
            response = {"id": rid, "ok": True, "result": result}
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - every escape is a harness failure, reported
            response = {
                "id": rid, "ok": False,
                "error": {"type": type(exc).__name__, "message": str(exc)[-4000:], "traceback": traceback.format_exc()[-8000:]},
            }
        response["elapsed_ms"] = (time.perf_counter() - t0) * 1e3
        self.send(response)
        return op != "shutdown"


def main() -> int:
    out = _take_stdout()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    worker = Worker(out)
    from jb import guard

    guard.rebaseline()  # the pristine harness, before any implementation is imported
    worker.ready()
    for line in sys.stdin:
        if not line.strip():
            continue
        if not worker.handle(line):
            break
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
