"""Step statuses: the one vocabulary shared with the Rust engine (``src/outcome/status.rs``).

A worker result's ``status`` is one of these names. ``Status`` is a ``str`` enum, so a member
compares equal to its name and serialises to it (``json.dumps({"status": Status.OK})``).
``python/tests/test_status.py`` checks that both sides list the same names.
"""

from __future__ import annotations

import enum


class Status(str, enum.Enum):
    OK = "ok"
    CORRECT = "correct"
    FAILED = "failed"
    ERROR = "error"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    INCORRECT = "incorrect"
    REJECTED = "rejected"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    UNSUPPORTED = "unsupported"
    INVALID = "invalid"
    SKIPPED = "skipped"
    NO_CODE = "no_code"
    API_ERROR = "api_error"
    CANCELLED = "cancelled"
    NOT_EXPORTABLE = "not_exportable"

    def __str__(self) -> str:
        return self.value


NAMES: tuple[str, ...] = tuple(s.value for s in Status)
