"""``observe``: each observer - its parser and options, its command or report, ``when``
(earlier observers only), ``pin_config`` and ``holdout``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from looprun.data.freeze import freeze
from looprun.observe.registry import BUILTIN as BUILTIN_PARSERS
from looprun.observe.registry import is_parser, option_problems, parser_names
from looprun.system.resources import builtin_template, templates_dir
from looprun.template import deps
from looprun.template.build.reader import Reader
from looprun.template.holdout import dest_problem as holdout_dest_problem
from looprun.template.model import (
    ENGINE_NAMES,
    INPUT_OPTION,
    NARROW_SHARE,
    NARROW_SOURCES,
    HoldoutSpec,
    ObserverSpec,
    VariantsSpec,
)
from looprun.template.semantic import (
    CONDITION_ENGINE_NAMES,
    HOLDOUT_SOURCE_NAMES,
    OBSERVER_COMMAND_NAMES,
    VARIANT_PROMPT_NAMES,
)
from looprun.template.suggest import did_you_mean
from looprun.template.yamlpos import JsonPath


def build_observers(r: Reader) -> dict[str, ObserverSpec]:
    out: dict[str, ObserverSpec] = {}
    earlier: set[str] = set()
    for name, spec in r.observers.items():
        path: JsonPath = ("observe", name)
        if name in ENGINE_NAMES:
            r.problem(path, f"observer name '{name}' is taken by an engine variable", key=True)
        if not isinstance(spec, dict):
            continue
        parser = spec.get("parser")
        if isinstance(parser, str) and parser not in BUILTIN_PARSERS:
            deps.volatile()  # a plugin's parser: valid only while it is installed
        if isinstance(parser, str) and not is_parser(parser):
            known_parsers = parser_names()
            hint = did_you_mean(parser, known_parsers) or f" (known: {', '.join(known_parsers)})"
            r.problem((*path, "parser"), f"unknown parser '{parser}'{hint}")
        if (
            isinstance(parser, str)
            and parser not in ("git_diff",)
            and not (spec.get("run") or spec.get("file"))
        ):
            r.problem(path, f"parser '{parser}' needs `run` (a command) or `file` (a report)")
        # a command may name what the run did so far (the done tasks' facts, earlier
        # observers'): data from the run, so always one shell-quoted word
        data_names = frozenset(OBSERVER_COMMAND_NAMES | {"tasks"} | earlier)
        run = r.text((*path, "run"), data_names, "an observer command", shell=True)
        file = r.text((*path, "file"), OBSERVER_COMMAND_NAMES, "an observer file")
        when_allowed = frozenset(CONDITION_ENGINE_NAMES | earlier)
        when = None
        if "when" in spec:
            when = r.condition((*path, "when"), when_allowed, "`when` (earlier observers only)")
        earlier.add(name)
        timeout = r.duration((*path, "timeout"))
        options = spec.get("options") if isinstance(spec.get("options"), dict) else {}
        bound = _input_options(r, path, options)
        if isinstance(parser, str):
            checked = {k: (None if k in bound else v) for k, v in options.items()}
            for key, message, bad_name in option_problems(parser, checked):
                r.problem((*path, "options", key), message, key=bad_name)
        out[name] = ObserverSpec(
            name=name,
            parser=parser if isinstance(parser, str) else "",
            run=run,
            file=file,
            timeout_s=timeout if timeout is not None else ObserverSpec.timeout_s,
            when=when,
            options=freeze(options),
            location=r.doc.key_at(path),
            cannot_run_exit=tuple(
                c
                for c in spec.get("cannot_run_exit") or ()
                if isinstance(c, int) and not isinstance(c, bool)
            ),
            pin_config=_pin_config(r, path, spec, run),
            stack=_stack(r, path, spec, run),
            holdout=_holdout(r, (*path, "holdout")),
            narrow=_narrow(r, path, spec, parser),
            narrow_share=_narrow_share(r, path, spec),
            unavailable=_unavailable(spec),
        )
    return out


def _input_options(r: Reader, path: JsonPath, options: Mapping[str, Any]) -> set[str]:
    """Options whose value is an input (``paths: "{{ inputs.target }}"``): the whole value
    and nothing else, an input the template declares, put in when the observer runs. No
    other braces: an option is data for the parser, never a template."""
    out: set[str] = set()
    for key, value in options.items():
        if not isinstance(value, str) or "{{" not in value:
            continue
        m = INPUT_OPTION.match(value)
        where = (*path, "options", key)
        if m is None:
            r.problem(
                where, "an option may be `{{ inputs.NAME }}` as its whole value, nothing else"
            )
        elif m.group(1) not in r.input_names:
            known = sorted(r.input_names)
            hint = did_you_mean(m.group(1), known) or f" (inputs: {', '.join(known) or 'none'})"
            r.problem(where, f"option {key!r} names an unknown input '{m.group(1)}'{hint}")
        else:
            out.add(str(key))
    return out


def _unavailable(spec: Mapping[str, Any]) -> str | None:
    value = spec.get("unavailable")
    return value.strip() if isinstance(value, str) and value.strip() else None


def _narrow(r: Reader, path: JsonPath, spec: Mapping[str, Any], parser: object) -> tuple[str, ...]:
    """``narrow: [last_failing, ...]``: test node ids appended to a pytest command, so
    only an observer with a command whose report names its tests (junit) can be staged."""
    raw = spec.get("narrow")
    if raw is None:
        return ()
    where = (*path, "narrow")
    if not isinstance(raw, list) or not raw:
        r.problem(where, f"narrow must be a non-empty list of: {', '.join(NARROW_SOURCES)}")
        return ()
    out: list[str] = []
    for i, item in enumerate(raw):
        if item not in NARROW_SOURCES:
            hint = did_you_mean(str(item), list(NARROW_SOURCES)) or (
                f" (known: {', '.join(NARROW_SOURCES)})"
            )
            r.problem((*where, i), f"unknown narrow selection '{item}'{hint}")
        elif item not in out:
            out.append(item)
    if spec.get("run") is None or parser != "junit":
        r.problem(
            where,
            "narrow appends test node ids to the observer's command: it needs `run` "
            "(a pytest command) and `parser: junit`",
            key=True,
        )
    if spec.get("holdout") is not None:
        r.problem(
            where,
            "a held-out check always runs whole: narrow cannot be used with holdout",
            key=True,
        )
    return tuple(out)


def _narrow_share(r: Reader, path: JsonPath, spec: Mapping[str, Any]) -> float | None:
    """``narrow_share: 0.5``: the share of a whole run's time at which a tier run no longer
    pays, so the tiers are skipped; ``false``: the tiers always run."""
    if "narrow_share" not in spec:
        return NARROW_SHARE
    raw = spec["narrow_share"]
    where = (*path, "narrow_share")
    if raw is False:
        return None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not 0 < raw <= 1:
        return NARROW_SHARE  # the schema reports it
    if spec.get("narrow") is None:
        r.problem(where, "narrow_share needs `narrow` (a staged observer)", key=True)
    return float(raw)


def _holdout(r: Reader, path: JsonPath) -> HoldoutSpec | None:
    """``holdout: {from, to}`` or ``holdout: {variants, to}``: ``from`` may read the
    inputs (a path given with ``--set``); ``to`` is a plain relative path, checked here,
    never a glob."""
    raw = r.get(path, dict)
    if raw is None:
        return None
    variants = _variants(r, (*path, "variants")) if raw.get("variants") is not None else None
    source = None
    if raw.get("from") is not None:
        source = r.text((*path, "from"), HOLDOUT_SOURCE_NAMES, "a held-out source")
    dest = raw.get("to")
    if not isinstance(dest, str):
        return None  # the schema reports it
    why = holdout_dest_problem(dest)
    if why:
        r.problem((*path, "to"), why)
    if variants is not None and variants.beside and not why and "/" in dest.strip("/"):
        why = (
            f"{dest!r} must be one plain file name: with `variants.beside` it is the "
            "name the variants get beside the task's tests"
        )
        r.problem((*path, "to"), why)
    if (source is None and variants is None) or why:
        return None
    return HoldoutSpec(source=source, dest=dest.strip("/"), location=r.at(path), variants=variants)


def _variants(r: Reader, path: JsonPath) -> VariantsSpec | None:
    """``variants: {of, count, prompt, file, test_pattern}``: the holdout role's request,
    rendered with the task's new tests; ``file`` is one plain file name, where its answer
    is kept; ``test_pattern`` a regular expression (multiline) of a test's definition."""
    raw = r.get(path, dict)
    if raw is None:
        return None
    of = r.text((*path, "of"), HOLDOUT_SOURCE_NAMES, "the task the variants vary")
    count = r.text((*path, "count"), HOLDOUT_SOURCE_NAMES, "a held-out variant count")
    prompt = r.text((*path, "prompt"), VARIANT_PROMPT_NAMES, "the held-out variants' prompt")
    file = raw.get("file")
    if not isinstance(file, str):
        return None  # the schema reports it
    if "/" in file or holdout_dest_problem(file):
        r.problem((*path, "file"), f"{file!r} must be one plain file name")
        return None
    beside = raw.get("beside", False)
    if not isinstance(beside, bool):
        return None  # the schema reports it
    test_pattern = _test_pattern(r, (*path, "test_pattern"), raw.get("test_pattern"))
    if of is None or count is None or prompt is None or test_pattern is None:
        return None
    return VariantsSpec(
        of=of, count=count, prompt=prompt, file=file, test_pattern=test_pattern, beside=beside
    )


def _test_pattern(r: Reader, path: JsonPath, raw: object) -> re.Pattern[str] | None:
    """What a test looks like in the variants' language, compiled once with ``^``/``$``
    matching at each line; a pattern that also matches empty text would take any answer
    for tests."""
    if not isinstance(raw, str):
        return None  # the schema reports it
    try:
        pattern = re.compile(raw, re.MULTILINE)
    except re.error as exc:
        r.problem(path, f"invalid regular expression {raw!r}: {exc}")
        return None
    if pattern.search("") is not None:
        r.problem(path, f"{raw!r} matches empty text: it must match a test's definition")
        return None
    return pattern


def _stack(r: Reader, path: JsonPath, spec: Mapping[str, Any], run: object) -> str | None:
    """An observer's ``stack``: a stack is a pack, so the name must be one of
    ``observers/``; it runs the observer's command elsewhere, so there must be one."""
    value = spec.get("stack")
    if not isinstance(value, str):
        return None
    if builtin_template(f"observers/{value}") is None:
        known = sorted(
            p.stem for p in templates_dir().glob("observers/*.yaml") if p.stem != "stack"
        )
        r.problem(
            (*path, "stack"),
            f"unknown stack '{value}'{did_you_mean(value, known) or ''} (stacks: "
            f"{', '.join(known)})",
        )
        return None
    if run is None:
        r.problem(
            (*path, "stack"),
            f"stack: {value} runs the observer's command on a clean copy of the repository, "
            "but the observer has no `run`",
            key=True,
        )
    return value


def _pin_config(r: Reader, path: JsonPath, spec: Mapping[str, Any], run: object) -> str | None:
    """An observer's ``pin_config`` (the schema names the tools it knows): it pins
    what the observer's command runs with, so there must be a command."""
    value = spec.get("pin_config")
    if value is None:
        return None
    if run is None:
        r.problem(
            (*path, "pin_config"),
            f"pin_config: {value} pins the configuration of the observer's command, "
            "but the observer has no `run`",
            key=True,
        )
    return value if isinstance(value, str) else None
