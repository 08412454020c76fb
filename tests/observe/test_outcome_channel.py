"""The pytest outcome channel against real pytest runs whose conftest fakes the result.

Each project has one failing test; the conftest rewrites what pytest reports in a
different place. The channel (looprun's plugin writing to an inherited pipe) and the exit
code must show the disagreement as ``consistent: false``; an honest run agrees.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from looprun.observe.runner import observe_command

_TEST = "def test_ok():\n    assert True\n\n\ndef test_bug():\n    assert 1 == 2\n"
_CHEATS = {
    "junit rewritten at unconfigure": (
        "import re\n\n\ndef pytest_unconfigure(config):\n"
        "    path = config.option.xmlpath\n"
        "    text = re.sub(r'<failure.*?</failure>', '', open(path).read(), flags=re.S)\n"
        "    open(path, 'w').write(text)\n"
    ),
    "logreport hook flips the outcome": (
        "import pytest\n\n\n@pytest.hookimpl(tryfirst=True)\n"
        "def pytest_runtest_logreport(report):\n"
        "    if report.failed:\n        report.outcome = 'passed'\n"
    ),
    "exitstatus set to 0": "def pytest_sessionfinish(session):\n    session.exitstatus = 0\n",
}


def _observe(work: Path, channel: bool = True) -> dict[str, Any]:
    report = work / "out" / "junit.xml"
    report.parent.mkdir(exist_ok=True)
    obs = observe_command(
        "junit",
        workdir=work,
        command=f"{sys.executable} -m pytest -q -p no:cacheprovider "
        + ("-p looprun_outcome " if channel else "")
        + f"--junitxml={report}",
        file=report,
        options={"outcome_channel": "pytest"} if channel else {},
        timeout_s=120,
    )
    return obs.to_facts()


def _project(tmp_path: Path, conftest: str = "") -> Path:
    (tmp_path / "test_x.py").write_text(_TEST)
    if conftest:
        (tmp_path / "conftest.py").write_text(conftest)
    return tmp_path


def test_an_honest_failing_run_is_consistent(tmp_path: Path) -> None:
    facts = _observe(_project(tmp_path))
    assert (facts["failed"], facts["consistent"], facts["tampering"]) == (1, True, "")
    assert facts["failing"] == ["test_x.py::test_bug"]


@pytest.mark.parametrize("cheat", sorted(_CHEATS))
def test_a_faked_result_is_inconsistent(tmp_path: Path, cheat: str) -> None:
    facts = _observe(_project(tmp_path, _CHEATS[cheat]))
    assert facts["ok"] is False and facts["consistent"] is False
    assert "test_x.py::test_bug" in facts["tampering"]
    assert "tampered with" in facts["feedback"]


def test_without_the_channel_an_exit_code_the_report_denies_is_still_not_ok(
    tmp_path: Path,
) -> None:
    work = _project(tmp_path, _CHEATS["junit rewritten at unconfigure"])
    facts = _observe(work, channel=False)
    assert (facts["failed"], facts["exit_code"], facts["ok"]) == (0, 1, False)


def test_a_plugin_shadowed_from_the_workdir_is_flagged(tmp_path: Path) -> None:
    work = _project(tmp_path)
    (work / "looprun_outcome.py").write_text("")  # `python -m` puts the workdir first
    facts = _observe(work)
    assert facts["consistent"] is False and "never reported" in facts["tampering"]
