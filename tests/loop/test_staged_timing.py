"""A staged observer skips its narrow tiers while a tier run costs about what a whole run
costs (a small suite whose time is the runner's start-up): the wall times come through
the clock port, here one that advances as the observer runs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from loop_helpers import make_template, text

from looprun.loop.core import Loop, RunInfo
from looprun.loop.observe_step import ObserveStep
from looprun.loop.ports import KeepRecent, Ports
from looprun.observe.base import Observation
from looprun.template.model import ObserverSpec

FAILING = "tests/test_x.py::test_a"


class Clock:
    """A monotonic clock that moves only when an observer runs."""

    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


class TimedObserver:
    """A pytest run that passes, taking ``narrow_s`` for a selection and ``whole_s`` for
    the whole suite; records which ran."""

    def __init__(self, clock: Clock, narrow_s: float, whole_s: float):
        self.clock, self.narrow_s, self.whole_s = clock, narrow_s, whole_s
        self.ran: list[str] = []

    def observe(
        self, spec: ObserverSpec, context: Mapping[str, Any], *, deadline: float | None, base: str
    ) -> Observation:
        self.ran.append("narrow" if spec.select else "whole")
        self.clock.now += self.narrow_s if spec.select else self.whole_s
        return Observation(parser="junit", ok=True, facts={"passing": list(spec.select)})


class Tree:
    """A working tree nothing changes (the observers here never edit it)."""

    def snapshot(self) -> str:
        return "tree"

    def exclude(self, paths: Any) -> None:
        pass


def _step(narrow_s: float, whole_s: float, **spec: Any) -> tuple[ObserveStep, TimedObserver]:
    """An observe step over one staged observer whose narrow selection is the last failing
    id; its baseline already observed (whole, and measured) when ``whole_s`` is set."""
    clock = Clock()
    observer = TimedObserver(clock, narrow_s, whole_s)
    staged = ObserverSpec(
        "tests", "junit", run=text("pytest", shell=True), narrow=("last_failing",), **spec
    )
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
