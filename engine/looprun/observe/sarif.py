"""SARIF 2.1.0 reports (ruff, ESLint, Semgrep, CodeQL ...) into findings by level.

Rule ids come from ``ruleId``, ``rule.id`` or the run's rule table (``ruleIndex``); a
result without ``level`` takes its rule's ``defaultConfiguration.level``, else
``warning`` (the SARIF default). Suppressed results (``# nosemgrep``, baselines) and
results whose ``kind`` is not ``fail`` are not findings. Tool execution errors (a tool
that could not read a file) make the observation not ok: a check that failed is not green.
Each item has a key (``finding_keys``) that a line shift does not change, so a run can feed
back only the findings its change added.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from looprun.data.freeze import freeze
from looprun.observe import declared_facts
from looprun.observe.base import Item, Observation, ParseInput
from looprun.observe.feedback import render
from looprun.observe.finding_keys import finding_keys
from looprun.observe.normalise import failure_signature
from looprun.observe.reports import (
    ReportProblem,
    display_path,
    locate_report,
    max_feedback,
    option,
    parse_json,
    read_text,
    unusable,
)

NAME = "sarif"
EMPTY_FACTS = declared_facts.SARIF
FACTS = frozenset(EMPTY_FACTS)
_LEVELS = ("error", "warning", "note")
_RANK = {"error": 3, "warning": 2, "note": 1, "none": 0}
_MAX_ITEMS = 2000


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _uri_path(uri: str, base: str | None, bases: dict[str, Any], workdir: Path) -> str:
    """A finding's file, relative to the workdir when it lies inside it."""
    if base and base in bases:
        prefix = _dict(bases[base]).get("uri")
        if isinstance(prefix, str) and not uri.startswith(("file:", "/")):
            uri = prefix.rstrip("/") + "/" + uri
    if uri.startswith("file:"):
        parsed = urlparse(uri)
        uri = unquote(parsed.path)
        if len(uri) > 2 and uri[0] == "/" and uri[2] == ":":  # file:///C:/...
            uri = uri[1:]
        return display_path(Path(uri), workdir)
    uri = unquote(uri)
    if uri.startswith("/"):
        return display_path(Path(uri), workdir)
    return uri[2:] if uri.startswith("./") else uri


class _Run:
    """One ``runs[]`` entry: its rule table and its result list."""

    def __init__(self, run: dict[str, Any]):
        tool = _dict(run.get("tool"))
        self.driver = _dict(tool.get("driver"))
        self.tool = str(self.driver.get("name") or "tool")
        self.rules = [_dict(r) for r in _list(self.driver.get("rules"))]
        self.by_id = {r.get("id"): r for r in self.rules if isinstance(r.get("id"), str)}
        self.bases = _dict(run.get("originalUriBaseIds"))
        self.artifacts = [_dict(a) for a in _list(run.get("artifacts"))]
        self.run = run

    def rule_of(self, result: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        ref = _dict(result.get("rule"))
        index = result.get("ruleIndex", ref.get("index"))
        rule: dict[str, Any] = {}
        if isinstance(index, int) and 0 <= index < len(self.rules):
            rule = self.rules[index]
        rule_id = result.get("ruleId") or ref.get("id") or rule.get("id") or ""
        if not rule and rule_id in self.by_id:
            rule = self.by_id[rule_id]
        return str(rule_id), rule

    def message(self, result: dict[str, Any], rule: dict[str, Any]) -> str:
        msg = _dict(result.get("message"))
        text = msg.get("text") or msg.get("markdown")
        if not text and msg.get("id"):
            strings = _dict(rule.get("messageStrings"))
            text = _dict(strings.get(msg["id"])).get("text", "")
            for n, arg in enumerate(_list(msg.get("arguments"))):
                text = text.replace("{" + str(n) + "}", str(arg))
        return str(text or _dict(rule.get("shortDescription")).get("text") or "")

    def where(
        self, result: dict[str, Any], workdir: Path
    ) -> tuple[str | None, int | None, int | None]:
        for loc in _list(result.get("locations")):
            phys = _dict(_dict(loc).get("physicalLocation"))
            art = _dict(phys.get("artifactLocation"))
            uri = art.get("uri")
            index = art.get("index")
            if not uri and isinstance(index, int) and 0 <= index < len(self.artifacts):
                art = {**_dict(self.artifacts[index].get("location")), **art}
                uri = art.get("uri")
            if not isinstance(uri, str):
                continue
            region = _dict(phys.get("region"))
            line = region.get("startLine")
            col = region.get("startColumn")
            return (
                _uri_path(uri, art.get("uriBaseId"), self.bases, workdir),
                line if isinstance(line, int) else None,
                col if isinstance(col, int) else None,
            )
        return None, None, None


def _suppressed(result: dict[str, Any]) -> bool:
    sups = _list(result.get("suppressions"))
    return bool(sups) and any(_dict(s).get("status", "accepted") == "accepted" for s in sups)


def _level(result: dict[str, Any], rule: dict[str, Any]) -> str:
    kind = result.get("kind", "fail")
    if kind != "fail":
        return "none"
    level = result.get("level") or _dict(rule.get("defaultConfiguration")).get("level")
    return level if level in _RANK else "warning"


class SarifParser:
    """Static-analysis findings from SARIF 2.1.0."""

    name = NAME
    facts = FACTS
    empty_facts = EMPTY_FACTS

    def parse(self, data: ParseInput) -> Observation:
        try:
            path, shown = locate_report(data)
            doc = self._load(path, shown)
        except ReportProblem as exc:
            return unusable(NAME, data, str(exc), EMPTY_FACTS)
        return self._observe(doc, data)

    @staticmethod
    def _load(path: Path, shown: str) -> dict[str, Any]:
        doc = parse_json(read_text(path, shown), shown, hint="; the report may be truncated")
        if not isinstance(doc, dict) or "runs" not in doc:
            raise ReportProblem(f"{shown}: not a SARIF log (no top-level `runs`)")
        version = doc.get("version")
        if version != "2.1.0":
            raise ReportProblem(
                f"{shown}: SARIF version {version!r} is not supported (expected '2.1.0')"
            )
        if not isinstance(doc["runs"], list):
            raise ReportProblem(f"{shown}: `runs` must be a list")
        return doc

    def _observe(self, doc: dict[str, Any], data: ParseInput) -> Observation:
        levels: Counter[str] = Counter()
        rules: Counter[str] = Counter()
        files: Counter[str] = Counter()
        items: list[Item] = []
        suppressed = 0
        tool_errors: list[Item] = []
        for raw_run in doc["runs"]:
            run = _Run(_dict(raw_run))
            for raw in _list(run.run.get("results")):
                result = _dict(raw)
                if _suppressed(result):
                    suppressed += 1
                    continue
                rule_id, rule = run.rule_of(result)
                level = _level(result, rule)
                if level == "none":
                    continue
                levels[level] += 1
                file, line, col = run.where(result, data.workdir)
                rules[rule_id or "?"] += 1
                if file:
                    files[file] += 1
                if len(items) < _MAX_ITEMS:
                    items.append(
                        Item(
                            id=rule_id or "?",
                            rule=rule_id or "?",
                            severity=level,
                            message=run.message(result, rule),
                            file=file,
                            line=line,
                            col=col,
                        )
                    )
            for inv in _list(run.run.get("invocations")):
                inv = _dict(inv)
                for note in _list(inv.get("toolExecutionNotifications")):
                    note = _dict(note)
                    if note.get("level") == "error":
                        text = _dict(note.get("message")).get("text") or "tool execution error"
                        tool_errors.append(Item(id=f"{run.tool}:error", message=str(text)))
                if inv.get("executionSuccessful") is False and not tool_errors:
                    tool_errors.append(
                        Item(id=f"{run.tool}:error", message="tool execution was not successful")
                    )
        counts = {
            "errors": levels["error"],
            "warnings": levels["warning"],
            "notes": levels["note"],
            "total": sum(levels.values()),
            "suppressed": suppressed,
        }
        fail_on = str(option(data, "fail_on", "error"))
        threshold = _RANK.get(fail_on, 3)
        ok = not tool_errors and not any(n for k, n in levels.items() if _RANK[k] >= threshold)
        all_items = tool_errors + items
        header = (
            f"{NAME}: {counts['errors']} errors, {counts['warnings']} warnings, "
            f"{counts['notes']} notes"
        )
        if tool_errors:
            header += f"; {len(tool_errors)} tool error(s)"
        facts = {
            **counts,
            "rules": dict(rules),
            "files": dict(files),
            "tool_errors": len(tool_errors),
            # one per item, in order: what tells a finding from one already at the baseline
            "finding_keys": finding_keys(all_items, data.workdir),
        }
        return Observation(
            parser=NAME,
            ok=ok,
            exit_code=data.exit_code,
            counts=freeze(counts),
            items=tuple(all_items),
            signature=failure_signature(
                (f"{i.id} {i.file or ''}", i.message)
                for i in all_items
                if _RANK.get(i.severity, 3) >= threshold
            ),
            feedback=render(header, all_items, max_bytes=max_feedback(data), noun="more findings"),
            facts=freeze(facts),
        )
