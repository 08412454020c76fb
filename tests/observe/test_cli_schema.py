"""`looprun observe` end to end, and every parser's output against the observation schema."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from observe_helpers import REPO, write

from looprun.observe.base import ParseInput
from looprun.observe.normalise import failure_signature, normalise
from looprun.observe.registry import BUILTIN, get_parser, parser_facts

SCHEMA = json.loads((REPO / "schemas" / "observation.schema.json").read_text())


def looprun(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "looprun", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def test_observe_command_exit_codes_and_json(junit_report):
    root, report, _ = junit_report
    proc = looprun("observe", "junit", str(report), cwd=root)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    facts = json.loads(proc.stdout)
    jsonschema.validate(facts, SCHEMA)
    assert facts["failed"] == 3 and facts["counts"]["tests"] == 4
    ok = looprun("observe", "exit_code", "--run", "echo hello", cwd=root)
    assert ok.returncode == 0 and json.loads(ok.stdout)["output_tail"] == "hello"
    run = looprun(
        "observe", "coverage", "--run", "true", "--file", "missing.xml", "-o", "min=80", cwd=root
    )
    assert run.returncode == 1 and "did not write it" in json.loads(run.stdout)["error"]


@pytest.mark.parametrize(
    "args",
    [
        ("observe", "nope", "x.xml"),
        ("observe", "junit"),
        ("observe", "exit_code"),
        ("observe", "regex", "--run", "true", "-o", "novalue"),
    ],
)
def test_observe_usage_errors(tmp_path, args):
    proc = looprun(*args, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.strip()


def test_observe_truncated_report_names_file(tmp_path):
    (tmp_path / "r.xml").write_text("<testsuite><testcase")
    proc = looprun("observe", "junit", "r.xml", cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "r.xml: not well-formed XML" in json.loads(proc.stdout)["error"]


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_every_parser_output_matches_schema(tmp_path, name):
    root = tmp_path / "proj"
    report = root / "junit.xml"
    write(
        root,
        {
            "junit.xml": '<testsuite><testcase classname="a" name="b">'
            '<failure message="m">E   x</failure></testcase></testsuite>'
        },
    )
    write(root, {"r.json": '{"a": {"b": [1, 2]}}', "bad.txt": "\x00garbage"})
    files = {"junit": report, "json": root / "r.json"}
    options = {"regex": {"preset": "gcc"}, "json": {"facts": {"b": "a.b[1]"}}}
    inputs = [
        ParseInput(
            workdir=root,
            file=files.get(name),
            output="main.c:1:2: error: x\n",
            exit_code=1,
            options=options.get(name, {}),
        ),
        ParseInput(workdir=root, file=root / "bad.txt", exit_code=None),
        ParseInput(workdir=tmp_path / "nowhere", file=None),
    ]
    for data in inputs:
        obs = get_parser(name).parse(data)
        facts = obs.to_facts()
        jsonschema.validate(json.loads(json.dumps(facts)), SCHEMA)
        # every fact the parser declares with these options (a regex preset other than
        # pytest declares no test counts)
        declared = parser_facts(name, dict(data.options)) or frozenset()
        assert set(declared) <= set(facts) or obs.parser == "json"


def test_normalise_masks_noise_only():
    a = (
        "tests/t.py::test_x",
        "AssertionError: <Obj at 0x7f3a2c> in /tmp/pytest-of-u/pytest-3/"
        "test_x0/data.txt after 0.52s at 2024-05-01T10:00:01Z (t.py:87)",
    )
    b = (
        "tests/t.py::test_x",
        "AssertionError: <Obj at 0x55aa01> in /tmp/pytest-of-u/pytest-9/"
        "test_x1/data.txt after 12ms at 2025-01-02T03:04:05+01:00 (t.py:91)",
    )
    assert normalise(a[1]) == normalise(b[1])
    assert failure_signature([a]) == failure_signature([b])
    assert failure_signature([a, ("other", "x")]) == failure_signature([("other", "x"), b])
    assert failure_signature([a]) != failure_signature([(a[0], "AssertionError: 41 != 42")])


def test_normalise_masks_unix_time_with_a_fraction_but_not_plain_numbers():
    assert normalise("started at 1796001202.854: boom") == normalise(
        "started at 1714557601.2: boom"
    )
    # whole seconds and other decimals can be values under test: they stay
    assert normalise("assert 1796001202 == 1796001203") == "assert 1796001202 == 1796001203"
    assert normalise("expected 3.14159, got 12345678901.5") == "expected 3.14159, got 12345678901.5"
