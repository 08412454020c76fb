from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from observe_helpers import write

from looprun.checks.runner import run_observer
from looprun.errors import Location
from looprun.template.expressions import compile_condition, compile_text
from looprun.template.model import Constraints, ObserverSpec, PathRules

LOC = Location("t.yaml", 1, 1)


def spec(name, parser, run=None, file=None, when=None, **kw) -> ObserverSpec:
    return ObserverSpec(
        name=name,
        parser=parser,
        run=compile_text(run, LOC, shell=True) if run else None,
        file=compile_text(file, LOC) if file else None,
        when=compile_condition(when, LOC) if when else None,
        **kw,
    )


def observe(s: ObserverSpec, root: Path, context=None, **kw):
    kw.setdefault("constraints", None)
    return run_observer(
        s,
        context or {},
        workdir=root,
        artifacts=root / ".art",
        base=None,
        git_dir=None,
        deadline=None,
        **kw,
    )


def test_stale_report_is_deleted_before_running(tmp_path):
    (tmp_path / "junit.xml").write_text(
        '<testsuite><testcase classname="a" name="old"/></testsuite>'
    )
    obs = observe(spec("tests", "junit", run="true", file="junit.xml"), tmp_path)
    assert not obs.ok and obs.exit_code == 0
    assert "report not found" in obs.error and "junit.xml" in obs.error
    assert not (tmp_path / "junit.xml").exists()


def test_real_pytest_observer_with_context_values_quoted(junit_report):
    root, _, _ = junit_report
    s = spec(
        "tests",
        "junit",
        run=f"{sys.executable} -m pytest -q -p no:cacheprovider --junitxml={{{{ out }}}}",
        file="{{ out }}",
    )
    obs = observe(s, root, {"out": "reports dir/junit.xml"})
    assert obs.exit_code == 1 and obs.counts["failed"] == 3
    assert (root / ".art" / "tests.output.txt").read_text().count("FAILED") >= 3


def test_when_skips_and_exit_code_parser_and_timeout(tmp_path):
    skipped = observe(spec("lint", "sarif", run="false", when="changed"), tmp_path, {"changed": 0})
    assert skipped.ran is False and skipped.ok and skipped.facts["errors"] == 0
    assert "skipped" in skipped.feedback
    bad = observe(spec("build", "exit_code", run="echo compiling; echo oops >&2; exit 4"), tmp_path)
    assert not bad.ok and bad.exit_code == 4 and "oops" in bad.feedback
    good = observe(spec("build", "exit_code", run="echo fine"), tmp_path)
    assert good.ok and good.facts["output_tail"] == "fine"
    start = time.monotonic()
    slow = observe(spec("t", "junit", run="sleep 30", file="x.xml", timeout_s=0.5), tmp_path)
    assert time.monotonic() - start < 10
    assert not slow.ok and "timed out" in slow.error and slow.exit_code is None


def test_git_diff_defaults_come_from_constraints(tmp_path):
    import subprocess

    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    write(tmp_path, {"src/a.py": "import pdb; pdb.set_trace()\n", "other.txt": "x\n"})
    constraints = Constraints(
        paths=PathRules(allow=("src/**",)), forbidden_patterns=("pdb.set_trace",)
    )
    obs = observe(spec("diff", "git_diff"), tmp_path, constraints=constraints)
    assert not obs.ok
    assert list(obs.facts["outside"]) == ["other.txt"]
    assert obs.facts["forbidden"][0]["pattern"] == "pdb.set_trace"


def test_secrets_are_redacted_from_feedback(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVICE_API_TOKEN", "s3cr3t-value-123")
    write(tmp_path, {"leak.txt": "s3cr3t-value-123\n"})
    obs = observe(spec("x", "exit_code", run="cat leak.txt; exit 1"), tmp_path)
    assert "s3cr3t" not in obs.feedback and "***" in obs.feedback
    assert "s3cr3t" not in (tmp_path / ".art" / "x.output.txt").read_text()


def test_json_parser_through_runner(tmp_path):
    cmd = """printf '{"summary": {"failed": 2, "ok": false}, "runs": [{"score": 0.5}]}' > r.json"""
    s = spec(
        "j",
        "json",
        run=cmd,
        file="r.json",
        options={
            "facts": {"failed": "summary.failed", "score": "runs[-1].score", "gone": "nope.x"},
            "ok": "summary.ok",
        },
    )
    obs = observe(s, tmp_path)
    assert not obs.ok
    facts = obs.to_facts()
    assert facts["failed"] == 2 and facts["score"] == 0.5 and facts["gone"] is None
    assert "nope.x" in obs.feedback
    json.dumps(facts)


def test_a_json_report_trusted_on_exit_zero_only_counts_after_a_clean_exit(
    tmp_path: Path,
) -> None:
    report = """printf '{"ok": true, "score": 1.0}' > r.json"""
    options = {"facts": {"score": "score"}, "ok": "ok", "trust": "exit_zero"}
    clean = observe(spec("j", "json", run=report, file="r.json", options=options), tmp_path)
    assert clean.ok and clean.to_facts()["score"] == 1.0
    # the same report beside a runner that did not end well was not written by it
    killed = observe(
        spec("j", "json", run=f"{report}; kill -9 $$", file="r.json", options=options), tmp_path
    )
    assert not killed.ok and killed.exit_code != 0, killed
    assert "is not its report" in (killed.error or ""), killed
    assert killed.to_facts()["score"] is None
    # without the option the exit status is recorded, and the report read as before
    loose = {k: v for k, v in options.items() if k != "trust"}
    plain = observe(
        spec("j", "json", run=f"{report}; exit 3", file="r.json", options=loose), tmp_path
    )
    assert plain.ok and plain.exit_code == 3
