"""What a template change does: two composed, frozen templates compared section by section.

A reviewer of a template change sees YAML; this says what the engine will do differently:
refine rules added, removed, reordered or changed (by name), limits and policy loosened or
tightened, observers changed. Pure: it reads two Template objects (and case results
computed elsewhere) and returns values; rendering is text, Markdown or JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from looprun.data.freeze import thaw
from looprun.data.value import valueclass
from looprun.template.model import Action, Constraints, Protect, Rule, Template

Kind = Literal["loosened", "tightened", "added", "removed", "changed", "reordered"]


@valueclass
class Change:
    """One difference: which section, what happened, to what, and the values either side."""

    section: str  # refine, exit, limits, policy, protect, sandbox, observe, plan, inputs, ...
    kind: Kind
    subject: str
    old: Any = None
    new: Any = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "section": self.section,
            "kind": self.kind,
            "subject": self.subject,
            "old": self.old,
            "new": self.new,
        }


@valueclass
class CaseChange:
    """A case (``looprun test`` format) the two templates decide differently."""

    name: str
    location: str
    old: str
    new: str


@valueclass
class TemplateDiff:
    """Every difference between two templates, named as the reviewer named them."""

    old_label: str
    new_label: str
    changes: tuple[Change, ...]
    cases: tuple[CaseChange, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.changes or self.cases)

    def of_kind(self, *kinds: str) -> list[Change]:
        return [c for c in self.changes if c.kind in kinds]


def _src(value: Any) -> str | None:
    """A compiled condition or text as its source, whitespace folded; None stays None."""
    if value is None:
        return None
    return " ".join(str(getattr(value, "source", value)).split())


def _srcs(values: Iterable[Any]) -> list[str]:
    return [s for v in values if (s := _src(v)) is not None]


def diff_templates(
    old: Template | None,
    new: Template | None,
    old_label: str,
    new_label: str,
    cases: Sequence[CaseChange] = (),
) -> TemplateDiff:
    """Compare two templates (None: the template does not exist on that side)."""
    if old is None or new is None:
        if old is None and new is None:
            return TemplateDiff(old_label, new_label, (), tuple(cases))
        kind: Kind = "added" if old is None else "removed"
        name = (new or old).name  # type: ignore[union-attr]
        return TemplateDiff(
            old_label, new_label, (Change("template", kind, f"template {name}"),), tuple(cases)
        )
    out: list[Change] = []
    if old.name != new.name:
        out.append(Change("template", "changed", "name", old.name, new.name))
    out += _refine(old.refine, new.refine)
    out += _exit(old, new)
    out += _limits(old, new)
    out += _policy(old, new)
    out += _observers(old, new)
    out += _plan(old, new)
    out += _inputs(old, new)
    if dict(old.models) != dict(new.models):
        out.append(Change("models", "changed", "models", dict(old.models), dict(new.models)))
    return TemplateDiff(old_label, new_label, tuple(out), tuple(cases))


# -- refine -------------------------------------------------------------------------------


def _action(action: Action | None) -> dict[str, Any] | None:
    if action is None:
        return None
    return {"kind": action.kind, "target": action.target, "message": _src(action.message)}


def _flatten(rules: Sequence[Rule]) -> dict[str, tuple[str, int, Rule]]:
    """Every rule by its key (its ``id``, else its condition and action): (parent, index, rule)."""
    out: dict[str, tuple[str, int, Rule]] = {}

    def key(rule: Rule) -> str:
        if rule.id:
            return rule.id
        base = f"if {_src(rule.condition)}" if rule.condition is not None else "else"
        name, n = base, 2
        while name in out:
            name, n = f"{base} #{n}", n + 1
        return name

    def walk(level: Sequence[Rule], parent: str) -> None:
        for i, rule in enumerate(level):
            k = key(rule)
            out[k] = (parent, i, rule)
            walk(rule.children, k)

    walk(rules, "")
    return out


def _refine(old_rules: Sequence[Rule], new_rules: Sequence[Rule]) -> list[Change]:
    old, new = _flatten(old_rules), _flatten(new_rules)
    out: list[Change] = []
    for k, (_, _, rule) in new.items():
        if k not in old:
            out.append(Change("refine", "added", f"rule {k}", None, _rule_value(rule)))
    for k, (_, _, rule) in old.items():
        if k not in new:
            out.append(Change("refine", "removed", f"rule {k}", _rule_value(rule), None))
    for k in (k for k in old if k in new):
        (op, _, o), (np_, _, n) = old[k], new[k]
        if _src(o.condition) != _src(n.condition):
            out.append(
                Change(
                    "refine",
                    "changed",
                    f"rule {k}: condition",
                    _src(o.condition),
                    _src(n.condition),
                )
            )
        if _action(o.action) != _action(n.action):
            out.append(
                Change(
                    "refine", "changed", f"rule {k}: action", _action(o.action), _action(n.action)
                )
            )
        if op != np_:
            out.append(
                Change(
                    "refine",
                    "reordered",
                    f"rule {k}: moved",
                    op or "(top level)",
                    np_ or "(top level)",
                )
            )
    # order within each parent, among the rules both sides have there
    for parent in {p for p, _, _ in new.values()}:
        before = [
            k for k, (p, _, _) in old.items() if p == parent and new.get(k, ("?",))[0] == parent
        ]
        after = [
            k for k, (p, _, _) in new.items() if p == parent and old.get(k, ("?",))[0] == parent
        ]
        if before != after:
            kept = set(_lcs(before, after))
            for k in after:
                if k not in kept:
                    out.append(
                        Change(
                            "refine",
                            "reordered",
                            f"rule {k}",
                            before.index(k) + 1,
                            after.index(k) + 1,
                        )
                    )
    return out


def _rule_value(rule: Rule) -> dict[str, Any]:
    return {"if": _src(rule.condition) or "else", "then": _action(rule.action)}


def _lcs(a: list[str], b: list[str]) -> list[str]:
    """The longest common subsequence: the rules that kept their order."""
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) - 1, -1, -1):
        for j in range(len(b) - 1, -1, -1):
            table[i][j] = (
                table[i + 1][j + 1] + 1 if a[i] == b[j] else max(table[i + 1][j], table[i][j + 1])
            )
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        if a[i] == b[j]:
            out.append(a[i])
            i, j = i + 1, j + 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return out


# -- exit, limits -------------------------------------------------------------------------


def _sets(
    section: str, subject: str, old: list[str], new: list[str], more_is: Kind
) -> list[Change]:
    """Items added and removed from a list; ``more_is``: what an added item does."""
    less_is: Kind = "tightened" if more_is == "loosened" else "loosened"
    out = [
        Change(section, more_is, f"{subject}: {v!r} added", None, v) for v in new if v not in old
    ]
    out += [
        Change(section, less_is, f"{subject}: {v!r} removed", v, None) for v in old if v not in new
    ]
    return out


def _exit(old: Template, new: Template) -> list[Change]:
    return _sets("exit", "exit condition", _srcs(old.exit), _srcs(new.exit), "tightened")


def _cap(section: str, subject: str, old: float | None, new: float | None) -> list[Change]:
    """A cap (None: no cap): a higher one, or none at all, is looser."""
    if old == new:
        return []
    if new is None or (old is not None and new > old):
        return [Change(section, "loosened", subject, old, new)]
    return [Change(section, "tightened", subject, old, new)]


def _limits(old: Template, new: Template) -> list[Change]:
    a, b = old.limits, new.limits
    out = _cap("limits", "limits.max_iterations", a.max_iterations, b.max_iterations)
    out += _cap("limits", "limits.max_tokens", a.max_tokens, b.max_tokens)
    out += _cap("limits", "limits.timeout (seconds)", a.timeout_s, b.timeout_s)
    out += _cap("limits", "limits.max_cost_usd", a.max_cost_usd, b.max_cost_usd)
    out += _cap("limits", "limits.max_repeats", a.max_repeats, b.max_repeats)
    for tool in sorted(set(a.per_tool) | set(b.per_tool)):
        out += _cap("limits", f"limits.per_tool.{tool}", a.per_tool.get(tool), b.per_tool.get(tool))
    if old.context != new.context:
        out.append(
            Change(
                "limits", "changed", "context", vars(old.context).copy(), vars(new.context).copy()
            )
        )
    return out


# -- policy -------------------------------------------------------------------------------


def _policy(old: Template, new: Template) -> list[Change]:
    out: list[Change] = []
    if old.act is None or new.act is None:
        if (old.act is None) != (new.act is None):
            out.append(Change("policy", "changed", "act", old.act is not None, new.act is not None))
    else:
        a, b = old.act, new.act
        out += _sets("policy", "act.tools", list(a.tools), list(b.tools), "loosened")
        out += _cap("policy", "act.max_steps", a.max_steps, b.max_steps)
        out += _constraints(a.constraints, b.constraints)
        if (a.agent and a.agent.cli) != (b.agent and b.agent.cli):
            out.append(
                Change(
                    "policy",
                    "changed",
                    "act.agent.cli",
                    a.agent and a.agent.cli,
                    b.agent and b.agent.cli,
                )
            )
    out += _sandbox(old, new)
    old_tasks = {t.id: t for t in old.plan.tasks}
    for task in new.plan.tasks:
        if task.id in old_tasks:
            out += _protect(f"task {task.id}: protect", old_tasks[task.id].protect, task.protect)
    return out


def _constraints(a: Constraints, b: Constraints) -> list[Change]:
    p = "act.constraints"
    out = _sets("policy", f"{p}.paths.allow", list(a.paths.allow), list(b.paths.allow), "loosened")
    out += _sets("policy", f"{p}.paths.deny", list(a.paths.deny), list(b.paths.deny), "tightened")
    out += _sets("policy", f"{p}.commands.allow", list(a.commands), list(b.commands), "loosened")
    out += _cap("policy", f"{p}.max_diff_lines", a.max_diff_lines, b.max_diff_lines)
    out += _sets(
        "policy",
        f"{p}.forbidden_patterns",
        list(a.forbidden_patterns),
        list(b.forbidden_patterns),
        "tightened",
    )
    old_scoped = {s.pattern: s for s in a.scoped_patterns}
    new_scoped = {s.pattern: s for s in b.scoped_patterns}
    out += _sets(
        "policy", f"{p}.forbidden_patterns", list(old_scoped), list(new_scoped), "tightened"
    )
    for pattern in (k for k in new_scoped if k in old_scoped):
        o, n = old_scoped[pattern], new_scoped[pattern]
        where = f"{p}.forbidden_patterns[{pattern!r}]"
        out += _sets("policy", f"{where}.exclude", _srcs(o.exclude), _srcs(n.exclude), "loosened")
        if not o.paths and n.paths:  # from every file to some
            out.append(Change("policy", "loosened", f"{where}.paths", [], _srcs(n.paths)))
        elif o.paths and not n.paths:
            out.append(Change("policy", "tightened", f"{where}.paths", _srcs(o.paths), []))
        else:
            out += _sets("policy", f"{where}.paths", _srcs(o.paths), _srcs(n.paths), "tightened")
    out += _sets("policy", f"{p}.approve", list(a.approve), list(b.approve), "tightened")
    out += _cap(
        "policy", f"{p}.command_timeout (seconds)", a.command_timeout_s, b.command_timeout_s
    )
    if a.max_output_bytes != b.max_output_bytes:
        out.append(
            Change(
                "policy", "changed", f"{p}.max_output_bytes", a.max_output_bytes, b.max_output_bytes
            )
        )
    out += _protect(f"{p}.protect", a.protect, b.protect)
    return out


def _protect(subject: str, a: Protect, b: Protect) -> list[Change]:
    out = _sets("protect", f"{subject}.paths", _srcs(a.paths), _srcs(b.paths), "tightened")
    out += _sets(
        "protect", f"{subject}.allow_new", _srcs(a.allow_new), _srcs(b.allow_new), "loosened"
    )
    if a.doctests != b.doctests:
        kind: Kind = "tightened" if b.doctests else "loosened"
        out.append(Change("protect", kind, f"{subject}.doctests", a.doctests, b.doctests))
    return out


_SANDBOX_RANK = {"off": 0, "auto": 1, "required": 2}


def _sandbox(old: Template, new: Template) -> list[Change]:
    a, b = old.sandbox, new.sandbox
    out: list[Change] = []
    if a.mode != b.mode:
        kind: Kind = "tightened" if _SANDBOX_RANK[b.mode] > _SANDBOX_RANK[a.mode] else "loosened"
        out.append(Change("sandbox", kind, "sandbox.mode", a.mode, b.mode))
    if a.network != b.network:
        kind = "loosened" if b.network else "tightened"
        out.append(Change("sandbox", kind, "sandbox.network", a.network, b.network))
    out += _sets("sandbox", "sandbox.hide", list(a.hide), list(b.hide), "tightened")
    return out


# -- observers, plan, inputs --------------------------------------------------------------


def _observer_value(spec: Any) -> dict[str, Any]:
    return {
        "parser": spec.parser,
        "run": _src(spec.run),
        "file": _src(spec.file),
        "when": _src(spec.when),
        "timeout_s": spec.timeout_s,
        "options": thaw(spec.options),
        "cannot_run_exit": list(spec.cannot_run_exit),
        "pin_config": spec.pin_config,
        "unavailable": spec.unavailable,
        "holdout": None
        if spec.holdout is None
        else {
            "from": _src(spec.holdout.source),
            "to": spec.holdout.dest,
            **(
                {}
                if spec.holdout.variants is None
                else {
                    "variants": {
                        "of": _src(spec.holdout.variants.of),
                        "count": _src(spec.holdout.variants.count),
                        "file": spec.holdout.variants.file,
                        "test_pattern": spec.holdout.variants.test_pattern.pattern,
                        "beside": spec.holdout.variants.beside,
                    }
                }
            ),
        },
    }


def _observers(old: Template, new: Template) -> list[Change]:
    out: list[Change] = []
    for name, spec in new.observe.items():
        if name not in old.observe:
            out.append(Change("observe", "added", f"observer {name}", None, _observer_value(spec)))
    for name, spec in old.observe.items():
        if name not in new.observe:
            out.append(
                Change("observe", "removed", f"observer {name}", _observer_value(spec), None)
            )
    for name in (n for n in old.observe if n in new.observe):
        o, n = _observer_value(old.observe[name]), _observer_value(new.observe[name])
        for field in o:
            if o[field] == n[field]:
                continue
            # the check's pinned configuration or a held-out check dropped: easier to game
            weaker = field in ("pin_config", "holdout") and n[field] is None
            kind: Kind = "loosened" if weaker else "changed"
            out.append(Change("observe", kind, f"observer {name}: {field}", o[field], n[field]))
    return out


def _plan(old: Template, new: Template) -> list[Change]:
    out: list[Change] = []
    if old.plan.mode != new.plan.mode:
        out.append(Change("plan", "changed", "plan.mode", old.plan.mode, new.plan.mode))
    if old.plan.max_tasks != new.plan.max_tasks:
        out += _cap("plan", "plan.max_tasks", old.plan.max_tasks, new.plan.max_tasks)
    a = {t.id: t for t in old.plan.tasks}
    b = {t.id: t for t in new.plan.tasks}
    out += [
        Change("plan", "added", f"task {k}", None, _src(t.goal)) for k, t in b.items() if k not in a
    ]
    out += [
        Change("plan", "removed", f"task {k}", _src(t.goal), None)
        for k, t in a.items()
        if k not in b
    ]
    for k in (k for k in a if k in b):
        o, n = a[k], b[k]
        if _src(o.done_when) != _src(n.done_when):
            out.append(
                Change(
                    "plan", "changed", f"task {k}: done_when", _src(o.done_when), _src(n.done_when)
                )
            )
        if _src(o.goal) != _src(n.goal):
            out.append(Change("plan", "changed", f"task {k}: goal", _src(o.goal), _src(n.goal)))
        if o.depends_on != n.depends_on:
            out.append(
                Change(
                    "plan",
                    "changed",
                    f"task {k}: depends_on",
                    list(o.depends_on),
                    list(n.depends_on),
                )
            )
    common = [k for k in a if k in b]
    if common != [k for k in b if k in a]:
        out.append(Change("plan", "reordered", "plan.tasks", common, [k for k in b if k in a]))
    ea, eb = old.each_task, new.each_task
    va = (
        None
        if ea is None
        else {"uses": ea.uses, "isolation": ea.isolation, "parallel": ea.parallel}
    )
    vb = (
        None
        if eb is None
        else {"uses": eb.uses, "isolation": eb.isolation, "parallel": eb.parallel}
    )
    if va != vb:
        out.append(Change("plan", "changed", "each_task", va, vb))
    return out


def _inputs(old: Template, new: Template) -> list[Change]:
    out: list[Change] = []
    for name, spec in new.inputs.items():
        if name not in old.inputs:
            out.append(Change("inputs", "added", f"input {name}", None, thaw(spec.default)))
    for name, spec in old.inputs.items():
        if name not in new.inputs:
            out.append(Change("inputs", "removed", f"input {name}", thaw(spec.default), None))
        elif (
            thaw(spec.default) != thaw(new.inputs[name].default)
            or spec.type != new.inputs[name].type
        ):
            n = new.inputs[name]
            out.append(
                Change("inputs", "changed", f"input {name}", thaw(spec.default), thaw(n.default))
            )
    return out


# -- rendering ----------------------------------------------------------------------------

_SECTIONS = (
    ("template", "Template"),
    ("refine", "Refine rules"),
    ("exit", "Exit conditions"),
    ("plan", "Plan"),
    ("observe", "Observers"),
    ("limits", "Limits"),
    ("policy", "Policy"),
    ("protect", "Protected paths"),
    ("sandbox", "Sandbox"),
    ("inputs", "Inputs"),
    ("models", "Models"),
)


def _show(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _line(c: Change) -> str:
    if c.kind in ("added",) and c.old is None and c.new is not None and ": " not in c.subject:
        return f"{c.kind}: {c.subject} = {_show(c.new)}"
    if c.kind == "removed" and c.new is None and c.old is not None and ": " not in c.subject:
        return f"{c.kind}: {c.subject} (was {_show(c.old)})"
    if c.kind == "reordered" and isinstance(c.old, int):
        return f"reordered: {c.subject}: position {c.old} -> {c.new}"
    if (c.old is None and c.new is None) or c.subject.endswith(("added", "removed")):
        return f"{c.kind}: {c.subject}"
    return f"{c.kind}: {c.subject}: {_show(c.old)} -> {_show(c.new)}"


def _groups(d: TemplateDiff) -> list[tuple[str, list[Change]]]:
    rest = [c for c in d.changes if c.kind not in ("loosened", "tightened")]
    return [
        (title, items)
        for key, title in _SECTIONS
        if (items := [c for c in rest if c.section == key])
    ]


def render_text(diffs: Sequence[TemplateDiff]) -> str:
    """In words, loosening first."""
    out: list[str] = []
    for d in diffs:
        out.append(f"{d.old_label} -> {d.new_label}")
        if not d.changed:
            out.append("  no change in what the template does")
            continue
        loose = d.of_kind("loosened")
        if loose:
            out.append(f"  LOOSENED ({len(loose)}) - the change lets the loop do more:")
            out += [f"    ! {_line(c)}" for c in loose]
        tight = d.of_kind("tightened")
        if tight:
            out.append(f"  tightened ({len(tight)}):")
            out += [f"    {_line(c)}" for c in tight]
        for title, items in _groups(d):
            out.append(f"  {title.lower()}:")
            out += [f"    {_line(c)}" for c in items]
        if d.cases:
            out.append(f"  cases deciding differently ({len(d.cases)}):")
            for case in d.cases:
                out.append(f"    {case.name} ({case.location}): {case.old} -> {case.new}")
    return "\n".join(out)


def _md(text: str) -> str:
    """Inline code that survives any backticks and newlines in the value."""
    flat = " ".join(text.split())
    run = 0
    longest = 0
    for ch in flat:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def _md_line(c: Change) -> str:
    if c.kind == "reordered" and isinstance(c.old, int):
        return f"- {c.subject}: position {c.old} → {c.new}"
    if (c.old is None and c.new is None) or c.subject.endswith(("added", "removed")):
        return f"- **{c.kind}** {_md(c.subject)}"
    return f"- **{c.kind}** {_md(c.subject)}: {_md(_show(c.old))} → {_md(_show(c.new))}"


def render_markdown(diffs: Sequence[TemplateDiff]) -> str:
    """For a pull-request comment: loosening first, under a warning heading."""
    out: list[str] = ["## looprun diff", ""]
    for d in diffs:
        out += [f"### {_md(d.old_label)} → {_md(d.new_label)}", ""]
        if not d.changed:
            out += ["No change in what the template does.", ""]
            continue
        loose = d.of_kind("loosened")
        if loose:
            out += [f"#### ⚠️ Loosened ({len(loose)}): the loop may do more", ""]
            out += [_md_line(c) for c in loose] + [""]
        tight = d.of_kind("tightened")
        if tight:
            out += [f"#### Tightened ({len(tight)})", ""] + [_md_line(c) for c in tight] + [""]
        for title, items in _groups(d):
            out += [f"#### {title}", ""] + [_md_line(c) for c in items] + [""]
        if d.cases:
            out += [f"#### Cases deciding differently ({len(d.cases)})", ""]
            out += ["| case | before | after |", "|---|---|---|"]
            for case in d.cases:
                cells = (case.name, case.old, case.new)
                out.append("| " + " | ".join(_md(c).replace("|", "\\|") for c in cells) + " |")
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def render_json(diffs: Sequence[TemplateDiff]) -> str:
    """For tools: every change with its section, kind, subject and both values."""
    doc = {
        "changed": any(d.changed for d in diffs),
        "templates": [
            {
                "old": d.old_label,
                "new": d.new_label,
                "changed": d.changed,
                "loosened": [c.as_dict() for c in d.of_kind("loosened")],
                "tightened": [c.as_dict() for c in d.of_kind("tightened")],
                "changes": [c.as_dict() for c in d.changes],
                "cases": [vars(c).copy() for c in d.cases],
            }
            for d in diffs
        ],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False, default=str)


def render(diffs: Sequence[TemplateDiff], fmt: str) -> str:
    if fmt == "markdown":
        return render_markdown(diffs)
    if fmt == "json":
        return render_json(diffs)
    return render_text(diffs)
