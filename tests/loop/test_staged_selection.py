"""What a staged observer may append to its command: pytest node ids of files in the tree,
never a model-chosen option or a path outside it."""

from __future__ import annotations

import pytest

from looprun.loop.observe_step import narrowed, node_id, staged
from looprun.observe.base import Observation


@pytest.mark.parametrize(
    "test_id",
    ["tests/test_x.py::test_a", "test_teens.py", "t/test_y.py::C::test_b[a b; $(x)]"],
)
def test_node_ids_of_files_in_the_tree_are_selected(test_id: str) -> None:
    assert node_id(test_id)


@pytest.mark.parametrize(
    "test_id",
    [
        "-p evil.py",
        "--rootdir=/ x.py",
        "tests/-p.py",
        "/etc/test_x.py",
        "../outside/test_x.py",
        "tests/../../test_x.py",
        "tests.test_x.TestC.test_a",
        "test_x.py::a\nb",
        "~/test_x.py",
    ],
)
def test_anything_else_is_never_passed_to_the_command(test_id: str) -> None:
    assert not node_id(test_id)


@pytest.mark.parametrize(
    ("stage", "partial"), [("narrow", True), ("related", True), ("whole", False)]
)
def test_only_a_whole_stage_may_decide_done(stage: str, partial: bool) -> None:
    obs = staged(Observation(parser="junit", ok=True), stage, ("tests/test_x.py",))
    assert narrowed({"tests": obs}) is partial
    assert obs.facts["stage"] == stage and list(obs.facts["selected"]) == ["tests/test_x.py"]
