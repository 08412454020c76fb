"""The observe step: every observer runs on the real working tree, in template order.

Observers check the tree; they must not change it. What one edits (``ruff`` with
``fix = true``) is undone and reported as its problem; what runs beside held-out tests
never stays; the caches check tools write as they run are left alone.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import replace
from typing import Any

from looprun.data.changes import is_test_file
from looprun.data.freeze import freeze, thaw
from looprun.errors import LooprunError
from looprun.loop import limits as caps
from looprun.loop.baseline import only_new_findings
from looprun.loop.core import Loop
from looprun.loop.facts import unobserved
from looprun.observe.base import Observation
from looprun.template.model import ObserverSpec

# Caches the checks' own tools rewrite as they run (bytecode, pytest, coverage, linters):
# never an observer editing the code.
_CACHE_PARTS = frozenset(
    {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis", ".tox"}
)


class ObserveStep:
    """Runs the observers; remembers what they created and whether one edited the tree."""

    def __init__(self, loop: Loop):
        self.loop = loop
        self.edit = ""  # why an observer changed the tree during the last observation
        self.made: set[str] = set()  # files observers created (their caches)
        # each staged observer's wall time, measured in this run through the clock port (a
        # resumed run measures again): its last whole run, and its last tier run's stage
        self.whole_s: dict[str, float] = {}
        self.tier_s: dict[tuple[str, str], float] = {}  # (observer, stage): last wall time

    def exclude_reports(self, ctx: Mapping[str, Any]) -> None:
        """Observers' report files are never part of the run's changes, wherever they are."""
        paths = []
        for spec in self.loop.template.observe.values():
            if spec.file is None:
                continue
            try:
                paths.append(spec.file.render(ctx).strip())
            except LooprunError:
                continue  # not renderable yet: the observer will say why when it runs
        if paths:
            self.loop.ports.workspace.exclude(paths)

    def observe(
        self, ctx: dict[str, Any], *, bounded: bool = True, whole: bool = False
    ) -> dict[str, Observation]:
        """``ctx`` holds the engine names as they stand before this iteration's decision;
        each observer's fresh facts are added to it for the observers declared below.
        A staged observer runs its narrow selection first unless ``whole`` (or at the
        baseline, which is always whole, or while its tiers do not pay: see ``unpaid``)."""
        lp, st = self.loop, self.loop.state
        left = caps.remaining_time(lp.limits, lp.spent()) if bounded else None
        deadline = None if left is None else lp.ports.clock.monotonic() + left
        self.exclude_reports(ctx)
        ws = lp.ports.workspace
        self.edit = ""
        specs = lp.template.observe
        before = ws.snapshot() if any(s.run is not None for s in specs.values()) else ""
        out: dict[str, Observation] = {}
        for name, spec in specs.items():
            try:
                staging = not (whole or st.baseline is None)
                unpaid = self.unpaid(name, spec) if staging else {}
                skipped = "; ".join(unpaid.values())
                tiers = self.tiers(name, spec, skip=unpaid) if staging else []
                passed: tuple[str, ...] = ()  # the selections that passed first
                passing: tuple[str, ...] = ()  # the test ids those selections passed
                failed = None
                for stage, ids in tiers:
                    ids = tuple(i for i in ids if i not in passed)
                    if not ids:
                        continue
                    failed, before, ok = self.narrow_run(
                        name, spec, stage, ids, ctx, deadline, before
                    )
                    if failed is not None:
                        break
                    passed += ids
                    passing += ok
                if failed is not None:
                    out[name] = with_earlier_passes(failed, passing)
                    if st.baseline is not None:
                        out[name] = only_new_findings(out[name], st.baseline.get(name), spec)
                    ctx[name] = out[name].to_facts()
                    continue
                t0 = lp.ports.clock.monotonic()
                out[name] = lp.ports.observer.observe(spec, ctx, deadline=deadline, base=st.base)
                if spec.narrow:
                    if out[name].ran:
                        self.whole_s[name] = lp.ports.clock.monotonic() - t0
                    out[name] = staged(out[name], "whole", passed, skipped)
            except LooprunError as exc:
                out[name] = replace(unobserved(spec, str(exc)), ran=True)
            except BaseException:
                held = spec.holdout is not None and spec.run is not None
                if held and ws.snapshot() != before:
                    # interrupted: what ran beside the held-out tests is undone all the same
                    ws.restore(before)
                raise
            if spec.run is not None and out[name].ran:
                out[name], before = self.edits_by(name, spec, out[name], before)
            if st.baseline is not None:  # the baseline itself is fed back whole
                out[name] = only_new_findings(out[name], st.baseline.get(name), spec)
            ctx[name] = out[name].to_facts()
        return out

    def unpaid(self, name: str, spec: ObserverSpec) -> dict[str, str]:
        """The tiers of a staged observer skipped this iteration, each with why: its last
        run took at least ``narrow_share`` of the observer's last whole run's wall time,
        both measured in this run. Each tier is judged on its own time, so a related tier
        as slow as the whole suite does not take the cheap run of the last failures with
        it. Every whole run is measured, a tier's time is kept until it runs again: when a
        whole run comes to take long enough against that time, the tier runs again (and
        is measured again). With no measurement yet, or a whole run that took no time, a
        tier runs."""
        share = spec.narrow_share
        whole = self.whole_s.get(name, 0.0)
        if not spec.narrow or share is None or whole <= 0:
            return {}
        return {
            stage: f"skipped: a {stage} run took {tier:.1f} s, the whole run {whole:.1f} s"
            for (observer, stage), tier in self.tier_s.items()
            if observer == name and tier >= share * whole
        }

    def tiers(
        self, name: str, spec: ObserverSpec, skip: Container[str] = ()
    ) -> list[tuple[str, tuple[str, ...]]]:
        """The selections a staged observer runs before the whole command, in order: the
        narrow one, then (with ``related_tests``) the test files importing what the turn
        changed. A tier with no ids, or too many, is skipped, and so is a stage in ``skip``
        (its selection is not even worked out)."""
        out = []
        if "narrow" not in skip:
            out.append(("narrow", self.selection(name, spec)))
        if RELATED in spec.narrow and "related" not in skip:
            out.append(("related", self.related()))
        return [(stage, ids) for stage, ids in out if ids]

    def related(self) -> tuple[str, ...]:
        """The test files related to the turn's changes (empty when unsure, or when they
        are every test file: the whole command is then the same run); when no file is,
        the tests that name a definition the turn changed (a package that re-exports
        the changed module is imported by every test file)."""
        st, lp = self.loop.state, self.loop
        if not st.current:
            return ()
        ws = lp.ports.workspace
        now = ws.snapshot()
        changes = ws.file_changes(st.current, now)
        changed = [c.path for c in changes if c.status != "D"]
        found = lp.ports.observer.related_tests(changed) if changed else None
        if not found and changes:
            found = lp.ports.observer.related_items(ws.file_changes(st.current, now, contents=True))
        if not found:
            return ()
        picked = [i for i in found if node_id(i)]
        return tuple(picked) if len(picked) <= _MAX_SELECTED else ()

    def selection(self, name: str, spec: ObserverSpec) -> tuple[str, ...]:
        """The node ids a staged observer runs first: from its ``narrow`` sources, in
        order, without repeats; empty (run whole) when there are none or too many."""
        if not spec.narrow:
            return ()
        st, ids = self.loop.state, []
        for source in spec.narrow:
            if source == "last_failing":
                ids += _strings((st.last_facts.get(name) or {}).get("failing"))
            elif source == "task_failing":
                for done in st.done_facts.values():
                    base = (done.get("baseline") or {}).get(name) or {}
                    ids += _strings(base.get("newly_failing"))
            elif source == "changed_tests" and st.current:
                ws = self.loop.ports.workspace
                ids += [
                    c.path
                    for c in ws.file_changes(st.current, ws.snapshot())
                    if c.status != "D" and is_test_file(c.path)
                ]
        picked = list(dict.fromkeys(i for i in ids if node_id(i)))
        return tuple(picked) if len(picked) <= _MAX_SELECTED else ()

    def narrow_run(
        self,
        name: str,
        spec: ObserverSpec,
        stage: str,
        ids: tuple[str, ...],
        ctx: Mapping[str, Any],
        deadline: float | None,
        before: str,
    ) -> tuple[Observation | None, str, tuple[str, ...]]:
        """A selection's stage (narrow | related): its observation when it failed the way
        tests fail (feedback for the model), None when the next tier must run (it passed,
        or it could not run as a selection: an id gone, a collection error, no test of it
        ran, nothing named as failing); and the test ids it passed."""
        lp = self.loop
        narrow = replace(spec, select=ids)
        t0 = lp.ports.clock.monotonic()
        obs = lp.ports.observer.observe(narrow, ctx, deadline=deadline, base=lp.state.base)
        if obs.ran:
            self.tier_s[name, stage] = lp.ports.clock.monotonic() - t0
        obs, before = self.edits_by(name, spec, obs, before)
        usable = obs.ran and not obs.error and obs.exit_code not in spec.cannot_run_exit
        # a selection that failed without naming a failing test (no test of it was
        # collected: a class pytest does not take) says nothing the whole run would not
        usable = usable and (obs.ok or bool(_strings(obs.facts.get("failing"))))
        if obs.ok or not usable or self.edit:
            ok = tuple(_strings(obs.facts.get("passing"))) if obs.ok and not self.edit else ()
            return None, before, ok
        return staged(obs, stage, ids), before, ()

    def again(
        self, name: str, spec: ObserverSpec, ctx: Mapping[str, Any], select: tuple[str, ...] = ()
    ) -> Observation | None:
        """One more run of one observer on the same tree (None: it could not run), of the
        test files ``select`` names (each a :func:`node_id`) when given."""
        lp = self.loop
        if select:
            spec = replace(spec, select=select)
        before = lp.ports.workspace.snapshot()
        try:
            obs = lp.ports.observer.observe(spec, ctx, deadline=None, base=lp.state.base)
        except LooprunError:
            return None
        return self.edits_by(name, spec, obs, before)[0]

    def listed(
        self, name: str, spec: ObserverSpec, ctx: Mapping[str, Any], select: tuple[str, ...] = ()
    ) -> tuple[str, ...] | None:
        """The test ids one observer's command names on the same tree, listed by its stack
        without running a test (of the test files ``select`` names, when given); None when
        they cannot be listed, or the listing edited the tree (undone and reported as a
        run's edits are)."""
        lp = self.loop
        if select:
            spec = replace(spec, select=select)
        before = lp.ports.workspace.snapshot()
        try:
            ids = lp.ports.observer.list_ids(spec, ctx, base=lp.state.base)
        except LooprunError:
            ids = None
        nothing = Observation(parser=spec.parser, ok=True)
        if self.edits_by(name, spec, nothing, before)[0] is not nothing:
            return None
        return ids

    def edits_by(
        self, name: str, spec: ObserverSpec, obs: Observation, before: str
    ) -> tuple[Observation, str]:
        """An observer's edits to existing files are undone and reported as its problem;
        returns the observation and the snapshot the next observer starts from. A check
        the port ran where it could not write the working tree has none to look for."""
        if self.loop.ports.observer.keeps_tree(spec):
            return obs, before
        ws = self.loop.ports.workspace
        now = ws.snapshot()
        if now == before:
            return obs, before
        changes = ws.file_changes(before, now)
        edited = [
            c
            for c in changes
            if c.status != "A" and c.path not in self.made and not _is_cache(c.path)
        ]
        if spec.holdout is not None and changes:
            # what code ran beside the held-out tests wrote (a copy of them) never stays
            ws.restore(before)
            return obs, before
        self.made |= {c.path for c in changes if c.status == "A"}
        if not edited:
            return obs, now  # files it created (caches) are left as they are
        ws.restore(before)
        paths = ", ".join(c.path for c in edited[:10]) + (" ..." if len(edited) > 10 else "")
        why = (
            f"observer {name!r} ({spec.location}) changed the working tree it checks "
            f"({paths}); its changes were undone. An observer must not edit files: run its "
            "tool in check-only mode (e.g. `ruff check --no-fix`, `black --check`), or "
            "remove the fixing option from the project's configuration"
        )
        if not self.edit:
            self.edit = why
        return replace(obs, ok=False, error=why, feedback=f"{why}\n{obs.feedback}"), before


_MAX_SELECTED = 200  # more ids than this: the narrow run would not be narrow
RELATED = "related_tests"  # the narrow source that makes a tier of its own
SELECTION_STAGES = ("narrow", "related")  # stages that ran a part of the suite


def staged(obs: Observation, stage: str, ids: tuple[str, ...], skipped: str = "") -> Observation:
    """``stage`` (narrow | related | whole) and ``selected`` among a staged observer's facts: the
    iteration's record says which ran (a whole run with ids selected: the narrow run of
    those passed first), and a narrow run's missing tests never count as vanished. A whole
    run that skipped the tiers because they would not pay says why in ``narrow``."""
    facts = {**thaw(obs.facts), "stage": stage, "selected": list(ids)}
    if skipped:
        facts["narrow"] = skipped
    return replace(obs, facts=freeze(facts))


def with_earlier_passes(obs: Observation, passing: tuple[str, ...]) -> Observation:
    """A failed tier's observation, its ``passing`` joined by the ids an earlier tier of the
    same iteration passed on the same tree: the reproduction that passed in the narrow run
    is not reported as "not run" because the related tier that failed did not select it.
    Counts stay the tier's own; a tier's facts never decide done."""
    if not passing:
        return obs
    facts = thaw(obs.facts)
    failing = set(_strings(facts.get("failing")))
    own = _strings(facts.get("passing"))
    extra = [i for i in passing if i not in failing and i not in own]
    facts["passing"] = own + extra
    return replace(obs, facts=freeze(facts))


def narrowed(observations: Mapping[str, Observation]) -> bool:
    """Whether any observation is a selection's (which can never decide done)."""
    return any(o.facts.get("stage") in SELECTION_STAGES for o in observations.values())


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, (list, tuple)) else []


def node_id(text: str) -> bool:
    """A pytest node id of a file in the tree (``tests/test_x.py::test_a[p]``): a relative
    path without ``..`` that cannot be read as an option. Anything else (a model-named
    id like ``-p evil``, an absolute path) is never passed to the command."""
    path = text.split("::", 1)[0]
    parts = path.split("/")
    return (
        path.endswith(".py")
        and not path.startswith(("-", "/", "~"))
        and ".." not in parts
        and "\\" not in path
        and all(p and not p.startswith("-") for p in parts)
        and "\n" not in text
        and "\x00" not in text
    )


def _is_cache(path: str) -> bool:
    parts = path.split("/")
    return bool(_CACHE_PARTS.intersection(parts[:-1])) or parts[-1].startswith(".coverage")
