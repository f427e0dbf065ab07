"""Per-iteration device time from a ``jax.profiler.trace`` session.

Two readers produce one normalised event list (plane, line, name, start_us, dur_us, args):
``*.xplane.pb`` through ``jax.profiler.ProfileData`` (exact, no TensorFlow needed) and the Chrome
trace JSON (``*.trace.json.gz``) that jax writes beside it (process = plane, thread = line).

Which events count, in order of preference:

1. ``device_modules`` (TPU, GPU): on a device plane (``/device:TPU:0``, ``/device:GPU:0``) the line
   ``XLA Modules`` holds one event per executable run, named after the module (``jit_workload`` or
   ``jit_workload(123)``). One event = one iteration; only the first device plane is used.
2. ``device_ops`` (device planes without an ``XLA Modules`` line, e.g. raw GPU stream lines): op /
   kernel events whose args carry ``hlo_module``; grouped by ``run_id`` (else ``correlation_id``),
   per-iteration time = max(end) - min(start).
3. ``cpu_thunks`` (XLA:CPU): thunk events on host threads whose args carry ``hlo_module`` and
   ``run_id``; grouped by ``run_id``, per-iteration time = max(end) - min(start).

Host-side events named ``jit_*`` (Python ``PjitFunction``, TraceMe annotations) are never used:
only device planes, or events that XLA's runtime tags with ``hlo_module``/``run_id``, count.
Events of other modules (e.g. executables run from host callbacks) are dropped when ``module`` is
given.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import pathlib
import re
from typing import Any, Iterable


@dataclasses.dataclass
class Event:
    plane: str
    line: str
    name: str
    start_us: float
    dur_us: float
    args: dict

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us


@dataclasses.dataclass
class Timing:
    samples_ms: list[float]
    source: str  # device_modules | device_ops | cpu_thunks | none
    module: str | None
    events: int
    note: str | None = None


def find_trace_files(root: str | pathlib.Path) -> dict[str, pathlib.Path]:
    """The newest session's ``xplane`` and ``json`` files under ``root`` (a jax.profiler.trace dir)."""
    root = pathlib.Path(root)
    found: dict[str, pathlib.Path] = {}
    xplanes = sorted(root.rglob("*.xplane.pb"), key=lambda p: p.stat().st_mtime)
    jsons = sorted(root.rglob("*.trace.json.gz"), key=lambda p: p.stat().st_mtime)
    if xplanes:
        found["xplane"] = xplanes[-1]
    if jsons:
        found["json"] = jsons[-1]
    return found


def load_xplane(path: str | pathlib.Path) -> list[Event]:
    from jax.profiler import ProfileData

    data = ProfileData.from_file(str(path))
    events: list[Event] = []
    for plane in data.planes:
        for line in plane.lines:
            for ev in line.events:
                try:
                    args = dict(ev.stats)
                except Exception:  # noqa: BLE001 - stats of exotic types
                    args = {}
                events.append(Event(plane.name, line.name, ev.name, ev.start_ns / 1e3, ev.duration_ns / 1e3, args))
    return events


def events_from_chrome(data: dict | list) -> list[Event]:
    """Normalise a Chrome trace (dict with ``traceEvents`` or a bare list) to events."""
    raw = data.get("traceEvents", []) if isinstance(data, dict) else data
    processes: dict[Any, str] = {}
    threads: dict[tuple, str] = {}
    for e in raw:
        if e.get("ph") != "M":
            continue
        if e.get("name") == "process_name":
            processes[e.get("pid")] = str(e.get("args", {}).get("name", ""))
        elif e.get("name") == "thread_name":
            threads[(e.get("pid"), e.get("tid"))] = str(e.get("args", {}).get("name", ""))
    events = []
    for e in raw:
        if e.get("ph") != "X":
            continue
        pid, tid = e.get("pid"), e.get("tid")
        events.append(
            Event(
                processes.get(pid, str(pid)),
                threads.get((pid, tid), str(tid)),
                str(e.get("name", "")),
                float(e.get("ts", 0.0)),
                float(e.get("dur", 0.0)),
                dict(e.get("args") or {}),
            )
        )
    return events


def load_chrome(path: str | pathlib.Path) -> list[Event]:
    path = pathlib.Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        return events_from_chrome(json.load(fh))


def load(path: str | pathlib.Path) -> list[Event]:
    path = pathlib.Path(path)
    if path.is_dir():
        files = find_trace_files(path)
        if "xplane" in files:
            try:
                return load_xplane(files["xplane"])
            except Exception:  # noqa: BLE001 - fall back to the JSON export
                if "json" not in files:
                    raise
        if "json" in files:
            return load_chrome(files["json"])
        raise FileNotFoundError(f"no trace files under {path}")
    if path.name.endswith(".xplane.pb"):
        return load_xplane(path)
    return load_chrome(path)


_DEVICE_PLANE = re.compile(r"^/device:(TPU|GPU|CUDA|ROCM)[^0-9]*(\d+)", re.IGNORECASE)


def _device_index(plane: str) -> int | None:
    m = _DEVICE_PLANE.match(plane)
    return int(m.group(2)) if m else None


def _module_matches(name: str, module: str | None) -> bool:
    if module is None:
        return name.startswith("jit_")
    return name == module or name.startswith(module + "(") or name.startswith(module + ".")


def _spans(groups: dict[Any, list[Event]]) -> list[float]:
    spans = []
    for evs in sorted(groups.values(), key=lambda g: min(e.start_us for e in g)):
        start = min(e.start_us for e in evs)
        end = max(e.end_us for e in evs)
        spans.append((end - start) / 1e3)
    return spans


def per_iteration(events: Iterable[Event], module: str | None = None) -> Timing:
    """Per-iteration times (ms, in execution order) of ``module`` (``None``: any ``jit_*`` module)."""
    events = list(events)
    device = [e for e in events if _device_index(e.plane) is not None]
    if device:
        first = min(_device_index(e.plane) for e in device)
        plane_events = [e for e in device if _device_index(e.plane) == first]
        modules_line = [e for e in plane_events if e.line == "XLA Modules"]
        if modules_line:
            chosen = sorted((e for e in modules_line if _module_matches(e.name, module)), key=lambda e: e.start_us)
            if chosen:
                return Timing([e.dur_us / 1e3 for e in chosen], "device_modules", module, len(chosen))
        groups: dict[Any, list[Event]] = {}
        for e in plane_events:
            mod = e.args.get("hlo_module")
            if mod is None or (module is not None and not _module_matches(str(mod), module)):
                continue
            key = e.args.get("run_id", e.args.get("correlation_id"))
            if key is None:
                continue
            groups.setdefault(key, []).append(e)
        if groups:
            return Timing(_spans(groups), "device_ops", module, sum(len(g) for g in groups.values()))
    groups = {}
    for e in events:
        if _device_index(e.plane) is not None:
            continue
        mod = e.args.get("hlo_module")
        run = e.args.get("run_id")
        if mod is None or run is None:
            continue
        if not _module_matches(str(mod), module):
            continue
        groups.setdefault(str(run), []).append(e)
    if groups:
        return Timing(_spans(groups), "cpu_thunks", module, sum(len(g) for g in groups.values()))
    return Timing([], "none", module, 0, note=f"no device or thunk events for module {module!r}")


def modules_seen(events: Iterable[Event]) -> list[str]:
    """Names of the XLA modules with device/thunk events (diagnostics)."""
    seen = set()
    for e in events:
        if _device_index(e.plane) is not None and e.line == "XLA Modules":
            seen.add(re.sub(r"\(\d+\)$", "", e.name))
        elif "hlo_module" in e.args:
            seen.add(str(e.args["hlo_module"]))
    return sorted(seen)
