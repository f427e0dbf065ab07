"""Trust level and artifact facts on the results of compile/verify/profile (one call each).

``annotate(impl, result)`` right after the implementation is resolved: ``result["trust"]`` (see
jb.impl.trust_level), and for an exported implementation the inspection's rejection reasons, notes,
``pallas_evidence`` (``artifact``: Mosaic/Triton custom calls seen in the program; ``claimed``: the
export stage's word, all there is on CPU where interpret mode leaves plain HLO) and ``artifact``
(programs, custom calls, largest constants).

``adjust_report(impl, report)`` after jb.ops.common.jaxpr_report: the judge's jaxpr of an exported
program holds only the call of the deserialized module, so Pallas presence comes from the artifact
facts; constants and host callbacks were checked in the module itself (jb.artifact).
"""

from __future__ import annotations


def annotate(impl, result: dict) -> dict:
    result["trust"] = impl.trust
    if impl.kind != "exported":
        return result
    if impl.reasons:
        result.setdefault("reasons", [])
        result["reasons"] = list(impl.reasons) + [r for r in result["reasons"] if r not in impl.reasons]
    facts = impl.facts or {}
    if facts:
        result["pallas_evidence"] = facts.get("pallas_evidence")
        result["artifact"] = {k: facts[k] for k in ("platform", "programs", "custom_calls", "constants", "variants_not_exported") if k in facts}
        if facts.get("notes"):
            result.setdefault("notes", [])
            result["notes"].extend(n for n in facts["notes"] if n not in result["notes"])
    return result


def adjust_report(impl, report: dict) -> dict:
    if impl.kind != "exported":
        return report
    facts = impl.facts or {}
    report["has_pallas_call"] = bool(facts.get("has_pallas_call"))
    report["constants"] = []  # checked (and noted) on the artifact
    report["host_callbacks"] = []  # idem: a callback target rejects at load
    return report


def interpret_mode(impl, built_mode):
    """The interpreter a result reports: the export stage's for an exported program."""
    if impl.kind == "exported":
        return (impl.facts or {}).get("interpret_mode")
    return built_mode
