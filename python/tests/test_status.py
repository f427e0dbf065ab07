"""The Python and Rust status vocabularies are the same list of names."""

import json
import pathlib
import re

from jb.status import NAMES, Status

RUST = pathlib.Path(__file__).resolve().parents[2] / "src" / "outcome" / "status.rs"


def rust_names() -> list[str]:
    text = RUST.read_text()
    body = text.split("pub fn as_str(self)", 1)[1].split("\n    }\n", 1)[0]
    return re.findall(r'StepStatus::\w+ => "([a-z_]+)"', body)


def test_vocabularies_match():
    assert rust_names() == list(NAMES)


def test_members_are_their_names():
    assert Status.COMPILE_ERROR == "compile_error"
    assert json.dumps({"status": Status.NOT_EXPORTABLE}) == '{"status": "not_exportable"}'
    assert Status("rejected") is Status.REJECTED
