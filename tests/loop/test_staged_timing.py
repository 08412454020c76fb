"""A staged observer skips its narrow tiers while a tier run costs about what a whole run
costs (a small suite whose time is the runner's start-up): the wall times come through
the clock port, here one that advances as the observer runs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from loop_helpers import make_template, text

from looprun.data.changes import FileChange
from looprun.loop.core import Loop, RunInfo
from looprun.loop.observe_step import ObserveStep
from looprun.loop.ports import KeepRecent, Ports
from looprun.observe.base import Observation
from looprun.template.model import ObserverSpec

FAILING = "tests/test_x.py::test_a"
RELATED = "tests/test_y.py"  # the test file importing the changed module


class Clock:
    """A monotonic clock that moves only when an observer runs."""

    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


class TimedObserver:
    """A pytest run that passes, taking ``narrow_s`` for the last failing id, ``related_s``
    for the test file related to the turn's change and ``whole_s`` for the whole suite;
    records which ran."""

    def __init__(self, clock: Clock, narrow_s: float, whole_s: float, related_s: float = 0.0):
        self.clock, self.whole_s = clock, whole_s
        self.narrow_s, self.related_s = narrow_s, related_s
        self.ran: list[str] = []
        self.related_asked = 0

    def observe(
        self, spec: ObserverSpec, context: Mapping[str, Any], *, deadline: float | None, base: str
    ) -> Observation:
        stage = "whole" if not spec.select else "related" if RELATED in spec.select else "narrow"
        self.ran.append(stage)
        self.clock.now += {"whole": self.whole_s, "narrow": self.narrow_s}.get(
            stage, self.related_s
        )
        return Observation(parser="junit", ok=True, facts={"passing": list(spec.select)})

    def related_tests(self, changed: list[str]) -> list[str]:
        self.related_asked += 1
        return [RELATED]

    def keeps_tree(self, spec: ObserverSpec) -> bool:
        return False


class Tree:
    """A working tree the observers never edit, where the turn changed one module."""

    def snapshot(self) -> str:
        return "tree"

    def file_changes(self, since: str, until: str | None = None) -> list[FileChange]:
        return [FileChange("pkg/x.py", "M")]

    def exclude(self, paths: Any) -> None:
        pass


def _step(
    narrow_s: float, whole_s: float, related_s: float | None = None, **spec: Any
) -> tuple[ObserveStep, TimedObserver]:
    """An observe step over one staged observer whose narrow selection is the last failing
    id (then, given ``related_s``, the related tier); its baseline already observed (whole,
    and measured) when ``whole_s`` is set."""
    clock = Clock()
    observer = TimedObserver(clock, narrow_s, whole_s, related_s or 0.0)
    sources = ("last_failing",) if related_s is None else ("last_failing", "related_tests")
    staged = ObserverSpec("tests", "junit", run=text("pytest", shell=True), narrow=sources, **spec)
    template = replace(make_template(), observe={"tests": staged})
    ports = Ports(
        model=None,  # type: ignore[arg-type]
        toolbox=None,  # type: ignore[arg-type]
        workspace=Tree(),  # type: ignore[arg-type]
        guard=None,  # type: ignore[arg-type]
        observer=observer,
        journal=None,  # type: ignore[arg-type]
        context=KeepRecent(),
        clock=clock,
    )
    loop = Loop(template, ports, inputs={"intent": "x"}, run=RunInfo("r", "d", "a", "w"))
    step = ObserveStep(loop)
    step.observe({})  # the baseline: always whole
    loop.state.baseline = {}
    loop.state.last_facts = {"tests": {"failing": [FAILING]}}
    loop.state.current = "turn"
    return step, observer


def _iterations(step: ObserveStep, n: int) -> list[Mapping[str, Any]]:
    return [step.observe({})["tests"].facts for _ in range(n)]


def test_tiers_that_cost_about_a_whole_run_are_skipped_after_one_measure() -> None:
    step, observer = _step(narrow_s=1.2, whole_s=1.5)
    first, second, third = _iterations(step, 3)
    # measured once (narrow then whole), then the whole command directly
    assert observer.ran == ["whole", "narrow", "whole", "whole", "whole"]
    assert first["stage"] == "whole" and "narrow" not in first
    for facts in (second, third):
        assert facts["stage"] == "whole" and list(facts["selected"]) == []
        assert facts["narrow"] == "skipped: a narrow run took 1.2 s, the whole run 1.5 s"


def test_a_related_tier_as_slow_as_a_whole_run_is_skipped_alone() -> None:
    """The related tier takes nearly the whole suite's time, the run of the last failures
    little: only the related tier stops running."""
    step, observer = _step(narrow_s=0.2, whole_s=6.0, related_s=5.0)
    first, second, third = _iterations(step, 3)
    assert observer.ran == ["whole", "narrow", "related", "whole"] + ["narrow", "whole"] * 2
    assert "narrow" not in first
    for facts in (second, third):
        assert list(facts["selected"]) == [FAILING]
        assert facts["narrow"] == "skipped: a related run took 5.0 s, the whole run 6.0 s"
    assert observer.related_asked == 1  # a skipped tier's selection is not worked out


def test_tiers_much_cheaper_than_a_whole_run_keep_running() -> None:
    step, observer = _step(narrow_s=0.5, whole_s=9.0)
    facts = _iterations(step, 3)
    assert observer.ran == ["whole"] + ["narrow", "whole"] * 3
    assert all(f["stage"] == "whole" and "narrow" not in f for f in facts)
    assert list(facts[-1]["selected"]) == [FAILING]


def test_a_suite_grown_slow_gets_its_tiers_back() -> None:
    step, observer = _step(narrow_s=1.2, whole_s=1.5)
    _iterations(step, 2)  # measured, then skipped
    observer.whole_s = 6.0  # the suite grew: the next whole run takes long
    skipped, resumed = _iterations(step, 2)
    assert "narrow" in skipped and "narrow" not in resumed
    assert observer.ran[-4:] == ["whole", "whole", "narrow", "whole"]


def test_the_share_is_the_templates_and_false_turns_skipping_off() -> None:
    step, observer = _step(narrow_s=1.2, whole_s=1.5, narrow_share=None)
    _iterations(step, 3)
    assert observer.ran == ["whole"] + ["narrow", "whole"] * 3
    step, observer = _step(narrow_s=1.2, whole_s=1.5, narrow_share=0.9)
    _iterations(step, 2)  # 1.2 s is under 0.9 of 1.5 s: the tiers pay
    assert observer.ran == ["whole"] + ["narrow", "whole"] * 2
    step, observer = _step(narrow_s=0.3, whole_s=1.5, narrow_share=0.1)
    _iterations(step, 2)
    assert observer.ran == ["whole", "narrow", "whole", "whole"]


def test_a_clock_that_never_moves_stages_as_before() -> None:
    step, observer = _step(narrow_s=0.0, whole_s=0.0)
    _iterations(step, 3)
    assert observer.ran == ["whole"] + ["narrow", "whole"] * 3
