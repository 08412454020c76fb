from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from observe_helpers import SHARED_FIXTURES, run, shared, write

from looprun.observe.base import ParseInput
from looprun.observe.sarif import SarifParser


def parse(workdir: Path, file: Path, **kw):
    return SarifParser().parse(ParseInput(workdir=workdir, file=file, **kw))


def ruff_sarif(root: Path) -> Path:
    report = root / "ruff.sarif"
    proc = run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--no-cache",
            "--isolated",
            "--select",
            "F",
            "--output-format=sarif",
            "--output-file",
            str(report),
            ".",
        ],
        root,
    )
    assert report.is_file(), proc.stderr
    return report


def test_real_ruff_report(tmp_path):
    write(tmp_path, {"pkg/mod.py": "import os\n\n\ndef f():\n    return undefined_name\n"})
    obs = parse(tmp_path, ruff_sarif(tmp_path))
    assert not obs.ok
    assert obs.counts["errors"] == 2 and obs.counts["total"] == 2
    assert dict(obs.facts["rules"]) == {"F401": 1, "F821": 1}
    assert dict(obs.facts["files"]) == {"pkg/mod.py": 2}
    f821 = next(i for i in obs.items if i.rule == "F821")
    assert (f821.file, f821.line, f821.col) == ("pkg/mod.py", 5, 12)
    assert "pkg/mod.py:5:12: error [F821] Undefined name `undefined_name`" in obs.feedback


def test_clean_ruff_report_is_ok(tmp_path):
    write(tmp_path, {"mod.py": "def f():\n    return 1\n"})
    obs = parse(tmp_path, ruff_sarif(tmp_path))
    assert obs.ok and obs.counts["total"] == 0


def _log(results, rules=None, version="2.1.0", **run):
    return {
        "version": version,
        "runs": [
            {"tool": {"driver": {"name": "t", "rules": rules or []}}, "results": results, **run}
        ],
    }


def test_levels_rule_index_defaults_suppressions_and_fail_on(tmp_path):
    rules = [{"id": "R0", "defaultConfiguration": {"level": "note"}}, {"id": "R1"}]
    loc = {"physicalLocation": {"artifactLocation": {"uri": "a.py"}, "region": {"startLine": 3}}}
    results = [
        {"ruleIndex": 0, "message": {"text": "n"}, "locations": [loc]},
        {"rule": {"index": 1}, "message": {"text": "w"}, "locations": [loc]},
        {
            "ruleId": "R1",
            "level": "error",
            "message": {"text": "e"},
            "suppressions": [{"kind": "inSource"}],
        },
        {"ruleId": "R1", "kind": "pass", "message": {"text": "p"}},
    ]
    report = tmp_path / "r.sarif"
    report.write_text(json.dumps(_log(results, rules)))
    obs = parse(tmp_path, report)
    assert dict(obs.counts) == {"errors": 0, "warnings": 1, "notes": 1, "total": 2, "suppressed": 1}
    assert obs.ok
    assert not parse(tmp_path, report, options={"fail_on": "warning"}).ok
    assert [i.rule for i in obs.items] == ["R0", "R1"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (json.dumps(_log([], version="2.0.0")), "SARIF version '2.0.0' is not supported"),
        ('{"version": "2.1.0", "runs": [', "not valid JSON"),
        ("[]", "not a SARIF log"),
    ],
)
def test_bad_sarif(tmp_path, text, problem):
    report = tmp_path / "r.sarif"
    report.write_text(text)
    obs = parse(tmp_path, report)
    assert not obs.ok and problem in obs.error and "r.sarif" in obs.error


@pytest.mark.skipif(not SHARED_FIXTURES.exists(), reason="shared fixtures not available")
def test_real_world_sarif():
    d = shared("sarif")
    semgrep = parse(d, d / "semgrep-nosemgrep-suppression.sarif")
    assert semgrep.ok and semgrep.counts["suppressed"] == 1 and semgrep.counts["total"] == 0
    notif = parse(d, d / "semgrep-error-notification-no-results.sarif")
    assert not notif.ok and notif.facts["tool_errors"] == 1
    codeql = parse(d, d / "codeql-lgtm-two-runs.sarif")
    assert codeql.counts["total"] == 3
    eslint = parse(d, d / "eslint-simple-example.sarif")
    assert eslint.counts["errors"] == 1 and eslint.items[0].rule == "no-unused-vars"
    ruff = parse(d, d / "ruff-check-with-fixes.sarif")
    assert dict(ruff.facts["rules"]) == {"F401": 1, "F821": 1, "invalid-syntax": 1}
