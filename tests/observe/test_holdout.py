"""The held-out copy on a real tree: made without following links, never over anything,
and gone afterwards whatever ended the observer; the observation sealed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from looprun.checks.holdout import (
    GENERIC,
    Holdout,
    HoldoutError,
    copied_in,
    sealed,
)
from looprun.observe.base import Item, Observation
from looprun.template.holdout import dest_problem

SECRET = "def test_secret_case_x9():\n    assert True\n"


def _source(tmp_path: Path) -> Path:
    src = tmp_path / "held"
    (src / "sub").mkdir(parents=True)
    (src / "test_held.py").write_text(SECRET)
    (src / "sub" / "test_more.py").write_text(SECRET)
    return src


def _tree(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / "tests").mkdir(parents=True)
    (work / "tests" / "test_own.py").write_text("x = 1\n")
    return work


def test_the_copy_is_there_only_inside_the_block(tmp_path: Path) -> None:
    work, src = _tree(tmp_path), _source(tmp_path)
    with copied_in(Holdout("h", src, "tests/deep/held"), work):
        assert (work / "tests/deep/held/sub/test_more.py").read_text() == SECRET
    assert not (work / "tests" / "deep").exists()  # the directory made for it too
    assert (work / "tests" / "test_own.py").read_text() == "x = 1\n"


def test_the_copy_is_removed_when_the_block_fails(tmp_path: Path) -> None:
    work, src = _tree(tmp_path), _source(tmp_path)
    with pytest.raises(KeyboardInterrupt), copied_in(Holdout("h", src, "held"), work):
        # what ran beside the tests added to the copy, and was interrupted
        (work / "held" / "__pycache__").mkdir()
        (work / "held" / "__pycache__" / "x.pyc").write_bytes(b"x")
        raise KeyboardInterrupt
    assert not (work / "held").exists()


def test_a_file_already_at_the_destination_is_never_overwritten(tmp_path: Path) -> None:
    work, src = _tree(tmp_path), _source(tmp_path)
    (work / "held").write_text("the model's\n")
    with (
        pytest.raises(HoldoutError, match="never copied over it"),
        copied_in(Holdout("h", src, "held"), work),
    ):
        pass
    assert (work / "held").read_text() == "the model's\n"


def test_a_link_planted_on_the_way_is_not_followed(tmp_path: Path) -> None:
    work, src = _tree(tmp_path), _source(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (work / "deep").symlink_to(outside)
    with (
        pytest.raises(HoldoutError, match="not a real directory"),
        copied_in(Holdout("h", src, "deep/held"), work),
    ):
        pass
    assert list(outside.iterdir()) == []
    # a link at the destination itself is something there: refused, its target untouched
    (work / "held").symlink_to(outside)
    with pytest.raises(HoldoutError), copied_in(Holdout("h", src, "held"), work):
        pass
    assert os.path.islink(work / "held") and list(outside.iterdir()) == []


def test_a_link_swapped_in_during_the_run_is_removed_as_a_link(tmp_path: Path) -> None:
    work, src = _tree(tmp_path), _source(tmp_path)
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "precious.txt").write_text("keep me\n")
    with copied_in(Holdout("h", src, "held"), work):
        # a command replaced the copy with a link to a directory worth deleting
        for path in sorted((work / "held").rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
        (work / "held").rmdir()
        (work / "held").symlink_to(keep)
    assert not os.path.lexists(work / "held")
    assert (keep / "precious.txt").read_text() == "keep me\n"


@pytest.mark.parametrize(
    "dest", ["/abs", "../up", "a/../b", ".git/x", "x/.looprun", "tests/*", "", "a\\b"]
)
def test_a_destination_that_is_not_one_plain_relative_path_is_refused(dest: str) -> None:
    assert dest_problem(dest)


def test_the_sealed_observation_keeps_numbers_and_drops_names() -> None:
    obs = Observation(
        parser="junit",
        ok=False,
        exit_code=1,
        counts={"failed": 1},
        items=(Item("held/test_held.py::test_secret_case_x9", "assert 113 == 13"),),
        feedback="held/test_held.py::test_secret_case_x9 failed: assert 113 == 13",
        facts={"failed": 1, "consistent": True, "failing": ["test_secret_case_x9"],
               "failure_types": {"test_secret_case_x9": "AssertionError"}},
        error="report says test_secret_case_x9",
        signature="abc",
    )  # fmt: skip
    out = sealed(obs)
    facts = out.to_facts()
    assert facts["failed"] == 1 and facts["consistent"] is True and facts["ok"] is False
    assert "failing" not in facts and "failure_types" not in facts
    assert out.feedback == GENERIC and out.error == GENERIC and out.items == ()
    assert "secret" not in repr(facts)
    assert sealed(Observation(parser="junit", ok=True)).feedback == ""


_TEMPLATE = """\
looprun: 1
name: leaky
inputs: {intent: {type: string, required: true}, acceptance: {type: string, default: ""}}
observe:
  holdout:
    holdout: {from: "{{ inputs.acceptance }}", to: TO}
    run: "true"
    parser: junit
    file: x.xml
act: {prompt: "Task: {{ task.goal }} {{ holdout.failing }}", tools: [write_file]}
exit: ["holdout.ok and holdout.failed == 0"]
"""


@pytest.mark.parametrize(
    ("to", "said"),
    [
        ("accept", "10:15: act.prompt: observer 'holdout' is a held-out check"),
        ("../up", "6:52: observe.holdout.holdout.to: '../up' must be a plain relative path"),
    ],
)
def test_a_template_that_would_leak_or_escape_is_invalid(
    tmp_path: Path, to: str, said: str
) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(_TEMPLATE.replace("TO", to))
    proc = subprocess.run(
        [sys.executable, "-m", "looprun", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert said in proc.stdout + proc.stderr
