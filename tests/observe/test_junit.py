from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from observe_helpers import SHARED_FIXTURES, pytest_argv, run, shared, write

from looprun.observe.base import ParseInput
from looprun.observe.junit import JUnitParser


def parse(workdir: Path, file: Path | None, **kw) -> object:
    return JUnitParser().parse(ParseInput(workdir=workdir, file=file, **kw))


def test_real_pytest_report(junit_report):
    root, report, code = junit_report
    obs = parse(root, report, exit_code=code)
    assert not obs.ok and code == 1
    assert dict(obs.counts) == {"tests": 4, "passed": 1, "failed": 3, "errors": 0, "skipped": 0}
    failing = list(obs.facts["failing"])
    assert "tests/test_invoice.py::test_total" in failing
    assert "tests/test_invoice.py::TestGroup::test_member" in failing
    by_id = {i.id: i for i in obs.items}
    total = by_id["tests/test_invoice.py::test_total"]
    assert total.message.startswith("AssertionError: expected 42, got 41")
    assert (total.file, total.line) == ("tests/test_invoice.py", 6)
    assert "E " in total.detail and "assert got == 42" in total.detail
    # the innermost project frame of a nested failure is in the library code under test
    avg = by_id["tests/test_invoice.py::test_average_empty"]
    assert avg.file == "src/invoice.py" and avg.line == 9
    assert "ZeroDivisionError" in avg.message
    assert "tests/test_invoice.py::test_total (tests/test_invoice.py:6)" in obs.feedback
    assert len(obs.feedback.encode()) <= 4096
    assert obs.exit_code == 1


def test_signature_stable_across_runs_and_sensitive_to_change(junit_report, tmp_path):
    root, report, _ = junit_report
    first = parse(root, report)
    copy = tmp_path / "again"
    shutil.copytree(root, copy)
    (copy / "junit.xml").unlink()
    run(pytest_argv("-q", "--junitxml=junit.xml"), copy)
    second = parse(copy, copy / "junit.xml")
    assert first.signature == second.signature
    src = copy / "src" / "invoice.py"
    src.write_text(src.read_text().replace("result - 1", "result - 2"))
    run(pytest_argv("-q", "--junitxml=junit.xml"), copy)
    third = parse(copy, copy / "junit.xml")
    assert third.signature != first.signature


def test_green_run_and_zero_tests(tmp_path):
    write(tmp_path, {"test_a.py": "def test_a():\n    assert True\n"})
    run(pytest_argv("-q", "--junitxml=ok.xml"), tmp_path)
    obs = parse(tmp_path, tmp_path / "ok.xml", exit_code=0)
    assert obs.ok and obs.counts["passed"] == 1
    empty = tmp_path / "empty_proj"
    write(empty, {"test_none.py": "X = 1\n"})
    proc = run(pytest_argv("-q", "--junitxml=none.xml"), empty)
    obs = parse(empty, empty / "none.xml", exit_code=proc.returncode)
    assert proc.returncode == 5
    assert not obs.ok and obs.counts["tests"] == 0
    assert "no tests ran" in obs.feedback


def test_skipped_only_is_not_green(tmp_path):
    write(tmp_path, {"test_s.py": "import pytest\n\n@pytest.mark.skip\ndef test_s():\n    pass\n"})
    run(pytest_argv("-q", "--junitxml=s.xml"), tmp_path)
    obs = parse(tmp_path, tmp_path / "s.xml", exit_code=0)
    assert not obs.ok and obs.counts["skipped"] == 1


def test_collection_error_is_not_green(tmp_path):
    write(
        tmp_path,
        {"test_ok.py": "def test_ok():\n    pass\n", "test_broken.py": "import not_a_module_x\n"},
    )
    proc = run(pytest_argv("-q", "--junitxml=r.xml"), tmp_path)
    obs = parse(tmp_path, tmp_path / "r.xml", exit_code=proc.returncode, output=proc.stdout)
    assert proc.returncode != 0 and not obs.ok
    assert obs.counts["errors"] >= 1 or "exited" in obs.feedback


def test_nonzero_exit_with_clean_report_is_not_green(tmp_path):
    write(tmp_path, {"test_a.py": "def test_a():\n    pass\n"})
    run(pytest_argv("-q", "--junitxml=r.xml"), tmp_path)
    obs = parse(tmp_path, tmp_path / "r.xml", exit_code=3, output="INTERNALERROR> boom")
    assert not obs.ok
    assert "exited 3" in obs.feedback and "INTERNALERROR" in obs.feedback


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "report not found"),
        ("", "report is empty"),
        ("<testsuite><testcase name='a'>", "not well-formed XML"),
        ("this is not xml", "not well-formed XML"),
        ("<html><body/></html>", "not a JUnit report"),
        ('<?xml version="1.0"?>', "no XML element"),
    ],
)
def test_bad_reports_are_observations_not_crashes(tmp_path, content, problem):
    report = tmp_path / "r.xml"
    if content is not None:
        report.write_text(content)
    obs = parse(tmp_path, report)
    assert not obs.ok
    assert obs.error is not None and problem in obs.error and "r.xml" in obs.error
    assert obs.facts["failed"] == 0 and list(obs.facts["failing"]) == []


def test_huge_messages_and_many_failures_stay_bounded(tmp_path):
    cases = []
    for n in range(300):
        body = ("x" * 200 + "\n") * 2000 if n == 0 else f"E   assert {n} == 0"
        cases.append(
            f'<testcase classname="pkg.Mod" name="test_{n}"><failure message="boom {n}">'
            f"{body}</failure></testcase>"
        )
    report = tmp_path / "big.xml"
    report.write_text("<testsuites><testsuite>" + "".join(cases) + "</testsuite></testsuites>")
    obs = parse(tmp_path, report)
    assert obs.counts["failed"] == 300 and len(obs.facts["failing"]) == 300
    assert len(obs.feedback.encode()) <= 4096
    # one cause: every id named on its line, the numbers that tell them apart as a run
    assert "299 fail with one cause" in obs.feedback and "pkg.Mod.test_{1-299}" in obs.feedback
    assert all(len(i.detail) <= 800 and len(i.message) <= 300 for i in obs.items)
    small = parse(tmp_path, report, options={"max_feedback": 1000})
    assert len(small.feedback.encode()) <= 1000


def test_suite_level_error_flaky_and_duplicates(tmp_path):
    report = tmp_path / "r.xml"
    report.write_text(
        """<testsuites>
        <testsuite name="setup-broke"><error message="fixture failed">trace</error></testsuite>
        <testsuite name="s">
          <testcase classname="a.B" name="dup"/>
          <testcase classname="a.B" name="dup"><failure message="no"/></testcase>
          <testcase classname="a.B" name="flaky">
            <flakyFailure message="first try"><stackTrace>x</stackTrace></flakyFailure>
          </testcase>
          <testcase classname="a.B" name="uni"><failure message="ünïcödé 𝄞 ≠"/></testcase>
        </testsuite></testsuites>"""
    )
    obs = parse(tmp_path, report)
    assert obs.counts["tests"] == 4 and obs.counts["failed"] == 2 and obs.counts["errors"] == 1
    assert list(obs.facts["flaky"]) == ["a.B.flaky"]
    assert "setup-broke" in obs.facts["failing"]
    assert any("𝄞" in i.message for i in obs.items)


EXPECTED = {
    "gotestsum-report.xml": (60, 13, 0),
    "jest-junit-suite-failed-to-run.xml": (2, 0, 2),
    "surefire-flakyFailure.xml": (1, 0, 0),
    "surefire-rerunFailure.xml": (1, 1, 0),
    "go-junit-report-build-failed.xml": (5, 0, 3),
    "huge-system-out-2653-cases.xml": (2653, 1, 0),
    "testng-junitreport-duplicate-names.xml": (2, 1, 0),
    "xunit-net-bom.xml": (2, 0, 0),
    "jenkins-nested-testsuites.xml": (3, 1, 0),
}


@pytest.mark.skipif(not SHARED_FIXTURES.exists(), reason="shared fixtures not available")
@pytest.mark.parametrize("name", sorted(p.name for p in (SHARED_FIXTURES / "junit").glob("*.xml")))
def test_real_world_dialects(name):
    path = shared("junit", name)
    obs = parse(path.parent, path)
    if name == "pytest-corrupt-truncated.xml":
        assert obs.error and "line 11, column 21" in obs.error
        return
    assert obs.error is None, obs.error
    assert len(obs.feedback.encode()) <= 4096
    if name in EXPECTED:
        tests, failed, errors = EXPECTED[name]
        assert (obs.counts["tests"], obs.counts["failed"], obs.counts["errors"]) == (
            tests,
            failed,
            errors,
        )
    if name == "surefire-flakyFailure.xml":
        assert obs.ok and list(obs.facts["flaky"]) == ["io.olamy.FlakyTest.testApp"]
    if name == "nextest-rerun-flaky.xml":
        item = obs.items[0]
        assert (item.file, item.line) == ("tests/basic.rs", 19)


def test_a_large_mixed_report_reads_as_junitparser_reads_it(tmp_path):
    """Cases are classified from the tag stream, without building a tree: the counts and
    failing ids are junitparser's own reading of the same file, failures past the
    kept ones are named, and a kept failure's text (entities, CDATA, a child element
    after it) is its text as junitparser gives it."""
    from junitparser import JUnitXml

    lines = ['<?xml version="1.0" encoding="utf-8"?>\n<testsuites>']
    for s in range(3):
        lines.append(
            f'<testsuite name="s{s}"><properties><property name="p" value="v"/></properties>'
        )
        for n in range(s * 1000, s * 1000 + 1000):
            cls = f"pkg.test_m{s}.TestC"
            if n % 3 == 0:
                lines.append(
                    f'<testcase classname="{cls}" name="t{n}"><failure message="m{n}" type="E">'
                    f"lib/x.py:1: in f\n&gt;   assert {n} == 0\nE   assert {n} == 0 &amp; more"
                    f"<![CDATA[\n<cdata {n}>]]><stackTrace>child</stackTrace>tail</failure>"
                    "<system-out>out</system-out></testcase>"
                )
            elif n % 7 == 0:
                lines.append(
                    f'<testcase classname="{cls}" name="t{n}"><error message="e"/></testcase>'
                )
            elif n % 11 == 0:
                lines.append(f'<testcase classname="{cls}" name="t{n}"><skipped/></testcase>')
            elif n % 13 == 0:
                lines.append(
                    f'<testcase classname="{cls}" name="t{n}">'
                    '<flakyFailure message="once"/><system-out>x</system-out></testcase>'
                )
            else:
                lines.append(f'<testcase classname="{cls}" name="t{n}" time="0.1"/>')
        lines.append("</testsuite>")
    lines.append("</testsuites>")
    report = tmp_path / "mixed.xml"
    report.write_text("\n".join(lines), "utf-8")

    expected = {"tests": 0, "failed": 0, "errors": 0, "skipped": 0}
    failing, texts = [], {}
    for suite in JUnitXml.fromfile(str(report)):
        for case in suite:
            expected["tests"] += 1
            kinds = {type(r).__name__ for r in case.result}
            if "Failure" in kinds or "Error" in kinds:
                expected["failed" if "Failure" in kinds else "errors"] += 1
                failing.append(f"{case.classname}.{case.name}")
                texts[failing[-1]] = case.result[0].text
            elif "Skipped" in kinds:
                expected["skipped"] += 1
    obs = parse(tmp_path, report)
    counts = {k: obs.counts[k] for k in expected}
    assert counts == expected
    assert obs.counts["passed"] == expected["tests"] - len(failing) - expected["skipped"]
    assert list(obs.facts["failing"]) == failing and len(failing) > 1000
    assert len(obs.items) == 1000  # kept in full; the rest only named
    assert len(obs.facts["flaky"]) > 0 and obs.facts["flaky"][0] == "pkg.test_m0.TestC.t13"
    first = obs.items[0]
    assert (
        texts[first.id]
        == "lib/x.py:1: in f\n>   assert 0 == 0\nE   assert 0 == 0 & more\n<cdata 0>"
    )
    assert first.message == "assert 0 == 0 & more"
    assert "> assert 0 == 0" in first.detail or ">   assert 0 == 0" in first.detail


def test_failure_types_read_the_type_attribute_other_producers_write(tmp_path):
    report = tmp_path / "TEST-Shop.xml"
    report.write_text(
        '<testsuite name="Shop" tests="3">'
        '<testcase classname="ShopTest" name="takes"><failure type="java.lang.AssertionError"'
        ' message="expected 2">at ShopTest.takes(ShopTest.java:9)</failure></testcase>'
        '<testcase classname="ShopTest" name="gives"><error type="java.lang.NullPointerException"'
        ' message="boom"/></testcase>'
        '<testcase classname="ShopTest" name="says"><failure message="no reason"/></testcase>'
        "</testsuite>"
    )
    obs = parse(tmp_path, report)
    assert dict(obs.facts["failure_types"]) == {
        "ShopTest.takes": "AssertionError",
        "ShopTest.gives": "NullPointerException",
        "ShopTest.says": "",
    }
