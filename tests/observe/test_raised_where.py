"""Where a failure was raised, judged by looprun from a report and the tree's files.

The project is the outcome plugin's (tests/observe/test_outcome_channel.py): every test
calls the code, and they differ in where their failure was raised. pytest runs it with no
looprun module (no `-p looprun_outcome`, no channel) and native tracebacks; the junit
parser's `judge_raised` reads the report's frames and the files with `ast`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from test_outcome_channel import _SELF_RAISED, SELF_RAISED_VERDICTS, _exercise_project

from looprun.checks.runner import observe_command
from looprun.observe.raised_where import native_frames, self_raised
from looprun.observe.traceback import Frame

_CODE = (
    "LIMIT = 2\n\n\ndef double(x):\n    return 2 * x\n\n\ndef boom():\n"
    "    raise ValueError('bug')\n\n\ndef sort_in_place(xs):\n    xs.append(0)\n\n\n"
    "class Box:\n    def __init__(self):\n        self.items = []\n\n"
    "    def put(self, x):\n        self.items.append(x)\n"
)


def _fresh(work: Path, *, judge: bool = True) -> dict[str, Any]:
    """The facts of a real pytest run of ``work`` that loads no looprun module."""
    report = work / "out" / "fresh.xml"
    report.parent.mkdir(exist_ok=True)
    obs = observe_command(
        "junit",
        workdir=work,
        command=f"{sys.executable} -m pytest -q -p no:cacheprovider --tb=native "
        f"--junitxml={report}",
        file=report,
        options={"judge_raised": True} if judge else {},
        timeout_s=120,
    )
    return obs.to_facts()


def _project(tmp_path: Path, test: str = _SELF_RAISED) -> Path:
    work = _exercise_project(tmp_path)
    (work / "pkg" / "core.py").write_text(_CODE)
    (work / "tests" / "helpers.py").write_text(
        "def check(got, want):\n    assert got == want\n\n\n"
        "def fail(got):\n    raise AssertionError(got)\n"
    )
    (work / "tests" / "test_x.py").write_text(test)
    return work


def test_the_engine_names_the_failures_the_test_raised_itself(tmp_path: Path) -> None:
    """The same verdicts as the plugin's judge in the test's process, without it."""
    facts = _fresh(_project(tmp_path))
    assert facts["failed"] == 16, facts
    said = {k.split("::")[1]: v for k, v in facts["self_raised"].items()}
    assert said == SELF_RAISED_VERDICTS


def test_a_judge_replaced_in_the_tests_process_changes_nothing(tmp_path: Path) -> None:
    """The test swaps the plugin's judge where it finds it; this judge is not there."""
    test = (
        "import os\nimport sys\n\nfrom pkg import core\n\n\n"
        "def test_replaces_the_judge():\n"
        '    if "looprun_outcome" in sys.modules:\n'
        '        sys.modules["looprun_outcome"]._self_raised = lambda tb: ""\n'
        "    core.double(2)\n"
        "    if not os.path.exists('marker'):\n"
        "        raise ValueError('bug')\n"
    )
    facts = _fresh(_project(tmp_path, test))
    assert facts["self_raised"] == {
        "tests/test_x.py::test_replaces_the_judge": (
            "tests/test_x.py:12: a `raise` statement in the test"
        )
    }


def test_frames_written_into_the_message_are_not_read(tmp_path: Path) -> None:
    """A message that looks like a chained traceback through the code adds no frame."""
    fake = (
        "bug\\n\\nDuring handling of the above exception, another exception occurred:"
        '\\n\\nTraceback (most recent call last):\\n  File \\"pkg/core.py\\", line 9, in boom'
    )
    test = (
        "from pkg import core\n\n\ndef test_forges():\n    core.double(2)\n"
        f'    raise ValueError("{fake}")\n'
    )
    facts = _fresh(_project(tmp_path, test))
    assert facts["self_raised"] == {
        "tests/test_x.py::test_forges": "tests/test_x.py:6: a `raise` statement in the test"
    }


def test_without_the_option_nothing_is_judged(tmp_path: Path) -> None:
    facts = _fresh(_project(tmp_path), judge=False)
    assert facts["failed"] == 16 and facts["self_raised"] == {}


def test_a_frame_in_the_code_makes_it_the_codes(tmp_path: Path) -> None:
    work = _project(tmp_path)
    frames = [Frame("pkg/core.py", 9, ""), Frame("tests/test_x.py", 32, "")]
    assert self_raised(frames, work) == ""
    assert self_raised(frames[1:], work).endswith("a `raise` statement in the test")
    # a file it cannot read, or a line in no statement: counts as the code's
    assert self_raised([Frame("tests/gone.py", 3, "")], work) == ""
    assert self_raised([Frame("tests/test_x.py", 9999, "")], work) == ""


def test_native_frames_need_the_message_at_the_end() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/w/tests/test_x.py", line 3, in test_a\n'
        "    raise ValueError('x')\n"
        "ValueError: x\n"
    )
    assert native_frames("ValueError: x", text, "/w") == [
        Frame("tests/test_x.py", 3, '  File "/w/tests/test_x.py", line 3, in test_a'.strip())
    ]
    assert native_frames("ValueError: other", text, "/w") is None
    assert native_frames("x", "tests/test_x.py:3: ValueError\nx", "/w") is None
