"""The typed, versioned messages that cross jb's process boundaries (Python side).

Three boundaries, each with a version both sides check (``src/contract/`` is the Rust side, with
the same shapes; ``tests/contract.rs`` round-trips every message kind through both):

- the worker protocol (``jb.worker``, stdio, one JSON object per line): ``WorkerRequest`` in,
  ``WorkerReady`` then one ``WorkerAnswer`` per request out;
- the Ray driver protocol (``jb.ray_driver``): ``RayRequest`` in, ``RayReady`` (or ``RayStartError``)
  then one ``RayReply`` per request out;
- the export index (``export/index.json``, written by the export stage, read by the judge):
  ``ExportIndex``.

A message of a different version, with a missing or mistyped field, an unknown field, or a step
status outside the shared vocabulary (``jb.status``) is a ``ContractError`` at the boundary: a clear
error, never a silently wrong result. Payloads (a request's ``args``, an answer's ``result`` beyond
its ``status``) are the ops' own business and stay JSON objects.

``python -m jb.contract samples`` prints one sample of every message kind; ``python -m jb.contract
roundtrip`` reads ``{"kind": ..., "message": ...}`` lines, decodes each with its type and prints it
re-encoded (or ``{"kind": ..., "error": ...}``): what the cross-language test drives.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import typing
from typing import Any, Optional

from jb.status import NAMES as STATUS_NAMES

WORKER_PROTOCOL = 2
RAY_PROTOCOL = 1
EXPORT_INDEX_FORMAT = 1


class ContractError(ValueError):
    """A message that does not fit its boundary's contract.

    ``request_id``: the id of a refused request, where it had one (its error answer names it)."""

    request_id: Optional[int] = None


_MISSING = object()


def _check_type(boundary: str, name: str, value: Any, hint: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin is typing.Union:
        args = typing.get_args(hint)
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _check_type(boundary, name, value, inner[0])
    if dataclasses.is_dataclass(hint):
        return decode(hint, value, boundary=boundary)
    base = origin or hint
    ok = {
        int: lambda v: isinstance(v, int) and not isinstance(v, bool),
        float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        str: lambda v: isinstance(v, str),
        bool: lambda v: isinstance(v, bool),
        dict: lambda v: isinstance(v, dict),
        list: lambda v: isinstance(v, list),
    }.get(base, lambda v: True)
    if not ok(value):
        raise ContractError(f"{boundary}: field {name!r} must be {getattr(base, '__name__', base)}, got {value!r:.80}")
    return value


def decode(cls, data: Any, *, boundary: str):
    """``cls`` (a dataclass of this module) from a JSON object, strictly."""
    if not isinstance(data, dict):
        raise ContractError(f"{boundary}: a {cls.__name__} must be a JSON object, got {data!r:.80}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ContractError(f"{boundary}: unknown field(s) {unknown} in a {cls.__name__}")
    values = {}
    for name, f in fields.items():
        if name in data:
            values[name] = _check_type(boundary, name, data[name], hints[name])
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ContractError(f"{boundary}: a {cls.__name__} needs the field {name!r}")
    obj = cls(**values)
    check = getattr(obj, "_check", None)
    if check is not None:
        check(boundary)
    return obj


def encode(obj) -> dict:
    """The JSON object of a message (``None`` optional fields left out)."""
    out = {}
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if v is None and f.default is None:
            continue
        if dataclasses.is_dataclass(v):
            v = encode(v)
        elif isinstance(v, list):
            v = [encode(x) if dataclasses.is_dataclass(x) else x for x in v]
        out[f.name] = v
    return out


def _version(boundary: str, field: str, have: int, want: int) -> None:
    if have != want:
        raise ContractError(
            f"{boundary}: {field} {have} where this side speaks {want}: jb's Rust binary and its Python "
            "package come from different versions (rebuild jb, or run the jb that ships this python/ folder)"
        )


# -- the worker protocol -----------------------------------------------------------------------

@dataclasses.dataclass
class WorkerRequest:
    id: int
    op: str
    args: dict
    protocol: int

    def _check(self, boundary):
        _version(boundary, "protocol", self.protocol, WORKER_PROTOCOL)


@dataclasses.dataclass
class WorkerReady:
    event: str
    pid: int
    python: str
    jax: str
    backend: str
    protocol: int

    def _check(self, boundary):
        if self.event != "ready":
            raise ContractError(f"{boundary}: a WorkerReady's event is 'ready', not {self.event!r}")
        _version(boundary, "protocol", self.protocol, WORKER_PROTOCOL)


@dataclasses.dataclass
class WorkerError:
    type: str
    message: str
    traceback: str


@dataclasses.dataclass
class WorkerAnswer:
    id: Optional[int]
    ok: bool
    result: Optional[dict] = None
    error: Optional[WorkerError] = None
    elapsed_ms: Optional[float] = None

    def _check(self, boundary):
        if self.ok:
            if self.result is None or self.error is not None:
                raise ContractError(f"{boundary}: an ok answer has a result and no error")
            status = self.result.get("status", "ok")
            if status not in STATUS_NAMES:
                raise ContractError(
                    f"{boundary}: result status {status!r} is not a step status (one of {', '.join(STATUS_NAMES)})"
                )
        elif self.error is None or self.result is not None:
            raise ContractError(f"{boundary}: a failed answer has an error and no result")


# -- the Ray driver protocol -------------------------------------------------------------------

@dataclasses.dataclass
class RayRequest:
    id: int
    op: str
    args: dict
    protocol: int

    def _check(self, boundary):
        _version(boundary, "protocol", self.protocol, RAY_PROTOCOL)


@dataclasses.dataclass
class RayReady:
    event: str
    pid: int
    ray: str
    resources: dict
    nodes: int
    protocol: int

    def _check(self, boundary):
        if self.event != "ready":
            raise ContractError(f"{boundary}: a RayReady's event is 'ready', not {self.event!r}")
        _version(boundary, "protocol", self.protocol, RAY_PROTOCOL)


@dataclasses.dataclass
class RayStartError:
    event: str
    message: str

    def _check(self, boundary):
        if self.event != "error":
            raise ContractError(f"{boundary}: a RayStartError's event is 'error', not {self.event!r}")


@dataclasses.dataclass
class RayReply:
    id: Optional[int]
    ok: bool
    result: Optional[dict] = None
    error: Optional[str] = None
    traceback: Optional[str] = None

    def _check(self, boundary):
        if self.ok != (self.result is not None) or self.ok == (self.error is not None):
            raise ContractError(f"{boundary}: a reply has a result when ok, else an error")


# -- the export index --------------------------------------------------------------------------

@dataclasses.dataclass
class ExportedProgram:
    file: str
    variant: Optional[dict]
    in_avals: list
    static: dict
    has_pallas_call: bool
    interpret_mode: Optional[str] = None


@dataclasses.dataclass
class ExportIndex:
    format: int
    platform: str
    backend: str
    scale: str
    jax: str
    programs: list
    failed: list
    jaxlib: Optional[str] = None
    device_kind: Optional[str] = None

    def _check(self, boundary):
        _version(boundary, "format", self.format, EXPORT_INDEX_FORMAT)
        self.programs = [decode(ExportedProgram, p, boundary=f"{boundary} program {i}")
                         for i, p in enumerate(self.programs)]


KINDS = {
    "worker_request": WorkerRequest, "worker_ready": WorkerReady, "worker_answer": WorkerAnswer,
    "ray_request": RayRequest, "ray_ready": RayReady, "ray_start_error": RayStartError, "ray_reply": RayReply,
    "export_index": ExportIndex,
}


def parse_request(cls, line: str, *, boundary: str):
    """A request line decoded as ``cls``; a ContractError carries the line's id where it has one."""
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise ContractError(f"{boundary}: not JSON: {exc}") from exc
    try:
        return decode(cls, data, boundary=boundary)
    except ContractError as exc:
        rid = data.get("id") if isinstance(data, dict) else None
        exc.request_id = rid if isinstance(rid, int) and not isinstance(rid, bool) else None
        raise


def parse_worker_request(line: str) -> WorkerRequest:
    return parse_request(WorkerRequest, line, boundary="worker request")


def samples() -> list[dict]:
    """One message of every kind (and both shapes of the answers)."""
    program = ExportedProgram(file="program-0.jaxexport", variant=None, in_avals=[[[8, 128], "bfloat16"]],
                              static={}, has_pallas_call=True, interpret_mode="pallas")
    return [
        {"kind": "worker_request", "message": encode(WorkerRequest(7, "verify", {"impl": {"kind": "ref"}}, WORKER_PROTOCOL))},
        {"kind": "worker_ready", "message": encode(WorkerReady("ready", 41, "3.13.1", "0.12.0.1", "cpu", WORKER_PROTOCOL))},
        {"kind": "worker_answer", "message": encode(WorkerAnswer(7, True, {"status": "correct", "trials": 8}, None, 12.5))},
        {"kind": "worker_answer", "message": encode(WorkerAnswer(8, False, None, WorkerError("KeyError", "'x'", "Traceback ..."), 0.5))},
        {"kind": "ray_request", "message": encode(RayRequest(3, "worker", {"op": "compile"}, RAY_PROTOCOL))},
        {"kind": "ray_ready", "message": encode(RayReady("ready", 99, "2.40.0", {"CPU": 4.0}, 2, RAY_PROTOCOL))},
        {"kind": "ray_start_error", "message": encode(RayStartError("error", "cannot reach the Ray cluster"))},
        {"kind": "ray_reply", "message": encode(RayReply(3, True, {"response": {}}))},
        {"kind": "ray_reply", "message": encode(RayReply(4, False, None, "ValueError: bad", "Traceback ..."))},
        {"kind": "export_index", "message": encode(ExportIndex(EXPORT_INDEX_FORMAT, "cpu", "cpu", "tiny", "0.12.0.1",
                                                               [program], [], "0.12.0.1"))},
    ]


def roundtrip(line: str) -> dict:
    item = json.loads(line)
    kind = item.get("kind")
    cls = KINDS.get(kind)
    if cls is None:
        return {"kind": kind, "error": f"unknown message kind {kind!r}"}
    try:
        return {"kind": kind, "message": encode(decode(cls, item.get("message"), boundary=kind))}
    except ContractError as exc:
        return {"kind": kind, "error": str(exc)}


def main(argv: list[str]) -> int:
    if argv[:1] == ["samples"]:
        for s in samples():
            print(json.dumps(s))
        return 0
    if argv[:1] == ["roundtrip"]:
        for line in sys.stdin:
            if line.strip():
                print(json.dumps(roundtrip(line)), flush=True)
        return 0
    print("usage: python -m jb.contract samples|roundtrip", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
