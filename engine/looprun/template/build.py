"""Build typed Template objects from a composed document, checking what a schema cannot.

Every condition, prompt and message is compiled once here, and every name it reads is
checked against what will exist when it is evaluated (the checks themselves live in
``semantic``). The builder never stops at the first mistake: it records a located
Problem and carries on, so one run of ``looprun validate`` shows everything that is
wrong. It tolerates data the schema has already rejected (skipping what it cannot
check) and never raises on bad input.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from looprun.data.freeze import freeze
from looprun.errors import Location, Problem, TemplateError
from looprun.observe.registry import BUILTIN as BUILTIN_PARSERS
from looprun.observe.registry import option_problems, parser_names
from looprun.template import deps
from looprun.template.compile_cache import compiled_condition, compiled_text, syntax_line
from looprun.template.expressions import Condition, NameUse, Text
from looprun.template.holdout import dest_problem as holdout_dest_problem
from looprun.template.model import (
    ACTION_KINDS,
    AGENT_CLIS,
    BUILTIN_TOOLS,
    ENGINE_NAMES,
    Action,
    ActSpec,
    AgentSpec,
    Constraints,
    ContextSpec,
    EachTask,
    ForbiddenPattern,
    HoldoutSpec,
    InputSpec,
    Limits,
    ObserverSpec,
    PathRules,
    PlanSpec,
    Protect,
    Rule,
    SandboxSpec,
    TaskSpec,
    Template,
)
from looprun.template.numbers import resolve as resolve_numbers
from looprun.template.schema_check import dotted
from looprun.template.semantic import (
    CONDITION_ENGINE_NAMES,
    GOAL_NAMES,
    HOLDOUT_SOURCE_NAMES,
    INPUT_CHECKS,
    OBSERVER_COMMAND_NAMES,
    PLAN_PROMPT_NAMES,
    WITH_NAMES,
    RuleOrder,
    const_truth,
    dependency_problems,
    name_problems,
    subtree_problems,
)
from looprun.template.suggest import did_you_mean
from looprun.template.yamlpos import Document, JsonPath

ROLLBACK_TARGETS = ("last_green", "base", "previous")

_DURATION = re.compile(
    r"^\s*(?=\d)(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s)?\s*$"
)

SubLoader = Callable[[Path, Location], Template]


def parse_duration(value: Any) -> float | None:
    """Seconds from ``90``, ``"90s"``, ``"20m"``, ``"1h30m"``; None if not a duration."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if value > 0 else None
    if not isinstance(value, str):
        return None
    match = _DURATION.match(value)
    if not match or not any(match.groups()):
        return None
    h, m, s = (float(g) if g else 0.0 for g in match.groups())
    total = h * 3600 + m * 60 + s
    return total if total > 0 else None


class Builder:
    """Builds one Template from a composed Document, collecting every Problem."""

    def __init__(
        self,
        doc: Document,
        sub_loader: SubLoader | None = None,
        given: Mapping[str, Any] | None = None,
    ):
        self.doc = doc
        data: dict[str, Any] = doc.data if isinstance(doc.data, dict) else {}
        self.problems: list[Problem] = []
        # numbers that name an input are resolved first, so every section reads numbers
        self.data, refs, bad = resolve_numbers(data, given)
        self.input_numbers = {dotted(path): name for path, name in refs.items()}
        for path, message in bad:
            self.problem(path, message)
        self.rule_ids: dict[str, Location] = {}
        self.sub_loader = sub_loader
        observe = self.data.get("observe")
        self.observers: dict[str, Any] = observe if isinstance(observe, dict) else {}
        inputs = self.data.get("inputs")
        self.input_names: set[str] = set(inputs) if isinstance(inputs, dict) else set()
        self.input_names.add("intent")

    # -- helpers ---------------------------------------------------------------------

    def at(self, path: JsonPath) -> Location:
        return self.doc.value_at(path)

    def problem(self, path: JsonPath, message: str, *, key: bool = False) -> None:
        where = dotted(path)
        loc = self.doc.key_at(path) if key else self.doc.value_at(path)
        self.problems.append(Problem(loc, f"{where}: {message}" if where else message))

    def get(self, path: JsonPath, kind: type | tuple[type, ...], default: Any = None) -> Any:
        node: Any = self.data
        for part in path:
            if isinstance(part, int):
                if not isinstance(node, list) or part >= len(node):
                    return default
            elif not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        if kind is int and isinstance(node, bool):
            return default
        return node if isinstance(node, kind) else default

    def _check_names(
        self, use: NameUse, path: JsonPath, allowed: frozenset[str], what: str
    ) -> None:
        for message in name_problems(
            use, allowed, what, observers=self.observers, input_names=self.input_names
        ):
            self.problem(path, message)

    def condition(
        self, path: JsonPath, allowed: frozenset[str] | None = None, what: str = "a condition"
    ) -> Condition | None:
        value = self.get(path, (str, bool))
        if value is None:
            return None
        source = ("true" if value else "false") if isinstance(value, bool) else value
        try:
            cond = compiled_condition(source, self.at(path))
        except TemplateError as exc:
            self.problems.extend(
                Problem(p.location, f"{dotted(path)}: {p.message}") for p in exc.problems
            )
            return None
        allowed = allowed if allowed is not None else self.condition_names
        self._check_names(cond.use, path, allowed, what)
        return cond

    def text(
        self, path: JsonPath, allowed: frozenset[str], what: str, *, shell: bool = False
    ) -> Text | None:
        value = self.get(path, (str, int, float))
        if value is None or isinstance(value, bool):
            return None
        source = str(value)
        try:
            text = compiled_text(source, shell, self.at(path))
        except TemplateError as exc:
            line = syntax_line(source)
            loc = self.doc.text_line(path, line)
            self.problems.extend(Problem(loc, f"{dotted(path)}: {p.message}") for p in exc.problems)
            return None
        self._check_names(text.use, path, allowed, what)
        return text

    def _no_claims(self, cond: Condition | None, path: JsonPath) -> None:
        """An agent's report is a claim: it may steer refine rules, never decide done."""
        if cond is not None and "agent" in cond.use.names:
            self.problem(
                path,
                "agent.* is what the agent CLI reported - a claim, not a check; done is "
                "decided by observers (tests, diff, ...): use agent facts in refine rules",
            )

    @property
    def condition_names(self) -> frozenset[str]:
        return frozenset(CONDITION_ENGINE_NAMES | set(self.observers))

    @property
    def message_names(self) -> frozenset[str]:
        return frozenset(ENGINE_NAMES | set(self.observers))

    def duration(self, path: JsonPath) -> float | None:
        value = self.get(path, (str, int, float))
        if value is None:
            return None
        seconds = parse_duration(value)
        if seconds is None and not isinstance(value, bool):
            return None  # the schema reports it
        return seconds

    def pin_config(self, path: JsonPath, spec: Mapping[str, Any], run: object) -> str | None:
        """An observer's ``pin_config`` (the schema names the tools it knows): it pins
        what the observer's command runs with, so there must be a command."""
        value = spec.get("pin_config")
        if value is None:
            return None
        if run is None:
            self.problem(
                (*path, "pin_config"),
                f"pin_config: {value} pins the configuration of the observer's command, "
                "but the observer has no `run`",
                key=True,
            )
        return value if isinstance(value, str) else None

    # -- sections --------------------------------------------------------------------

    def build(self) -> Template | None:
        data = self.data
        inputs = self.inputs()
        models = {
            k: v for k, v in (self.get(("models",), dict) or {}).items() if isinstance(v, str)
        }
        observe = self.observe()
        plan = self.plan()
        outer = "each_task" in data
        each_task = self.each_task(plan)
        act = self.act(outer)
        exit_ = self.exit(plan, outer)
        refine = self.refine()
        limits = self.limits()
        context = ContextSpec(
            budget_tokens=self.get(("context", "budget_tokens"), int, ContextSpec.budget_tokens),
            recent_rounds=self.get(("context", "recent_rounds"), int, ContextSpec.recent_rounds),
        )
        sandbox = self.sandbox()
        if self.problems:
            return None
        return Template(
            name=str(data.get("name", "")),
            source=str(self.doc.path),
            description=str(data.get("description", "") or ""),
            inputs=freeze(inputs),
            models=freeze(models),
            plan=plan,
            act=act,
            observe=freeze(observe),
            exit=tuple(exit_),
            refine=tuple(refine),
            limits=limits,
            context=context,
            each_task=each_task,
            sandbox=sandbox,
            resolved=freeze(_canonical_order(data)),
            input_numbers=freeze(self.input_numbers),
        )

    def inputs(self) -> dict[str, InputSpec]:
        out: dict[str, InputSpec] = {}
        for name, spec in (self.get(("inputs",), dict) or {}).items():
            if not isinstance(spec, dict):
                continue
            path: JsonPath = ("inputs", name)
            kind = spec.get("type", "string")
            if kind not in INPUT_CHECKS:
                continue
            default = spec.get("default")
            required = spec.get("required") is True
            if "default" in spec and default is not None and not INPUT_CHECKS[kind](default):
                self.problem((*path, "default"), f"default {default!r} is not of type {kind}")
            if required and default is not None:
                self.problem((*path, "required"), "a required input cannot have a default")
            out[name] = InputSpec(
                name=name,
                type=kind,
                required=required,
                default=freeze(default),
                description=str(spec.get("description", "")),
                location=self.doc.key_at(path),
            )
        return out

    def observe(self) -> dict[str, ObserverSpec]:
        out: dict[str, ObserverSpec] = {}
        known_parsers = parser_names()
        earlier: set[str] = set()
        for name, spec in self.observers.items():
            path: JsonPath = ("observe", name)
            if name in ENGINE_NAMES:
                self.problem(
                    path, f"observer name '{name}' is taken by an engine variable", key=True
                )
            if not isinstance(spec, dict):
                continue
            parser = spec.get("parser")
            if isinstance(parser, str) and parser not in BUILTIN_PARSERS:
                deps.volatile()  # a plugin's parser: valid only while it is installed
            if isinstance(parser, str) and parser not in known_parsers:
                hint = (
                    did_you_mean(parser, known_parsers) or f" (known: {', '.join(known_parsers)})"
                )
                self.problem((*path, "parser"), f"unknown parser '{parser}'{hint}")
            if (
                isinstance(parser, str)
                and parser not in ("git_diff",)
                and not (spec.get("run") or spec.get("file"))
            ):
                self.problem(
                    path, f"parser '{parser}' needs `run` (a command) or `file` (a report)"
                )
            run = self.text(
                (*path, "run"), OBSERVER_COMMAND_NAMES, "an observer command", shell=True
            )
            file = self.text((*path, "file"), OBSERVER_COMMAND_NAMES, "an observer file")
            when_allowed = frozenset(CONDITION_ENGINE_NAMES | earlier)
            when = None
            if "when" in spec:
                when = self.condition(
                    (*path, "when"), when_allowed, "`when` (earlier observers only)"
                )
            earlier.add(name)
            timeout = self.duration((*path, "timeout"))
            options = spec.get("options") if isinstance(spec.get("options"), dict) else {}
            if isinstance(parser, str):
                for key, message, bad_name in option_problems(parser, options):
                    self.problem((*path, "options", key), message, key=bad_name)
            out[name] = ObserverSpec(
                name=name,
                parser=parser if isinstance(parser, str) else "",
                run=run,
                file=file,
                timeout_s=timeout if timeout is not None else ObserverSpec.timeout_s,
                when=when,
                options=freeze(options),
                location=self.doc.key_at(path),
                cannot_run_exit=tuple(
                    c
                    for c in spec.get("cannot_run_exit") or ()
                    if isinstance(c, int) and not isinstance(c, bool)
                ),
                pin_config=self.pin_config(path, spec, run),
                holdout=self.holdout((*path, "holdout")),
            )
        return out

    def holdout(self, path: JsonPath) -> HoldoutSpec | None:
        """``holdout: {from, to}``: ``from`` may read the inputs (a path given with
        ``--set``); ``to`` is a plain relative path, checked here, never a glob."""
        raw = self.get(path, dict)
        if raw is None:
            return None
        source = self.text((*path, "from"), HOLDOUT_SOURCE_NAMES, "a held-out source")
        dest = raw.get("to")
        if not isinstance(dest, str):
            return None  # the schema reports it
        why = holdout_dest_problem(dest)
        if why:
            self.problem((*path, "to"), why)
        if source is None or why:
            return None
        return HoldoutSpec(source=source, dest=dest.strip("/"), location=self.at(path))

    def plan(self) -> PlanSpec:
        raw = self.get(("plan",), dict) or {}
        tasks_raw = raw.get("tasks") if isinstance(raw.get("tasks"), list) else None
        mode = raw.get("mode") or ("static" if tasks_raw else "none")
        if mode not in ("none", "static", "model"):
            mode = "none"
        if mode == "static" and not tasks_raw and "tasks" not in raw:
            self.problem(("plan", "mode"), "plan.mode static needs a list of tasks")
        if mode != "static" and "tasks" in raw:
            self.problem(
                ("plan", "tasks"),
                f"tasks are only listed with plan.mode static (this plan's mode is {mode})",
                key=True,
            )
        if mode != "model":
            if "prompt" in raw:
                self.problem(
                    ("plan", "prompt"), "a plan prompt is only used with plan.mode model", key=True
                )
            if "max_tasks" in raw:
                self.problem(
                    ("plan", "max_tasks"), "max_tasks only applies to plan.mode model", key=True
                )
        tasks = self.tasks(tasks_raw or []) if mode == "static" else []
        prompt = None
        if mode == "model":
            prompt = self.text(("plan", "prompt"), PLAN_PROMPT_NAMES, "the plan prompt")
        return PlanSpec(
            mode=mode,
            tasks=tuple(tasks),
            prompt=prompt,
            max_tasks=self.get(("plan", "max_tasks"), int, PlanSpec.max_tasks),
        )

    def tasks(self, raw: list[Any]) -> list[TaskSpec]:
        out: list[TaskSpec] = []
        seen: dict[str, Location] = {}
        for i, task in enumerate(raw):
            path: JsonPath = ("plan", "tasks", i)
            if not isinstance(task, dict) or not isinstance(task.get("id"), str):
                continue
            tid = task["id"]
            if tid in seen:
                self.problem(
                    (*path, "id"), f"duplicate task id '{tid}' (first at line {seen[tid].line})"
                )
                continue
            seen[tid] = self.at((*path, "id"))
            goal = self.text((*path, "goal"), GOAL_NAMES, "a task goal")
            done = self.condition((*path, "done_when")) if "done_when" in task else None
            self._no_claims(done, (*path, "done_when"))
            deps = [d for d in task.get("depends_on") or [] if isinstance(d, str)]
            paths_ = [p for p in task.get("paths") or [] if isinstance(p, str)]
            protect = self.protect((*path, "protect"))
            if goal is not None:
                out.append(
                    TaskSpec(tid, goal, done, tuple(paths_), tuple(deps), self.at(path), protect)
                )
        for dpath, message in dependency_problems(raw, out, seen):
            self.problem(dpath, message)
        return out

    def protect(self, path: JsonPath) -> Protect:
        """``protect``: a list of globs, or ``{paths: [...], doctests: true, allow_new: [...]}``."""
        raw = self.get(path, (list, dict))
        if raw is None:
            return Protect()
        if isinstance(raw, list):
            return Protect(self._globs(path, raw, "a protected path"))
        return Protect(
            self._globs((*path, "paths"), raw.get("paths"), "a protected path"),
            raw.get("doctests") is True,
            self._globs((*path, "allow_new"), raw.get("allow_new"), "a path new files may take"),
        )

    def _globs(self, path: JsonPath, globs: Any, what: str) -> tuple[Text, ...]:
        """A list of globs that may use ``intent`` and ``inputs``, as messages."""
        texts = []
        for i in range(len(globs) if isinstance(globs, list) else 0):
            text = self.text((*path, i), GOAL_NAMES, what)
            if text is not None:
                texts.append(text)
        return tuple(texts)

    def act(self, outer: bool) -> ActSpec | None:
        raw = self.get(("act",), dict)
        if outer:
            if raw:
                self.problem(
                    ("act",),
                    "an outer loop (each_task) does not act itself; "
                    "its sub-loops do - remove `act`",
                    key=True,
                )
            return None
        if raw is None or "prompt" not in raw:
            where: JsonPath = ("act",) if raw is not None else ()
            self.problem(where, "missing act.prompt: a loop needs a prompt for its act turns")
            return None
        prompt = self.text(("act", "prompt"), self.message_names, "the act prompt")
        system = self.text(("act", "system"), self.message_names, "the act system message")
        tools_raw = raw.get("tools")
        tools = BUILTIN_TOOLS
        if isinstance(tools_raw, list):
            tools = tuple(t for t in tools_raw if isinstance(t, str))
            for i, tool in enumerate(tools_raw):
                if isinstance(tool, str) and tool not in BUILTIN_TOOLS:
                    hint = (
                        did_you_mean(tool, BUILTIN_TOOLS) or f" (tools: {', '.join(BUILTIN_TOOLS)})"
                    )
                    self.problem(("act", "tools", i), f"unknown tool '{tool}'{hint}")
        agent = self.agent(raw)
        constraints = self.constraints(tools if agent is None else ("run",))
        if prompt is None:
            return None
        return ActSpec(
            prompt=prompt,
            system=system,
            tools=tools if agent is None else (),
            max_steps=self.get(("act", "max_steps"), int, ActSpec.max_steps),
            constraints=constraints,
            agent=agent,
        )

    def agent(self, act: dict[str, Any]) -> AgentSpec | None:
        """``act.agent``: an agent CLI for the act turn, refused where the CLI cannot
        enforce what the template declares (see act/agents/support)."""
        from looprun.template.agents import agent_refusals

        raw = self.get(("act", "agent"), dict)
        if raw is None or raw.get("cli") not in AGENT_CLIS:
            return None  # absent, or the schema reports it
        path: JsonPath = ("act", "agent")
        for own in ("tools", "max_steps"):
            if own in act:
                self.problem(
                    ("act", own),
                    f"act.{own} belongs to the built-in tool loop; with act.agent the CLI "
                    "acts (its tools: act.agent.allow_tools) - remove it (`"
                    f"{own}: null` in a template that extends another)",
                    key=True,
                )
        allow = tuple(t for t in raw.get("allow_tools") or [] if isinstance(t, str))
        commands = self.get(("act", "constraints", "commands", "allow"), list) or []
        per_tool = self.get(("limits", "per_tool"), dict) or {}
        for refusal in agent_refusals(
            raw["cli"],
            allow_tools=allow,
            commands=tuple(c for c in commands if isinstance(c, str)),
            per_tool=tuple(str(k) for k in per_tool),
            max_turns="max_turns" in raw,
            session=str(raw.get("session") or "fresh"),
        ):
            self.problem(refusal.where, refusal.message)
        timeout = self.duration((*path, "timeout"))
        model = raw.get("model")
        return AgentSpec(
            cli=raw["cli"],
            model=model if isinstance(model, str) else AgentSpec.model,
            max_turns=self.get((*path, "max_turns"), int),
            timeout_s=timeout if timeout is not None else AgentSpec.timeout_s,
            session="resume" if raw.get("session") == "resume" else "fresh",
            allow_tools=allow,
            location=self.doc.key_at(path),
        )

    def constraints(self, tools: tuple[str, ...]) -> Constraints:
        base: JsonPath = ("act", "constraints")

        def strings(*path: str | int) -> tuple[str, ...] | None:
            value = self.get((*base, *path), list)
            return None if value is None else tuple(v for v in value if isinstance(v, str))

        commands = strings("commands", "allow") or ()
        if commands and "run" not in tools:
            self.problem(
                (*base, "commands"), "command patterns given, but the `run` tool is not enabled"
            )
        timeout = self.duration((*base, "command_timeout"))
        defaults = Constraints()
        return Constraints(
            paths=PathRules(
                allow=strings("paths", "allow") or defaults.paths.allow,
                deny=strings("paths", "deny") or (),
            ),
            commands=commands,
            max_diff_lines=self.get((*base, "max_diff_lines"), int),
            forbidden_patterns=self.plain_patterns((*base, "forbidden_patterns")),
            scoped_patterns=self.scoped_patterns((*base, "forbidden_patterns")),
            approve=strings("approve", "paths") or (),
            command_timeout_s=timeout if timeout is not None else defaults.command_timeout_s,
            max_output_bytes=self.get((*base, "max_output_bytes"), int, defaults.max_output_bytes),
            protect=self.protect((*base, "protect")),
        )

    def pattern_regex(self, path: JsonPath, pattern: str) -> re.Pattern[str] | None:
        """A forbidden pattern compiled once, here: ``re:...`` a regex, else a literal."""
        if not pattern.startswith("re:"):
            return re.compile(re.escape(pattern))
        try:
            return re.compile(pattern[3:])
        except re.error as exc:
            self.problem(path, f"invalid regular expression {pattern[3:]!r}: {exc}")
            return None

    def plain_patterns(self, path: JsonPath) -> tuple[str, ...]:
        """The string entries of ``forbidden_patterns``: checked in every file."""
        raw = self.get(path, list) or []
        found = []
        for i, entry in enumerate(raw):
            if isinstance(entry, str) and self.pattern_regex((*path, i), entry) is not None:
                found.append(entry)
        return tuple(found)

    def scoped_patterns(self, path: JsonPath) -> tuple[ForbiddenPattern, ...]:
        """The ``{pattern, paths, exclude, message}`` entries: checked in some files."""
        raw = self.get(path, list) or []
        found = []
        for i, entry in enumerate(raw):
            if not isinstance(entry, dict):
                continue
            where: JsonPath = (*path, i)
            pattern = entry.get("pattern")
            if not isinstance(pattern, str) or not pattern:
                continue  # the schema says what is missing
            regex = self.pattern_regex((*where, "pattern"), pattern)
            globs = {
                key: tuple(
                    text
                    for j in range(len(entry.get(key) or []))
                    if (text := self.text((*where, key, j), GOAL_NAMES, "a pattern's glob"))
                    is not None
                )
                for key in ("paths", "exclude")
            }
            if "paths" not in entry and "exclude" not in entry:
                self.problem(
                    where,
                    "a scoped forbidden pattern needs `paths` or `exclude` "
                    "(for every file, write the pattern as a plain string)",
                )
            message = entry.get("message")
            if regex is not None:
                found.append(
                    ForbiddenPattern(
                        pattern,
                        regex,
                        globs["paths"],
                        globs["exclude"],
                        message if isinstance(message, str) else "",
                        self.doc.value_at(where),
                    )
                )
        return tuple(found)

    def exit(self, plan: PlanSpec, outer: bool) -> list[Condition]:
        raw = self.get(("exit",), list)
        out = []
        for i in range(len(raw or [])):
            cond = self.condition(("exit", i), what="an exit condition")
            if cond is None:
                continue
            self._no_claims(cond, ("exit", i))
            if const_truth(cond) is False:
                self.problem(("exit", i), "this exit condition can never hold")
            out.append(cond)
        checked_tasks = plan.mode == "model" or (
            plan.mode == "static" and plan.tasks and all(t.done_when for t in plan.tasks)
        )
        if raw is not None and not raw and not checked_tasks:
            self.problem(("exit",), "no exit conditions: the loop could never finish successfully")
        elif raw is None and not checked_tasks and not self.problems:
            self.problems.append(
                Problem(
                    self.doc.start,
                    "missing `exit`: a loop needs exit conditions (done is a check, not a claim)",
                )
            )
        return out

    def refine(self) -> list[Rule]:
        raw = self.get(("refine",), list)
        if raw is None:
            return []
        return self.rules(raw, ("refine",), top=True)

    def rules(self, raw: list[Any], path: JsonPath, *, top: bool) -> list[Rule]:
        out: list[Rule] = []
        order = RuleOrder()
        for i, rule in enumerate(raw):
            rpath = (*path, i)
            if not isinstance(rule, dict):
                continue
            line = self.at(rpath).line
            unreachable = order.unreachable()
            if unreachable is not None:
                self.problem(rpath, unreachable)
            built = self.rule(rule, rpath)
            if built is None:
                continue
            out.append(built)
            if_path: JsonPath = (*rpath, "if")
            for message in order.add(built, line, lambda p=if_path: self.at(p).line):
                self.problem(if_path, message)
        for message in subtree_problems(raw, top=top):
            self.problem(path, message)
        return out

    def rule(self, raw: dict[str, Any], path: JsonPath) -> Rule | None:
        has_if, has_then, has_else = "if" in raw, "then" in raw, "else" in raw
        if has_else and (has_if or has_then):
            self.problem(path, "a rule is either `if`/`then` or `else`, not both")
            return None
        if has_if and not has_then:
            self.problem(path, "rule has `if` but no `then` (an action or a list of rules)")
            return None
        if has_then and not has_if:
            self.problem(path, "rule has `then` but no `if`; use `else` for an unconditional rule")
            return None
        if not (has_if or has_else):
            return None
        key = "then" if has_then else "else"
        rid = self.rule_id(raw, path)
        cond = self.condition((*path, "if"), what="a refine condition") if has_if else None
        body = raw[key]
        why = " ".join(str(raw.get("description") or "").split())
        if isinstance(body, list):
            children = self.rules(body, (*path, key), top=False)
            if has_if and cond is None:
                return None
            return Rule(cond, None, tuple(children), self.at(path), why, rid)
        action = self.action(body, (*path, key))
        if action is None or (has_if and cond is None):
            return None
        return Rule(cond, action, (), self.at(path), why, rid)

    def rule_id(self, raw: dict[str, Any], path: JsonPath) -> str:
        """The rule's explicit id, checked unique across the whole tree."""
        rid = raw.get("id")
        if not isinstance(rid, str):
            return ""
        first = self.rule_ids.get(rid)
        if first is not None:
            self.problem((*path, "id"), f"rule id '{rid}' is used twice (first at {first})")
        else:
            self.rule_ids[rid] = self.at((*path, "id"))
        return rid

    def action(self, raw: Any, path: JsonPath) -> Action | None:
        loc = self.at(path)
        if isinstance(raw, str):
            if raw not in ACTION_KINDS:
                return None  # the schema reports it
            target = "last_green" if raw == "rollback" else None
            return Action(raw, None, target, loc)  # type: ignore[arg-type]
        if not isinstance(raw, dict):
            return None
        kinds = [k for k in raw if k in ACTION_KINDS]
        if len(kinds) != 1:
            if not kinds:
                self.problem(path, f"no action: give one of {', '.join(ACTION_KINDS)}")
            else:
                self.problem(path, f"one action per rule, got {len(kinds)}: {', '.join(kinds)}")
            return None
        kind = kinds[0]
        value = raw[kind]
        target = None
        message_path: JsonPath | None = None
        if kind == "rollback":
            target = value if value in ROLLBACK_TARGETS else "last_green"
        elif value is not None:
            message_path = (*path, kind)
        if "feedback" in raw:
            if message_path is not None:
                self.problem(
                    (*path, "feedback"),
                    f"give the message once: as the `{kind}` value or as `feedback`",
                )
                return None
            message_path = (*path, "feedback")
        message = None
        if message_path is not None:
            message = self.text(message_path, self.message_names, "a refine message")
            if message is None:
                return None
        return Action(kind, message, target, loc)  # type: ignore[arg-type]

    def limits(self) -> Limits:
        per_tool_raw = self.get(("limits", "per_tool"), dict) or {}
        per_tool = {}
        for tool, n in per_tool_raw.items():
            if tool not in BUILTIN_TOOLS:
                hint = did_you_mean(tool, BUILTIN_TOOLS) or f" (tools: {', '.join(BUILTIN_TOOLS)})"
                self.problem(("limits", "per_tool", tool), f"unknown tool '{tool}'{hint}", key=True)
            elif isinstance(n, int) and not isinstance(n, bool):
                per_tool[tool] = n
        cost = self.get(("limits", "max_cost_usd"), (int, float))
        return Limits(
            max_iterations=self.get(("limits", "max_iterations"), int, Limits.max_iterations),
            max_tokens=self.get(("limits", "max_tokens"), int),
            timeout_s=self.duration(("limits", "timeout")),
            max_cost_usd=float(cost) if cost is not None and not isinstance(cost, bool) else None,
            per_tool=freeze(per_tool),
            max_repeats=(
                None
                if self.get(("limits", "max_repeats"), bool) is False
                else self.get(("limits", "max_repeats"), int, Limits.max_repeats)
            ),
        )

    def sandbox(self) -> SandboxSpec:
        """``sandbox: auto`` is short for ``sandbox: {mode: auto}``; YAML reads a bare
        ``off`` as false, which means the same. The schema checks the values."""
        short = self.get(("sandbox",), (str, bool))
        if short is False or short in ("auto", "required", "off"):
            return SandboxSpec(mode="off" if short is False else short)
        mode = self.get(("sandbox", "mode"), (str, bool), SandboxSpec.mode)
        mode = "off" if mode is False else mode
        network = self.get(("sandbox", "network"), bool, SandboxSpec.network)
        hide: list[str] = []
        for i, path in enumerate(self.get(("sandbox", "hide"), list, [])):
            if not isinstance(path, str):
                continue  # the schema reports it
            if path == "~" or path.startswith(("/", "~/")):
                hide.append(path)
            else:
                self.problem(
                    ("sandbox", "hide", i),
                    f"{path!r} is neither absolute nor under ~/ (the workdir is the "
                    "model's to read; name paths outside it)",
                )
        return SandboxSpec(
            mode=mode if mode in ("auto", "required", "off") else "auto",
            network=network,
            hide=tuple(hide),
        )

    def each_task(self, plan: PlanSpec) -> EachTask | None:
        raw = self.get(("each_task",), dict)
        if raw is None or not isinstance(raw.get("uses"), str):
            return None
        path: JsonPath = ("each_task",)
        if plan.mode == "none":
            self.problem(path, "each_task needs tasks: set plan.mode to static or model", key=True)
        isolation = raw.get("isolation", "worktree")
        parallel = self.get((*path, "parallel"), int, 1)
        if isolation == "none" and parallel > 1:
            self.problem((*path, "parallel"), "parallel sub-loops need isolation: worktree")
        with_: dict[str, Text] = {}
        for key in (raw.get("with") or {}) if isinstance(raw.get("with"), dict) else {}:
            text = self.text((*path, "with", key), WITH_NAMES, "each_task.with")
            if text is not None:
                with_[key] = text
        uses = raw["uses"]
        sub = self._load_sub(uses, (*path, "uses"))
        if sub is None:
            return None
        known = set(sub.inputs) | {"intent"}
        for key in with_:
            if key not in known:
                self.problem(
                    (*path, "with", key),
                    f"template '{sub.name}' has no input '{key}'{did_you_mean(key, known)}",
                    key=True,
                )
        for name, spec in sub.inputs.items():
            if spec.required and name not in with_:
                self.problem(
                    (*path, "with"),
                    f"template '{sub.name}' requires input '{name}'; give it in each_task.with",
                )
        return EachTask(
            uses=uses,
            template=sub,
            with_=freeze(with_),
            isolation=isolation if isolation in ("worktree", "none") else "worktree",
            parallel=parallel,
            location=self.doc.key_at(path),
        )

    def _load_sub(self, ref: str, path: JsonPath) -> Template | None:
        if self.sub_loader is None:
            return None
        from looprun.template.compose import missing_ref_message, resolve_ref

        loc = self.at(path)
        target = resolve_ref(ref, Path(loc.file).parent)
        if target is None or target.is_dir():
            self.problem(path, missing_ref_message(ref))
            return None
        try:
            return self.sub_loader(target, loc)
        except TemplateError as exc:
            self.problems.extend(exc.problems)
            return None


def _canonical_order(data: dict[str, Any]) -> dict[str, Any]:
    """Top-level keys in the schema's order, whatever order composition merged them in."""
    from looprun.template.schema_check import template_schema

    order = list(template_schema()["properties"])
    known = {k: data[k] for k in order if k in data}
    return {**known, **{k: v for k, v in data.items() if k not in known}}
