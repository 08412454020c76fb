"""Explain a loaded template: a text summary, a Mermaid flowchart, or the resolved JSON.

Reviewers read templates in pull requests; this renders what the engine will actually do
after composition - the refine tree as a decision list or a flowchart, sub-loops included.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from looprun.data.freeze import thaw
from looprun.template.model import Action, Rule, Template

_SOURCE_WIDTH = 72
_FULL = 10_000  # conditions are drawn whole: a cut condition reads as a different one


def _one_line(text: str, width: int = _SOURCE_WIDTH) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "none"
    total = int(seconds)
    h, rest = divmod(total, 3600)
    m, s = divmod(rest, 60)
    parts = [f"{h}h" if h else "", f"{m}m" if m else "", f"{s}s" if s else ""]
    return "".join(parts) or f"{seconds}s"


def describe_action(action: Action) -> str:
    head = action.kind
    if action.kind == "rollback":
        head = f"rollback to {action.target or 'last_green'}, then retry"
    elif action.kind == "replan":
        head = "replan"
    if action.message is not None:
        return f'{head}: "{_one_line(action.message.source, 60)}"'
    return head


# -- text ---------------------------------------------------------------------------------


def explain_text(template: Template, indent: str = "") -> str:
    out: list[str] = []
    add = out.append
    add(f"{indent}{template.name} - {_one_line(template.description) or '(no description)'}")
    add(f"{indent}  source: {template.source}")
    if template.inputs:
        add(f"{indent}inputs:")
        for spec in template.inputs.values():
            bits = [spec.type]
            if spec.required:
                bits.append("required")
            elif spec.default is not None:
                bits.append(f"default {json.dumps(thaw(spec.default))}")
            desc = f" - {_one_line(spec.description, 60)}" if spec.description else ""
            add(f"{indent}  {spec.name} ({', '.join(bits)}){desc}")
    if template.models:
        add(f"{indent}models: " + ", ".join(f"{k}={v}" for k, v in template.models.items()))
    plan = template.plan
    add(
        f"{indent}plan: {plan.mode}"
        + (f" (at most {plan.max_tasks} tasks)" if plan.mode == "model" else "")
    )
    for i, task in enumerate(plan.tasks, 1):
        after = f" (after {', '.join(task.depends_on)})" if task.depends_on else ""
        goal = [ln.rstrip() for ln in task.goal.source.strip().splitlines()] or [""]
        add(f"{indent}  {i}. {task.id}{after}: {goal[0]}")
        out.extend(f"{indent}     {ln}".rstrip() for ln in goal[1:])  # goals are never cut
        if task.done_when is not None:
            add(f"{indent}     done when: {' '.join(task.done_when.source.split())}")
    if template.act is not None:
        act, c = template.act, template.act.constraints
        if act.agent is not None:
            a = act.agent
            add(
                f"{indent}act: agent CLI {a.cli} (model {a.model}, session {a.session}, "
                f"timeout {a.timeout_s:g} s"
                + (f", max {a.max_turns} turns" if a.max_turns else "")
                + f"); tools: {', '.join(a.allow_tools) or 'its defaults'}"
            )
        else:
            add(
                f"{indent}act: up to {act.max_steps} tool calls per turn; "
                f"tools: {', '.join(act.tools)}"
                + (
                    " (flag_for_human ends the run escalated, with the model's reason)"
                    if "flag_for_human" in act.tools
                    else ""
                )
            )
        for name, server in act.mcp.items():
            where = server.url or " ".join(server.command)
            allowed = [t for t in act.tools if t.startswith(f"mcp__{name}__")]
            add(f"{indent}  mcp server {name}: {where}; tools: {', '.join(allowed) or 'none'}")
            for tool, args in {**server.paths, **server.write_paths}.items():
                add(f"{indent}    {tool}: path arguments {', '.join(args)}")
        add(
            f"{indent}  paths: allow {', '.join(c.paths.allow)}"
            + (f"; deny {', '.join(c.paths.deny)}" if c.paths.deny else "")
        )
        if c.commands:
            add(f"{indent}  commands: {', '.join(c.commands)}")
        if c.max_diff_lines:
            add(f"{indent}  max diff lines: {c.max_diff_lines}")
        if c.forbidden_patterns:
            add(f"{indent}  forbidden: {', '.join(c.forbidden_patterns)}")
        for sp in c.scoped_patterns:
            where = f"in {', '.join(t.source for t in sp.paths) or 'every file'}"
            if sp.exclude:
                where += f" except {', '.join(t.source for t in sp.exclude)}"
            add(f"{indent}  forbidden {where}: {sp.pattern}")
        if c.approve:
            add(f"{indent}  needs approval: {', '.join(c.approve)}")
    if template.each_task is not None:
        each = template.each_task
        add(
            f"{indent}each task runs: {each.uses} (isolation {each.isolation}, "
            f"up to {each.parallel} at once)"
        )
        for key, text in each.with_.items():
            add(f"{indent}  with {key} = {_one_line(text.source, 60)}")
    if template.observe:
        add(
            f"{indent}observe (after every "
            f"{'round of sub-loops' if template.each_task else 'act turn'}):"
        )
        for obs in template.observe.values():
            line = f"{indent}  {obs.name}: {obs.parser}"
            if obs.run is not None:
                line += f" <- {_one_line(obs.run.source, 60)}"
            if obs.when is not None:
                line += f" [when {obs.when.source}]"
            add(line)
            if obs.unavailable:
                add(f"{indent}    unavailable, a run stops before it starts: {obs.unavailable}")
            if obs.narrow:
                first = [n for n in obs.narrow if n != "related_tests"]
                tiers = [" + ".join(first)] if first else []
                tiers += ["related_tests"] if "related_tests" in obs.narrow else []
                pays = (
                    "always"
                    if obs.narrow_share is None
                    else f"unless the last took at least {obs.narrow_share:g} of the last "
                    "whole run's time"
                )
                add(
                    f"{indent}    staged: first {', then '.join(tiers)}, the whole command "
                    f"when that passes (done only on a whole run); the tiers run {pays}"
                )
    add(f"{indent}exit (all must hold on fresh observations):")
    for cond in template.exit:
        add(f"{indent}  - {cond.source}")
    for task in plan.tasks:
        if task.done_when is not None:
            add(f"{indent}  - task {task.id}: {task.done_when.source}")
    add(f"{indent}refine (first matching rule decides):")
    out.extend(_rule_lines(template.refine, indent + "  ", ""))
    if not template.refine or template.refine[-1].condition is not None:
        add(f"{indent}  otherwise: retry with the observers' feedback")
    add(f"{indent}  (a retry also carries the feedback of each failing observer it does not name)")
    lim = template.limits
    caps = [f"max_iterations {lim.max_iterations}"]
    if lim.max_tokens:
        caps.append(f"max_tokens {lim.max_tokens}")
    if lim.timeout_s:
        caps.append(f"timeout {_duration(lim.timeout_s)}")
    if lim.max_cost_usd:
        caps.append(f"max_cost_usd {lim.max_cost_usd}")
    if lim.max_repeats:
        caps.append(f"max_repeats {lim.max_repeats}")
    caps += [f"{tool} calls {n}" for tool, n in lim.per_tool.items()]
    add(f"{indent}limits: {', '.join(caps)}")
    if template.each_task is not None:
        add(f"{indent}sub-loop ({template.each_task.uses}):")
        add(explain_text(template.each_task.template, indent + "  |  "))
    return "\n".join(out)


def _rule_lines(rules: Iterable[Rule], indent: str, prefix: str) -> list[str]:
    lines: list[str] = []
    for i, rule in enumerate(rules, 1):
        number = f"{prefix}{i}. [{rule.name}]"
        head = f"if {rule.condition.source}" if rule.condition is not None else "else"
        if rule.description:
            lines.append(f"{indent}# {rule.description}")
        if rule.action is not None:
            lines.append(f"{indent}{number} {head} -> {describe_action(rule.action)}")
        else:
            lines.append(f"{indent}{number} {head}:")
            lines.extend(_rule_lines(rule.children, indent + "   ", f"{prefix}{i}."))
    return lines


# -- mermaid ------------------------------------------------------------------------------


def _label(text: str, width: int = 80) -> str:
    safe = _one_line(text, width)
    # `#` first: Mermaid reads `#name;` and `#123;` in a label as entity codes.
    for char, code in (
        ("#", "#35;"),
        ("&", "#amp;"),
        ('"', "#quot;"),
        ("<", "#lt;"),
        (">", "#gt;"),
    ):
        safe = safe.replace(char, code)
    return f'"{safe}"'


class _Chart:
    def __init__(self) -> None:
        self.lines = ["flowchart TD"]

    def node(self, nid: str, shape: str, text: str, indent: str = "  ", width: int = 80) -> str:
        open_, close = {
            "box": ("[", "]"),
            "decision": ("{", "}"),
            "end": ("([", "])"),
            "sub": ("[[", "]]"),
        }[shape]
        self.lines.append(f"{indent}{nid}{open_}{_label(text, width)}{close}")
        return nid

    def edge(self, a: str, b: str, label: str | None = None, dotted: bool = False) -> None:
        arrow = "-.->" if dotted else "-->"
        if label:
            arrow = f"-. {label} .->" if dotted else f"-- {label} -->"
        self.lines.append(f"  {a} {arrow} {b}")


def _loop(chart: _Chart, t: Template, p: str, indent: str, finish: str | None) -> tuple[str, str]:
    """Draw one loop with node ids prefixed ``p``; returns (entry node, plan node)."""
    n = chart.node
    plan_text = f"plan: {t.plan.mode}"
    if t.plan.mode == "static":
        plan_text += " - " + " then ".join(task.id for task in t.plan.tasks)
    elif t.plan.mode == "model":
        plan_text += f" - model writes up to {t.plan.max_tasks} tasks"
    else:
        plan_text += " - one task: the intent"
    plan = n(f"{p}plan", "box", plan_text, indent)
    for i, task in enumerate(t.plan.tasks, 1):  # each task's own goal condition
        if task.done_when is not None:
            tid = n(
                f"{p}task{i}", "box", f"{task.id} done when: {task.done_when.source}", indent, _FULL
            )
            chart.edge(plan, tid, dotted=True)
    if t.each_task is not None:
        each = t.each_task
        chart.lines.append(
            f"{indent}subgraph {p}sub["
            + _label(
                f"each task: {each.uses} - isolation {each.isolation}, parallel {each.parallel}"
            )
            + "]"
        )
        sub_done = n(f"{p}subdone", "end", "sub-loop result: outcome, reason, diff", indent + "  ")
        sub_entry, _ = _loop(chart, each.template, f"{p}s_", indent + "  ", sub_done)
        chart.lines.append(f"{indent}end")
        work = n(f"{p}merge", "box", "merge finished sub-loops into this tree", indent)
        chart.edge(plan, sub_entry, "per task")
        chart.edge(sub_done, work)
    else:
        steps = t.act.max_steps if t.act else 0
        work = n(f"{p}act", "box", f"act: model calls tools, up to {steps} per turn", indent)
        chart.edge(plan, work, "next task")
    observers = ", ".join(t.observe) or "none"
    obs = n(f"{p}observe", "box", f"observe: {observers}", indent)
    chart.edge(work, obs)
    check = n(
        f"{p}exit",
        "decision",
        "exit conditions hold? " + " and ".join(c.source for c in t.exit),
        indent,
        _FULL,
    )
    chart.edge(obs, check)
    done = finish or n(f"{p}done", "end", "done", indent)
    if t.each_task is None and (len(t.plan.tasks) > 1 or t.plan.mode == "model"):
        more = n(f"{p}more", "decision", "more tasks?", indent)
        chart.edge(check, more, "yes")
        chart.edge(more, plan, "yes")
        chart.edge(more, done, "no")
    else:
        chart.edge(check, done, "yes")
    targets = {
        "retry": work if t.each_task is None else plan,
        "rollback": work if t.each_task is None else plan,
        "replan": plan,
    }
    stops: dict[str, str] = {}

    def stop(kind: str) -> str:
        if kind not in stops:
            stops[kind] = n(
                f"{p}{kind}",
                "end",
                {"escalate": "escalated: a person decides", "abort": "aborted"}[kind],
                indent,
            )
        return stops[kind]

    counter = [0]

    def action_node(action: Action, name: str = "") -> str:
        counter[0] += 1
        label = f"{name}: {describe_action(action)}" if name else describe_action(action)
        nid = n(f"{p}a{counter[0]}", "box", label, indent)
        if action.kind in targets:
            chart.edge(nid, targets[action.kind], dotted=True)
        else:
            chart.edge(nid, stop(action.kind))
        return nid

    def rules(items: tuple[Rule, ...], entry: str, label: str | None) -> None:
        prev, prev_label = entry, label
        for rule in items:
            if rule.condition is None:
                target = action_node(rule.action, rule.name) if rule.action else None
                if rule.action is None:
                    counter[0] += 1
                    hub = n(f"{p}r{counter[0]}", "box", f"{rule.name}: else", indent)
                    chart.edge(prev, hub, prev_label)
                    rules(rule.children, hub, None)
                else:
                    chart.edge(prev, target, prev_label)
                return
            counter[0] += 1
            dec = n(
                f"{p}r{counter[0]}",
                "decision",
                f"{rule.name}: {rule.condition.source}",
                indent,
                _FULL,
            )
            chart.edge(prev, dec, prev_label)
            if rule.action is not None:
                chart.edge(dec, action_node(rule.action), "yes")
            else:
                rules(rule.children, dec, "yes")
            prev, prev_label = dec, "no"
        default = n(f"{p}fallback", "box", "retry with the observers' feedback", indent)
        chart.edge(default, targets["retry"], dotted=True)
        chart.edge(prev, default, prev_label)

    rules(t.refine, check, "no")
    lim = t.limits
    caps = f"limits: {lim.max_iterations} iterations"
    if lim.timeout_s:
        caps += f", {_duration(lim.timeout_s)}"
    if lim.max_tokens:
        caps += f", {lim.max_tokens} tokens"
    if lim.max_repeats:
        caps += f", {lim.max_repeats} repeats"
    capn = n(f"{p}limits", "sub", caps, indent)
    chart.edge(capn, n(f"{p}exhausted", "end", "exhausted / stalled", indent), dotted=True)
    return plan, plan


def explain_mermaid(template: Template) -> str:
    chart = _Chart()
    start = chart.node("start", "end", f"{template.name}: intent")
    entry, _ = _loop(chart, template, "", "  ", None)
    chart.edge(start, entry)
    return "\n".join(chart.lines)


def _named(raw: Any, rules: tuple[Rule, ...]) -> Any:
    """The resolved refine list with each rule's name (its id, or file:line) as ``id``."""
    if not isinstance(raw, list) or len(raw) != len(rules):
        return raw
    out = []
    for item, rule in zip(raw, rules, strict=True):
        if not isinstance(item, dict):
            out.append(item)
            continue
        item = {"id": rule.name, **{k: v for k, v in item.items() if k != "id"}}
        for key in ("then", "else"):
            if isinstance(item.get(key), list):
                item[key] = _named(item[key], rule.children)
        out.append(item)
    return out


def explain_json(template: Template) -> str:
    data = thaw(template.resolved)
    if isinstance(data, dict) and "refine" in data:
        data["refine"] = _named(data["refine"], template.refine)
    return json.dumps(data, indent=2, ensure_ascii=False)


def explain(template: Template, fmt: str = "text") -> str:
    if fmt == "mermaid":
        return explain_mermaid(template)
    if fmt == "json":
        return explain_json(template)
    return explain_text(template)
