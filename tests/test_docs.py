"""The docs must stay true: their template snippets validate, their tables match the code,
and every command line they show uses options that exist."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner

from looprun import errors
from looprun.cli.main import COMMANDS, main
from looprun.loop.outcome import EXIT_CODES
from looprun.template.loader import load_template

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
ALL_DOCS = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]

# A minimal template each snippet is merged into: the snippet's keys replace these.
BASE: dict[str, Any] = {
    "looprun": 1,
    "name": "snippet",
    "inputs": {
        "intent": {"type": "string", "required": True},
        "test_command": {"type": "command", "default": "python -m pytest -q"},
        "lint": {"type": "boolean", "default": True},
    },
    "act": {"prompt": "{{ task.goal }}", "tools": ["read_file", "write_file"]},
    "observe": {
        "tests": {
            "run": "{{ inputs.test_command }} --junitxml={{ run.artifacts }}/junit.xml",
            "parser": "junit",
            "file": "{{ run.artifacts }}/junit.xml",
        },
        "diff": {"parser": "git_diff"},
    },
    "exit": ["tests.ok"],
    "refine": [{"else": "retry"}],
    "limits": {"max_iterations": 3},
}
TEMPLATE_KEYS = {
    "inputs",
    "act",
    "observe",
    "refine",
    "limits",
    "plan",
    "each_task",
    "exit",
    "sandbox",
}


def _fenced(path: Path) -> list[tuple[str, str]]:
    """Every fenced block of a Markdown file as (language, text)."""
    out: list[tuple[str, str]] = []
    lang, lines = None, []
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        if line.startswith("```"):
            if lang is None:
                lang, lines = line[3:].strip(), []
            else:
                out.append((lang, "".join(lines)))
                lang = None
        elif lang is not None:
            lines.append(line)
    return out


def _blocks(path: Path, lang: str) -> list[str]:
    return [text for kind, text in _fenced(path) if kind == lang]


def _snippets() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in (DOCS / "templates.md", DOCS / "observers.md", DOCS / "subloops.md"):
        for i, block in enumerate(_blocks(path, "yaml")):
            data = yaml.safe_load(block)
            if isinstance(data, dict) and set(data) <= TEMPLATE_KEYS:
                out.append((f"{path.name}#{i}", data))
    return out


@pytest.mark.parametrize(("where", "snippet"), _snippets(), ids=lambda v: str(v)[:20])
def test_template_snippets_validate(tmp_path: Path, where: str, snippet: dict) -> None:
    doc = {**BASE, **snippet}
    if "each_task" in doc:  # an outer loop does not act itself
        del doc["act"]
    path = tmp_path / "snippet.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    load_template(path)  # raises TemplateError with file:line:col if the doc is wrong


def test_snippets_cover_the_reference() -> None:
    names = {w.split("#")[0] for w, _ in _snippets()}
    assert names == {"templates.md", "observers.md", "subloops.md"}
    assert len(_snippets()) >= 7


def test_case_file_example_passes(tmp_path: Path) -> None:
    cases = [b for b in _blocks(DOCS / "templates.md", "yaml") if b.startswith("template:")]
    assert len(cases) == 1
    path = tmp_path / "example.cases.yaml"
    path.write_text(cases[0], encoding="utf-8")
    result = CliRunner().invoke(main, ["test", str(path)])
    assert result.exit_code == 0, result.output


def _table_rows(text: str, heading: str) -> list[list[str]]:
    section = text.split(heading, 1)[1]
    rows = []
    for line in section.splitlines()[1:]:
        if rows and not line.startswith("|"):
            break
        if line.startswith("|") and not line.startswith("|---"):
            rows.append([c.strip().strip("`") for c in line.strip("|").split("|")])
    return rows[1:]  # without the header


def test_readme_exit_codes_match_the_code() -> None:
    rows = _table_rows((ROOT / "README.md").read_text(encoding="utf-8"), "### Exit codes")
    table = {int(code): outcome for code, outcome, _ in rows}
    assert {v: k for k, v in table.items() if k != errors.EXIT_INVALID} == EXIT_CODES
    assert table[errors.EXIT_INVALID] == "—"
    assert errors.TemplateError.exit_code == errors.UsageError.exit_code == errors.EXIT_INVALID
    assert errors.LooprunError.exit_code == errors.EXIT_ERROR == EXIT_CODES["error"]


def test_engine_doc_outcomes_match_the_code() -> None:
    text = (DOCS / "engine.md").read_text(encoding="utf-8")
    rows = _table_rows(text, "## Outcomes and exit codes")
    table = {outcome: int(code) for outcome, code, _ in rows if outcome != "—"}
    assert table == EXIT_CODES


def test_engine_doc_lists_every_journal_event() -> None:
    schema = json.loads((ROOT / "schemas" / "journal-event.schema.json").read_text())
    events = schema["properties"]["event"]["enum"]
    text = (DOCS / "engine.md").read_text(encoding="utf-8")
    listed = text.split("Events (`schemas/journal-event.schema.json`):", 1)[1].split(";")[0]
    assert sorted(re.findall(r"`([a-z_]+)`", listed)) == sorted(events)


def _command_lines() -> list[tuple[str, str]]:
    out = []
    for path in ALL_DOCS:
        for lang, block in _fenced(path):
            if lang not in ("", "sh", "console"):
                continue
            joined = block.replace("\\\n", " ")
            for line in joined.splitlines():
                line = line.strip().removeprefix("$ ")
                if line.startswith("looprun "):
                    out.append((path.name, line.split("#")[0]))
        for span in re.findall(r"`(looprun [^`]+)`", path.read_text(encoding="utf-8")):
            # synopsis style: `looprun resume RUN_ID [--approve|--reject]`
            out.append((path.name, re.sub(r"[\[\]|]", " ", span).replace("...", " ")))
    return out


@pytest.mark.parametrize(("where", "line"), _command_lines())
def test_documented_command_lines_use_real_options(where: str, line: str) -> None:
    words = shlex.split(line)[1:]
    name = words[0] if words and words[0] in COMMANDS else "run"
    command = main.get_command(click.Context(main), name)
    assert command is not None
    known = {opt for p in command.params if isinstance(p, click.Option) for opt in p.opts}
    used = {w.split("=", 1)[0] for w in words if w.startswith("-") and w not in ("-", "--")}
    assert used <= known | {"-h", "--help"}, f"{where}: {line}"


def test_every_document_is_linked_from_the_readme() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for doc in sorted(DOCS.glob("*.md")):
        assert f"(docs/{doc.name})" in readme or doc.name == "design-conformance.md", doc.name


def test_run_help_names_every_exit_code() -> None:
    result = CliRunner().invoke(main, ["run", "--help"])
    assert result.exit_code == 0
    for outcome, code in EXIT_CODES.items():
        word = "runtime error" if outcome == "error" else outcome
        assert f"{code} {word}" in result.output, (code, outcome)
