"""The baseline: what every check said about the tree before the first act turn.

A run observes once before the model acts, so conditions can tell a failure the run
caused from one that was already there (``baseline.tests.newly_failing``), and so a
repository whose checks cannot even run stops before any token is spent. The baseline
facts of an observer are its facts at that observation (without ``items``) plus three
comparisons with the current observation, for parsers that report test ids
(``failing``, and ``passing`` where the parser has it):

- ``newly_failing``: ids failing now that passed, or did not exist, at the baseline;
- ``regressed``: ids that passed at the baseline and fail now;
- ``vanished``: ids that passed at the baseline and are neither passing nor failing now
  (deleted, renamed or skipped).

A parametrized test's ids can change between two runs of the same tree (parameters drawn
from a set follow its hash order), so an id that is gone is first matched, by file and
function (the id without its ``[...]`` part), with a new id of the same function, one
for one: a renamed failure is not a new one, and a renamed pass has not vanished (a
renamed pass that fails now is a regression). The baseline runs an observer whose ids
carry parameters twice and keeps the ids the two runs disagree on as ``unstable``; only
the functions those belong to are matched this way, so a case dropped from a stable
parametrization still vanishes, and so does every case beyond the ones a rename
explains. Where the check's stack can list the ids without running a test, a file whose
every id that list names alike is spared the second run; a list only ever spares one,
it never marks an id unstable (a collection may name what a run does not).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from looprun.data.freeze import freeze, thaw
from looprun.observe.base import Observation
from looprun.observe.feedback import DEFAULT_MAX_FEEDBACK, render
from looprun.observe.finding_keys import new_flags
from looprun.system.redact import Redactor, secret_values
from looprun.template.model import ObserverSpec

COMPARISONS = ("newly_failing", "regressed", "vanished")
_DROPPED = ("items",)


def slim(facts: Mapping[str, Any]) -> dict[str, Any]:
    """An observer's facts as the baseline keeps them: everything but the item records."""
    return {k: v for k, v in facts.items() if k not in _DROPPED}


def _ids(facts: Mapping[str, Any], key: str) -> list[str]:
    value = facts.get(key)
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else []


def function_of(test_id: str) -> str:
    """A test id without its parameters: ``t.py::test_f[a-b]`` -> ``t.py::test_f``."""
    return test_id.split("[", 1)[0] if test_id.endswith("]") else test_id


def unstable_ids(
    first: Mapping[str, Any], second: Mapping[str, Any], within: tuple[str, ...] = ()
) -> list[str]:
    """The ids one of two observations of the same tree has and the other lacks; with
    ``within``, the files the second one ran, only the ids of those files."""
    one = set(_ids(first, "failing")) | set(_ids(first, "passing"))
    two = set(_ids(second, "failing")) | set(_ids(second, "passing"))
    if within:
        files = set(within)
        one = {i for i in one if i.split("::", 1)[0] in files}
    return sorted(one ^ two)


def param_files(facts: Mapping[str, Any]) -> tuple[str, ...]:
    """The test files holding a parametrized id; empty when an id names no file (a
    collection error)."""
    ids = _ids(facts, "failing") + _ids(facts, "passing")
    if any("::" not in i for i in ids):
        return ()
    return tuple(sorted({i.split("::", 1)[0] for i in ids if i != function_of(i)}))


def rerun_files(facts: Mapping[str, Any], wanted: Sequence[str]) -> tuple[str, ...]:
    """The test files a second run of the baseline needs: ``wanted``, the files holding
    parametrized ids (only those ids can be renamed by a rerun) or those of them whose
    parameters may vary. Empty, for the whole command, when there are none or they are
    every file the run saw."""
    every = {i.split("::", 1)[0] for i in _ids(facts, "failing") + _ids(facts, "passing")}
    return tuple(sorted(wanted)) if wanted and len(wanted) < len(every) else ()


def unlisted_files(
    facts: Mapping[str, Any], listed: Sequence[str], within: Sequence[str] = ()
) -> tuple[str, ...]:
    """The test files holding an id of ``facts`` (failing or passing) that ``listed``, the
    ids another process lists without running a test, does not name; with ``within``, the
    files it listed, only those. Only such a file can hold an id that moves between two
    processes; an id the list names and the run did not (a skipped test) says nothing."""
    named = set(listed)
    missing = {i for i in _ids(facts, "failing") + _ids(facts, "passing") if i not in named}
    files = {i.split("::", 1)[0] for i in missing}
    return tuple(sorted(files & set(within) if within else files))


def parametrized(facts: Mapping[str, Any]) -> bool:
    """Whether any test id carries parameters (only those can be renamed by a rerun)."""
    return any(i != function_of(i) for key in ("failing", "passing") for i in _ids(facts, key))


def _pair(gone: list[str], new: list[str], functions: set[str]) -> tuple[set[str], set[str]]:
    """Match ids gone since the baseline with new ids of the same function, one for one
    and in order, for the functions in ``functions``: (the gone ids matched, the new ids
    matched)."""
    free: dict[str, list[str]] = {}
    for i in new:
        if function_of(i) in functions:
            free.setdefault(function_of(i), []).append(i)
    matched_gone, matched_new = set(), set()
    for i in gone:
        partners = free.get(function_of(i))
        if partners:
            matched_gone.add(i)
            matched_new.add(partners.pop(0))
    return matched_gone, matched_new


def compare(base: Mapping[str, Any], now: Mapping[str, Any]) -> dict[str, list[str]]:
    """The three comparisons of the current facts ``now`` with the baseline's ``base``."""
    base_failing = set(_ids(base, "failing"))
    base_passing = set(_ids(base, "passing"))
    unstable = set(_ids(base, "unstable"))
    functions = {function_of(i) for i in unstable}  # whose ids may be renamed by a rerun
    failing_now = _ids(now, "failing")
    passing_now = _ids(now, "passing")
    present = set(failing_now) | set(passing_now)
    known = base_failing | base_passing
    # a failure there at the baseline under another name is the same failure
    _, old_failure = _pair(
        sorted(base_failing - present), [i for i in failing_now if i not in known], functions
    )
    # each pass gone since the baseline is matched with a new id left over, the unstable
    # ones first; a match that fails now is a regression
    left = [i for i in [*failing_now, *passing_now] if i not in known and i not in old_failure]
    gone = sorted(base_passing - present, key=lambda i: (i not in unstable, i))
    renamed, renamed_to = _pair(gone, left, functions)
    # a narrow stage ran a selection: what it left out has not vanished
    has_passing = "passing" in now and now.get("stage") not in ("narrow", "related")
    return {
        "newly_failing": [i for i in failing_now if i not in base_failing | old_failure],
        "regressed": [i for i in failing_now if i in base_passing or i in renamed_to],
        "vanished": sorted(set(gone) - renamed) if has_passing else [],
    }


def still_failing(
    baseline: Mapping[str, Any] | None, current: Mapping[str, Any]
) -> dict[str, list[str]]:
    """Per observer, the ids that failed at the baseline and fail now (only observers with
    some): what a run that ends ``done`` left as it found it, named in its verdict so a
    green verdict never hides a failure nobody fixed."""
    out: dict[str, list[str]] = {}
    for name, base in (baseline or {}).items():
        now = set(_ids(current.get(name) or {}, "failing"))
        left = [i for i in _ids(base or {}, "failing") if i in now]
        if left:
            out[name] = left
    return out


def no_comparisons() -> dict[str, list[str]]:
    return {key: [] for key in COMPARISONS}


def baseline_facts(
    observe: Mapping[str, ObserverSpec],
    baseline: Mapping[str, Any] | None,
    current: Mapping[str, Any],
    empty: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    """``baseline.<observer>``: the baseline facts (empty ones when there was none) and
    the comparisons with ``current`` (an observer's facts this iteration, or its empty
    facts before it ran)."""
    out: dict[str, Any] = {}
    for name in observe:
        base = dict((baseline or {}).get(name) or slim(empty[name]))
        now = current.get(name) or empty[name]
        base.update(compare(base, now) if baseline else no_comparisons())
        out[name] = base
    return out


def only_new_findings(
    obs: Observation, base: Mapping[str, Any] | None, spec: ObserverSpec
) -> Observation:
    """``obs`` with feedback about the findings that are new since the baseline only
    (those there at the start are counted in one line), for observers whose parser keys
    its items (``finding_keys``): feedback listing hundreds of old findings invites edits
    to files the task has nothing to do with. The new items come first (the progress line
    names a new one), their keys with them; counts and every other fact stay as they are."""
    keys = obs.facts.get("finding_keys")
    known = (base or {}).get("finding_keys")
    if obs.error or not known or not isinstance(keys, (list, tuple)):
        return obs
    if len(keys) != len(obs.items):
        return obs
    flags = new_flags([str(k) for k in keys], [str(k) for k in known])
    order = [i for i, f in enumerate(flags) if f] + [i for i, f in enumerate(flags) if not f]
    new = [obs.items[i] for i in order if flags[i]]
    old = len(order) - len(new)
    if not old:
        return obs
    header = obs.feedback.splitlines()[0] if obs.feedback.strip() else ""
    said = f"{old} finding(s) already there at the start are not shown"
    if new:
        header = f"{header}; new since the start: {len(new)}" if header else header
    feedback = render(
        header,
        new,
        max_bytes=_max_feedback(spec),
        footer=f"({said})" if new else f"no new findings ({said})",
        noun="more new findings",
    )
    facts = {**thaw(obs.facts), "finding_keys": [keys[i] for i in order]}
    # items are not redacted where the command's output is: redact what is built from them
    return replace(
        obs,
        items=tuple(obs.items[i] for i in order),
        facts=freeze(facts),
        feedback=Redactor(secret_values(), marker="***").text(feedback),
    )


def _max_feedback(spec: ObserverSpec) -> int:
    try:
        return max(256, int(spec.options.get("max_feedback", DEFAULT_MAX_FEEDBACK)))
    except (TypeError, ValueError):
        return DEFAULT_MAX_FEEDBACK


def unusable(name: str, spec: ObserverSpec, obs: Observation) -> str:
    """Why an observer's baseline shows that its check cannot run on this repository
    (its report is missing or unreadable, it timed out, its configuration cannot be
    pinned, or its command exited with one of ``cannot_run_exit``), or '' when it ran
    (passing or failing alike)."""
    if not obs.ran or spec.run is None or (obs.exit_code is None and not obs.error):
        return ""
    where = f" ({spec.location})" if spec.location.line else ""
    if obs.exit_code is not None and obs.exit_code in spec.cannot_run_exit:
        return (
            f"observer {name!r}{where} cannot run on the starting tree: its command exited "
            f"{obs.exit_code}, which this template declares as 'the check could not run' "
            f"(cannot_run_exit){_said(obs)}"
        )
    # a check whose configuration cannot be pinned never ran (no exit status)
    unpinned = (spec.pin_config or spec.stack) is not None and obs.exit_code is None
    if obs.error and (obs.exit_code is not None or "timed out" in obs.error or unpinned):
        return f"observer {name!r}{where} cannot observe the starting tree: {obs.error}"
    return ""


def _said(obs: Observation) -> str:
    text = (obs.feedback or "").strip()
    if not text:
        return ""
    lines = text.splitlines()
    shown = "\n".join(lines[:15]) + ("\n..." if len(lines) > 15 else "")
    return ":\n" + shown
