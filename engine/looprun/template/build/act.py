"""``act``: the prompt, the built-in tools or an agent CLI (refused where the CLI cannot
enforce what the template declares), and the constraints every act step runs under.
"""

from __future__ import annotations

import re
from typing import Any

from looprun.template.agents import agent_refusals
from looprun.template.build.mcp import build_mcp, check_tool_name, check_tools
from looprun.template.build.reader import Reader
from looprun.template.model import (
    AGENT_CLIS,
    BUILTIN_TOOLS,
    ActSpec,
    AgentSpec,
    Constraints,
    ForbiddenPattern,
    PathRules,
)
from looprun.template.semantic import GOAL_NAMES
from looprun.template.yamlpos import JsonPath


def build_act(r: Reader, outer: bool) -> ActSpec | None:
    raw = r.get(("act",), dict)
    if outer:
        if raw:
            r.problem(
                ("act",),
                "an outer loop (each_task) does not act itself; its sub-loops do - remove `act`",
                key=True,
            )
        return None
    if raw is None or "prompt" not in raw:
        where: JsonPath = ("act",) if raw is not None else ()
        r.problem(where, "missing act.prompt: a loop needs a prompt for its act turns")
        return None
    prompt = r.text(("act", "prompt"), r.message_names, "the act prompt")
    system = r.text(("act", "system"), r.message_names, "the act system message")
    tools_raw = raw.get("tools")
    tools = BUILTIN_TOOLS
    mcp = build_mcp(r)
    if isinstance(tools_raw, list):
        tools = tuple(t for t in tools_raw if isinstance(t, str))
        check_tools(r, tools_raw)
    elif mcp and "agent" not in raw:
        r.problem(
            ("act", "mcp"),
            "MCP servers are declared, but act.tools is not given: list the tools the model "
            "may call, built-in and mcp__SERVER__TOOL (globs allowed)",
            key=True,
        )
    agent = _agent(r, raw, mcp)
    constraints = _constraints(r, tools if agent is None else ("run",))
    if prompt is None:
        return None
    return ActSpec(
        prompt=prompt,
        system=system,
        tools=tools if agent is None else (),
        max_steps=r.get(("act", "max_steps"), int, ActSpec.max_steps),
        constraints=constraints,
        agent=agent,
        mcp=mcp,
    )


def _agent(r: Reader, act: dict[str, Any], mcp: Any) -> AgentSpec | None:
    """``act.agent``: an agent CLI for the act turn, refused where the CLI cannot
    enforce what the template declares (see act/agents/support)."""
    raw = r.get(("act", "agent"), dict)
    if raw is None or raw.get("cli") not in AGENT_CLIS:
        return None  # absent, or the schema reports it
    path: JsonPath = ("act", "agent")
    for own in ("tools", "max_steps"):
        if own in act:
            r.problem(
                ("act", own),
                f"act.{own} belongs to the built-in tool loop; with act.agent the CLI "
                "acts (its tools: act.agent.allow_tools) - remove it (`"
                f"{own}: null` in a template that extends another)",
                key=True,
            )
    allow = tuple(t for t in raw.get("allow_tools") or [] if isinstance(t, str))
    for i, tool in enumerate(allow):
        check_tool_name(r, (*path, "allow_tools", i), tool, glob=True)
    if mcp and raw["cli"] != "claude-code":
        r.problem(
            ("act", "mcp"),
            f"MCP servers are passed through to claude-code only; {raw['cli']} would get "
            "none of them - remove act.mcp or use the built-in tool loop",
            key=True,
        )
    elif mcp and not any(t.startswith("mcp__") for t in allow):
        r.problem(
            ("act", "mcp"),
            "MCP servers are declared, but act.agent.allow_tools names none of their tools "
            "(mcp__SERVER__TOOL)",
            key=True,
        )
    commands = r.get(("act", "constraints", "commands", "allow"), list) or []
    per_tool = r.get(("limits", "per_tool"), dict) or {}
    for refusal in agent_refusals(
        raw["cli"],
        allow_tools=allow,
        commands=tuple(c for c in commands if isinstance(c, str)),
        per_tool=tuple(str(k) for k in per_tool),
        max_turns="max_turns" in raw,
        session=str(raw.get("session") or "fresh"),
    ):
        r.problem(refusal.where, refusal.message)
    timeout = r.duration((*path, "timeout"))
    model = raw.get("model")
    return AgentSpec(
        cli=raw["cli"],
        model=model if isinstance(model, str) else AgentSpec.model,
        max_turns=r.get((*path, "max_turns"), int),
        timeout_s=timeout if timeout is not None else AgentSpec.timeout_s,
        session="resume" if raw.get("session") == "resume" else "fresh",
        allow_tools=allow,
        location=r.doc.key_at(path),
        mcp=mcp if raw["cli"] == "claude-code" else {},
    )


def _constraints(r: Reader, tools: tuple[str, ...]) -> Constraints:
    base: JsonPath = ("act", "constraints")

    def strings(*path: str | int) -> tuple[str, ...] | None:
        value = r.get((*base, *path), list)
        return None if value is None else tuple(v for v in value if isinstance(v, str))

    commands = strings("commands", "allow") or ()
    if commands and "run" not in tools:
        r.problem((*base, "commands"), "command patterns given, but the `run` tool is not enabled")
    timeout = r.duration((*base, "command_timeout"))
    defaults = Constraints()
    return Constraints(
        paths=PathRules(
            allow=strings("paths", "allow") or defaults.paths.allow,
            deny=strings("paths", "deny") or (),
        ),
        commands=commands,
        max_diff_lines=r.get((*base, "max_diff_lines"), int),
        forbidden_patterns=_plain_patterns(r, (*base, "forbidden_patterns")),
        scoped_patterns=_scoped_patterns(r, (*base, "forbidden_patterns")),
        approve=strings("approve", "paths") or (),
        command_timeout_s=timeout if timeout is not None else defaults.command_timeout_s,
        max_output_bytes=r.get((*base, "max_output_bytes"), int, defaults.max_output_bytes),
        protect=r.protect((*base, "protect")),
    )


def _pattern_regex(r: Reader, path: JsonPath, pattern: str) -> re.Pattern[str] | None:
    """A forbidden pattern compiled once, here: ``re:...`` a regex, else a literal."""
    if not pattern.startswith("re:"):
        return re.compile(re.escape(pattern))
    try:
        return re.compile(pattern[3:])
    except re.error as exc:
        r.problem(path, f"invalid regular expression {pattern[3:]!r}: {exc}")
        return None


def _plain_patterns(r: Reader, path: JsonPath) -> tuple[str, ...]:
    """The string entries of ``forbidden_patterns``: checked in every file."""
    raw = r.get(path, list) or []
    found = []
    for i, entry in enumerate(raw):
        if isinstance(entry, str) and _pattern_regex(r, (*path, i), entry) is not None:
            found.append(entry)
    return tuple(found)


def _scoped_patterns(r: Reader, path: JsonPath) -> tuple[ForbiddenPattern, ...]:
    """The ``{pattern, paths, exclude, message}`` entries: checked in some files."""
    raw = r.get(path, list) or []
    found = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict):
            continue
        where: JsonPath = (*path, i)
        pattern = entry.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            continue  # the schema says what is missing
        regex = _pattern_regex(r, (*where, "pattern"), pattern)
        globs = {
            key: tuple(
                text
                for j in range(len(entry.get(key) or []))
                if (text := r.text((*where, key, j), GOAL_NAMES, "a pattern's glob")) is not None
            )
            for key in ("paths", "exclude")
        }
        if "paths" not in entry and "exclude" not in entry:
            r.problem(
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
                    r.doc.value_at(where),
                )
            )
    return tuple(found)
