"""The few places where jb reads JAX internals that changed between the releases it supports.

jb runs on the current JAX (0.12, Python >= 3.12) and, where a machine has only Python 3.11, on
the last release that supports it (0.10.2). Everything that differs between the two is here, so
the rest of the worker reads one API.

* Jaxprs: 0.10 has ``core.ClosedJaxpr`` (a ``Jaxpr`` plus its constants); from 0.11 on there is
  one ``core.Jaxpr`` that carries its constants (``.consts``; ``.jaxpr`` returns itself).
"""

from __future__ import annotations


def jaxpr_parts(value):
    """``(jaxpr, consts)`` when ``value`` is a jaxpr of either kind, else None."""
    from jax._src import core

    closed = getattr(core, "ClosedJaxpr", None)
    if closed is not None and isinstance(value, closed):
        return value.jaxpr, tuple(value.consts)
    if isinstance(value, core.Jaxpr):
        return value, tuple(getattr(value, "consts", ()) or ())
    return None


def is_jaxpr(value) -> bool:
    return jaxpr_parts(value) is not None
