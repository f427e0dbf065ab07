"""Impl kind ``exported``: run programs serialized by the export stage, never the candidate's code.

``{"kind": "exported", "path": DIR, "variants": [...]?}``: DIR holds ``index.json`` and the
``.jaxexport`` files written by jb.ops.export (DIR may also be the export op's ``out_dir``, holding
``export/``); ``variants`` (optional) are CONFIG overrides beyond the workload's declared ones that the
export op was asked for too. Every program is
deserialized and inspected (jb.artifact) against the signature the judge computes itself from the
trusted workload at the same shapes; one failing inspection rejects the implementation (status
``rejected``, ``reasons`` naming what was found). Nothing in ``index.json`` is trusted but file
names (plain names inside DIR) and which declared variant a program is for (checked against the
program's own signature); the Pallas claim is recorded as such.

The Impl's ``fn(*inputs)`` picks the program whose input shapes/dtypes match the inputs (static
arguments: by value where several match) and calls it (``Exported.call``, traceable, so the ops
jit and compile it as any implementation); no match -> CandidateFailure ``compile_error``
(``signature``) naming the shapes.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import hashlib
import json
import os
import pathlib
from typing import Any, Callable

from jb import artifact, contract

MAX_PROGRAM_BYTES = 256 * 1024 * 1024
MAX_INDEX_BYTES = 4 * 1024 * 1024
CACHE_ENTRIES = 8
MAX_PROGRAMS = 64


@dataclasses.dataclass
class Program:
    file: str
    variant: dict | None
    exported: Any
    key: list
    static: dict[int, Any]
    claimed_pallas: bool
    artifact_pallas: bool
    interpret_mode: str | None


class ArtifactError(Exception):
    """The export directory is not a valid, safe set of programs (the candidate's fault)."""

    def __init__(self, reasons: list[str]):
        super().__init__("; ".join(reasons))
        self.reasons = reasons


def _index_dir(path: pathlib.Path) -> pathlib.Path:
    if (path / "index.json").is_file():
        return path
    if (path / "export" / "index.json").is_file():
        return path / "export"
    raise ArtifactError([f"the export stage produced no index.json in {path}"])


def _read_index(folder: pathlib.Path) -> dict:
    index_path = folder / "index.json"
    if index_path.stat().st_size > MAX_INDEX_BYTES:
        raise ArtifactError([f"index.json is larger than {MAX_INDEX_BYTES} bytes"])
    try:
        index = json.loads(index_path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ArtifactError([f"index.json is not valid JSON: {exc}"]) from exc
    if not isinstance(index, dict) or not isinstance(index.get("programs"), list):
        raise ArtifactError(["index.json has no 'programs' list"])
    try:  # its shape and format version (jb.contract); its claims are re-derived below, never read
        contract.decode(contract.ExportIndex, index, boundary="export/index.json")
    except contract.ContractError as exc:
        raise ArtifactError([str(exc)]) from exc
    if len(index["programs"]) > MAX_PROGRAMS:
        raise ArtifactError([f"index.json lists {len(index['programs'])} programs (at most {MAX_PROGRAMS})"])
    return index


def _program_file(folder: pathlib.Path, name) -> pathlib.Path:
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or name.startswith(".") or "\x00" in name:
        raise ArtifactError([f"program file name {name!r} is not a plain file name"])
    path = folder / name
    if path.is_symlink() or not path.is_file():
        raise ArtifactError([f"program file {name!r} is missing or not a regular file"])
    if path.stat().st_size > MAX_PROGRAM_BYTES:
        raise ArtifactError([f"program file {name!r} is larger than {MAX_PROGRAM_BYTES} bytes"])
    return path


def _variant_key(variant) -> str:
    return json.dumps(variant, sort_keys=True)


def load(path: str | os.PathLike, wl, backend: str, variants: list | tuple = ()) -> tuple[list[Program], dict]:
    """Deserialize and inspect every program; raises ArtifactError with every reason found.

    ``variants``: CONFIG overrides beyond the workload's declared ones that programs may be for
    (from the impl spec, never from index.json).
    """
    import jax

    folder = _index_dir(pathlib.Path(path))
    index = _read_index(folder)
    platform = artifact.export_platform(backend)
    shapes = {_variant_key(s.variant): s for s in artifact.shapes(wl, variants)}
    reasons: list[str] = []
    notes: list[str] = []
    programs: list[Program] = []
    custom_calls: set[str] = set()
    constants: list[dict] = []
    seen: set[str] = set()
    for i, entry in enumerate(index["programs"]):
        if not isinstance(entry, dict):
            reasons.append(f"index.json program {i} is not an object")
            continue
        where = f"program {entry.get('file')!r}"
        try:
            file = _program_file(folder, entry.get("file"))
        except ArtifactError as exc:
            reasons.extend(exc.reasons)
            continue
        variant = entry.get("variant")
        shape = shapes.get(_variant_key(variant))
        if shape is None:  # never loaded, so never run: its shapes get "no exported program"
            notes.append(f"{where} ignored: variant {variant!r} is not one of the workload's shapes")
            continue
        if _variant_key(variant) in seen:
            reasons.append(f"{where}: a second program for variant {variant!r}")
            continue
        seen.add(_variant_key(variant))
        data = file.read_bytes()
        fmt = artifact.format_reasons(data)
        if fmt:  # only what jax's own exporter writes is parsed at all (jb.artifact)
            reasons.extend(f"{where}: {r}" for r in fmt)
            continue
        try:
            exported = jax.export.deserialize(bytearray(data))
        except Exception as exc:  # noqa: BLE001 - a corrupt artifact is the candidate's fault
            reasons.append(f"{where}: cannot be deserialized: {type(exc).__name__}: {str(exc)[:300]}")
            continue
        expected = artifact.expected_signature(shape)
        scan, program_notes = artifact.inspect(exported, expected, platform)
        reasons.extend(f"{where}: {r}" for r in scan.reasons)
        notes.extend(f"{where}: {n}" for n in program_notes)
        custom_calls.update(scan.custom_calls)
        constants.extend(c for c in scan.constants if not c["splat"])
        programs.append(Program(
            file=file.name, variant=variant, exported=exported, key=expected.in_avals, static=shape.static,
            claimed_pallas=bool(entry.get("has_pallas_call")), artifact_pallas=scan.has_pallas_call,
            interpret_mode=entry.get("interpret_mode") if isinstance(entry.get("interpret_mode"), str) else None,
        ))
    if _variant_key(None) not in seen and not reasons:
        reasons.append("no program for the workload's own shapes")
    if reasons:
        raise ArtifactError(reasons)
    facts = _facts(programs, platform, notes, custom_calls, constants, index)
    return programs, facts


def _facts(programs, platform, notes, custom_calls, constants, index) -> dict:
    artifact_pallas = bool(programs) and all(p.artifact_pallas for p in programs)
    claimed = bool(programs) and all(p.claimed_pallas for p in programs)
    if artifact_pallas:
        has, evidence = True, "artifact"
    elif platform == "cpu":
        # Interpret mode lowers a pallas_call to plain HLO: only the export stage's word is left.
        has, evidence = claimed, "claimed" if claimed else None
    else:
        has, evidence = False, None
        if claimed:
            notes.append(f"the export stage claims a pallas_call but no {platform} Pallas kernel is in the artifact")
    failed = index.get("failed") if isinstance(index.get("failed"), list) else []
    return {
        "has_pallas_call": has, "pallas_evidence": evidence, "platform": platform, "notes": notes,
        "custom_calls": sorted(custom_calls), "constants": sorted(constants, key=lambda c: -c["size"])[:5],
        "programs": [{"file": p.file, "variant": p.variant, "in_avals": artifact.describe_avals(p.key)} for p in programs],
        "variants_not_exported": [f.get("variant") for f in failed if isinstance(f, dict)],
        "interpret_mode": next((p.interpret_mode for p in programs if p.interpret_mode), None),
    }


def dispatcher(programs: list[Program], static_argnums: tuple[int, ...]):
    """``fn(*inputs)`` running the program made for the inputs' shapes."""
    from jb.ops.common import CandidateFailure

    static = tuple(static_argnums)

    def fn(*inputs):
        dyn = tuple(a for i, a in enumerate(inputs) if i not in static)
        key = artifact.input_key(dyn)
        matches = [p for p in programs if p.key == key]
        if len(matches) > 1:
            by_value = [p for p in matches if all(p.static.get(i) == inputs[i] for i in static if i < len(inputs))]
            matches = by_value or matches
        if not matches:
            made = "; ".join(artifact.describe_avals(p.key) for p in programs)
            raise CandidateFailure(
                "compile_error", "signature",
                f"no exported program for inputs {artifact.describe_avals(key)} (exported: {made})",
            )
        return matches[0].exported.call(*dyn)

    fn.__name__ = "exported_workload"
    return fn


# A pooled judge answers compile, verify and profile for the same programs in turn: it keeps the
# last few inspected sets (keyed by the content of every file involved, the workload's source
# included) and hands out the same ``fn`` object, so JAX's trace/lowering caches apply across ops.
# Each step gets its own copy of the export folder, so where the files lie is not in the key.
_cache: collections.OrderedDict[str, tuple[Callable, dict]] = collections.OrderedDict()


def _content_key(path: pathlib.Path, wl, backend: str, variants) -> str | None:
    try:
        folder = _index_dir(path)
        h = hashlib.blake2b(digest_size=20)
        for part in (backend, wl.scale, json.dumps(list(variants), sort_keys=True)):
            h.update(part.encode() + b"\0")
        source = pathlib.Path(wl.module.__file__)
        h.update(source.read_bytes())
        index_bytes = (folder / "index.json").read_bytes()
        h.update(index_bytes)
        for entry in json.loads(index_bytes).get("programs") or []:
            name = entry.get("file") if isinstance(entry, dict) else None
            file = _program_file(folder, name)
            h.update(str(name).encode() + b"\0" + file.read_bytes())
        return h.hexdigest()
    except Exception:  # noqa: BLE001 - anything odd: no caching, load() reports it
        return None


def resolve_cached(path: str | os.PathLike, wl, backend: str, variants=()) -> tuple[Callable, dict]:
    """(fn, facts) for the programs in ``path``; raises ArtifactError. Cached by content."""
    path = pathlib.Path(path)
    key = _content_key(path, wl, backend, variants)
    if key is not None and key in _cache:
        _cache.move_to_end(key)
        fn, facts = _cache[key]
        return fn, copy.deepcopy(facts)
    programs, facts = load(path, wl, backend, variants)
    fn = dispatcher(programs, wl.static_argnums)
    if key is not None:
        _cache[key] = (fn, copy.deepcopy(facts))
        while len(_cache) > CACHE_ENTRIES:
            _cache.popitem(last=False)
    return fn, facts
