"""Each built-in tool on a real directory, through ``Toolbox.call`` as the engine uses it."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from looprun.act.tools import MAX_LIST_ENTRIES, Toolbox, ToolResult
from looprun.models.base import ToolCall
from looprun.template.model import BUILTIN_TOOLS, Constraints, PathRules

PY = Path(sys.executable).name


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "calc.py").write_text(
        "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"
    )
    (root / "tests").mkdir()
    (root / "tests" / "test_calc.py").write_text("from pkg.calc import add\n")
    (root / ".gitignore").write_text("*.pyc\nbuild/\n")
    (root / "build").mkdir()
    (root / "build" / "out.txt").write_text("built\n")
    (root / "src" / "pkg" / "calc.pyc").write_bytes(b"\x00\x01")
    (root / "src" / "pkg" / ".gitignore").write_text("generated_*.py\n")
    (root / "src" / "pkg" / "generated_x.py").write_text("x = 1\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (root / ".looprun").mkdir()
    (root / ".looprun" / "state.json").write_text("{}\n")
    (root / "secrets").mkdir()
    (root / "secrets" / "token.txt").write_text("s3cr3t\n")
    return root


def toolbox(workdir: Path, **kw: Any) -> Toolbox:
    deadline = kw.pop("deadline", None)
    env = kw.pop("env", None)
    tools = kw.pop("tools", BUILTIN_TOOLS)
    constraints = Constraints(
        paths=PathRules(allow=("src/**", "tests/**"), deny=("secrets/",)),
        commands=kw.pop("commands", (f"{PY} -m pytest *", f"{PY} scripts/*", "echo *")),
        **kw,
    )
    return Toolbox(workdir, constraints, tools, deadline=deadline, env=env)


def call(tb: Toolbox, name: str, **args: Any) -> ToolResult:
    return tb.call(ToolCall(id="c1", name=name, arguments=args))


# -- read_file ---------------------------------------------------------------------------


def test_read_file(workdir: Path) -> None:
    tb = toolbox(workdir)
    result = call(tb, "read_file", path="src/pkg/calc.py")
    assert not result.is_error and result.content.startswith("def add(a, b):")
    assert "no such file: src/nope.py" in call(tb, "read_file", path="src/nope.py").content
    assert "is a directory" in call(tb, "read_file", path="src").content


def test_read_file_refuses_binary_politely(workdir: Path) -> None:
    (workdir / "src" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" * 10)
    result = call(toolbox(workdir), "read_file", path="src/logo.png")
    assert result.is_error and result.violation is None
    assert "binary file (160 bytes)" in result.content


def test_read_file_caps_large_files_with_a_note(workdir: Path) -> None:
    big = "".join(f"line {i}\n" for i in range(50_000))
    (workdir / "src" / "big.txt").write_text(big)
    result = call(toolbox(workdir, max_output_bytes=10_000), "read_file", path="src/big.txt")
    assert not result.is_error
    assert result.content.startswith("line 0\nline 1\n")
    assert len(result.content) < 10_200
    assert f"src/big.txt is {len(big)} bytes; only the first" in result.content


# -- write_file and edit_file ------------------------------------------------------------


def test_write_file_creates_parents_atomically(workdir: Path) -> None:
    tb = toolbox(workdir)
    result = call(tb, "write_file", path="src/new/deep/mod.py", content="x = 1\n")
    assert result == ToolResult(
        "created src/new/deep/mod.py (6 bytes)", changed=("src/new/deep/mod.py",)
    )
    assert (workdir / "src/new/deep/mod.py").read_text() == "x = 1\n"
    result = call(tb, "write_file", path="src/new/deep/mod.py", content="x = 2\n")
    assert result.content.startswith("overwrote")
    assert [p.name for p in (workdir / "src/new/deep").iterdir()] == ["mod.py"], (
        "no temp files left"
    )


def test_write_file_keeps_mode_and_writes_through_inside_links(workdir: Path) -> None:
    script = workdir / "src" / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    (workdir / "src" / "alias.py").symlink_to("pkg/calc.py")
    tb = toolbox(workdir)
    call(tb, "write_file", path="src/run.sh", content="#!/bin/sh\necho hi\n")
    assert os.access(script, os.X_OK)
    result = call(tb, "write_file", path="src/alias.py", content="ALIASED = 1\n")
    assert result.changed == ("src/pkg/calc.py",)
    assert (workdir / "src" / "alias.py").is_symlink()
    assert (workdir / "src" / "pkg" / "calc.py").read_text() == "ALIASED = 1\n"


def test_write_outside_allowed_paths_is_refused(workdir: Path) -> None:
    result = call(toolbox(workdir), "write_file", path="README.md", content="x")
    assert result.is_error and result.violation is not None
    assert result.violation.rule == "path.not_allowed" and result.violation.tool == "write_file"
    assert not (workdir / "README.md").exists()


def test_edit_file_exactly_once(workdir: Path) -> None:
    tb = toolbox(workdir)
    result = call(
        tb,
        "edit_file",
        path="src/pkg/calc.py",
        old="    return a - b\n\n\ndef sub",
        new="    return a + b\n\n\ndef sub",
    )
    assert result == ToolResult("edited src/pkg/calc.py at line 2", changed=("src/pkg/calc.py",))
    assert (
        (workdir / "src/pkg/calc.py").read_text().startswith("def add(a, b):\n    return a + b\n")
    )


def test_edit_file_reports_zero_and_many_matches(workdir: Path) -> None:
    tb = toolbox(workdir)
    before = (workdir / "src/pkg/calc.py").read_text()
    many = call(tb, "edit_file", path="src/pkg/calc.py", old="return a - b", new="return 0")
    assert many.is_error
    assert "found 2 times in src/pkg/calc.py (at lines 2, 6)" in many.content
    none = call(tb, "edit_file", path="src/pkg/calc.py", old="return a * b", new="return 0")
    assert none.is_error and "found 0 times" in none.content
    near = call(tb, "edit_file", path="src/pkg/calc.py", old="def add(a, b):\n  return", new="x")
    assert "first line appears at line 1" in near.content
    assert (workdir / "src/pkg/calc.py").read_text() == before
    assert "no such file" in call(tb, "edit_file", path="src/none.py", old="a", new="b").content
    assert "empty" in call(tb, "edit_file", path="src/pkg/calc.py", old="", new="b").content


def test_edit_file_handles_crlf_files(workdir: Path) -> None:
    (workdir / "src" / "win.py").write_bytes(b"a = 1\r\nb = 2\r\n")
    result = call(
        toolbox(workdir), "edit_file", path="src/win.py", old="a = 1\nb = 2", new="a = 1\nb = 3"
    )
    assert not result.is_error
    assert (workdir / "src" / "win.py").read_bytes() == b"a = 1\r\nb = 3\r\n"


# -- list_files and search ---------------------------------------------------------------


def test_list_files_respects_gitignore_and_protected_dirs(workdir: Path) -> None:
    listed = call(toolbox(workdir), "list_files").content.splitlines()
    assert listed == [
        ".gitignore",
        "src/pkg/.gitignore",
        "src/pkg/calc.py",
        "tests/test_calc.py",
    ]
    only_py = call(toolbox(workdir), "list_files", glob="*.py").content.splitlines()
    assert only_py == ["src/pkg/calc.py", "tests/test_calc.py"]
    assert call(toolbox(workdir), "list_files", path="tests").content == "tests/test_calc.py"
    assert call(toolbox(workdir), "list_files", path="src", glob="*.md").content == "no files"


def test_list_files_is_capped(workdir: Path) -> None:
    many = workdir / "src" / "many"
    many.mkdir()
    for i in range(MAX_LIST_ENTRIES + 25):
        (many / f"f{i:04}.txt").write_text("")
    lines = call(toolbox(workdir), "list_files", path="src/many").content.splitlines()
    assert len(lines) == MAX_LIST_ENTRIES + 1
    assert lines[-1] == "[... 25 more file(s); narrow the path or glob ...]"


def test_search(workdir: Path) -> None:
    tb = toolbox(workdir)
    result = call(tb, "search", pattern=r"return a [-+] b")
    assert result.content.splitlines() == [
        "src/pkg/calc.py:2:     return a - b",
        "src/pkg/calc.py:6:     return a - b",
    ]
    assert call(tb, "search", pattern="s3cr3t").content == "no matches", "denied files are skipped"
    assert call(tb, "search", pattern="core").content == "no matches", ".git is skipped"
    assert call(tb, "search", pattern="import", path="tests").content == (
        "tests/test_calc.py:1: from pkg.calc import add"
    )
    bad = call(tb, "search", pattern="(unclosed")
    assert bad.is_error and "invalid regular expression" in bad.content


def test_search_output_is_capped(workdir: Path) -> None:
    (workdir / "src" / "lots.txt").write_text("needle\n" * 1000)
    lines = call(toolbox(workdir), "search", pattern="needle").content.splitlines()
    assert len(lines) == 201
    assert lines[-1].startswith("[... 800 more matching line(s) not shown")


def test_catastrophic_regex_cannot_hang_the_engine(workdir: Path) -> None:
    (workdir / "src" / "evil.txt").write_text("a" * 40 + "!\n")
    tb = toolbox(workdir)
    tb.search_timeout_s = 1.0
    start = time.monotonic()
    result = call(tb, "search", pattern=r"^(a+)+$")
    assert time.monotonic() - start < 5
    assert result.is_error and "search gave up" in result.content


# -- run ---------------------------------------------------------------------------------


def test_run_reports_exit_code_and_output(workdir: Path) -> None:
    scripts = workdir / "scripts"
    scripts.mkdir()
    (scripts / "fail.py").write_text("import sys\nprint('boom')\nsys.exit(3)\n")
    tb = toolbox(workdir)
    ok = call(tb, "run", command="echo hello world")
    assert ok == ToolResult("$ echo hello world\nexit code 0\nhello world\n")
    failed = call(tb, "run", command=f"{PY} scripts/fail.py")
    assert "exit code 3\nboom" in failed.content and not failed.is_error
    missing = call(
        toolbox(workdir, commands=("no-such-program-xyz *",)), "run", command="no-such-program-xyz"
    )
    assert missing.is_error and "command not found: no-such-program-xyz" in missing.content


def test_run_caps_output_keeping_head_and_tail(workdir: Path) -> None:
    scripts = workdir / "scripts"
    scripts.mkdir()
    (scripts / "loud.py").write_text(
        "print('FIRST LINE')\nfor i in range(20000):\n    print('x' * 50)\nprint('LAST LINE')\n"
    )
    result = call(toolbox(workdir, max_output_bytes=2_000), "run", command=f"{PY} scripts/loud.py")
    assert "FIRST LINE" in result.content and "LAST LINE" in result.content
    assert "bytes of output cut" in result.content
    assert len(result.content) < 2_200


# -- dispatch ----------------------------------------------------------------------------


def test_specs_are_valid_json_schema() -> None:
    specs = Toolbox(Path("."), Constraints(), ["read_file", "run"]).specs()
    assert [s.name for s in specs] == ["read_file", "run"]
    for spec in specs:
        jsonschema.Draft202012Validator.check_schema(dict(spec.parameters))
    all_specs = {s.name: s for s in Toolbox(Path("."), Constraints(), BUILTIN_TOOLS).specs()}
    assert all_specs["edit_file"].parameters["required"] == ["path", "old", "new"]
    assert all_specs["list_files"].parameters["required"] == []
    with pytest.raises(ValueError, match="unknown tool"):
        Toolbox(Path("."), Constraints(), ["read_file", "shell"])


@pytest.mark.parametrize(
    ("tool_call", "expected"),
    [
        (ToolCall("1", "delete_repo", {}), "no tool named 'delete_repo'"),
        (ToolCall("1", "run", {"command": "echo hi"}), "not enabled here: 'run'"),
        (
            ToolCall("1", "read_file", None, "{path:", error="Expecting property name"),
            "Expecting property name",
        ),
        (ToolCall("1", "read_file", {}), "missing argument(s): path"),
        (ToolCall("1", "read_file", {"path": 3}), "argument 'path' must be a string, not int"),
        (ToolCall("1", "read_file", {"path": "a", "mode": "rb"}), "unknown argument(s): mode"),
    ],
)
def test_model_mistakes_become_error_results(
    workdir: Path, tool_call: ToolCall, expected: str
) -> None:
    result = toolbox(workdir, tools=("read_file", "write_file")).call(tool_call)
    assert result.is_error
    assert expected in result.content
    if "enabled" in expected:  # a tool the template left out: a boundary
        assert result.violation is not None and result.violation.rule == "tool.not_enabled"
    else:  # a misspelt or invented tool is a mistake to correct, never a violation
        assert result.violation is None


def test_nothing_runs_after_the_deadline(workdir: Path) -> None:
    tb = toolbox(workdir, deadline=time.monotonic() - 1)
    result = call(tb, "write_file", path="src/late.py", content="x")
    assert result.is_error and "time limit" in result.content
    assert not (workdir / "src" / "late.py").exists()


def test_secret_values_are_redacted_from_results(workdir: Path) -> None:
    secret = "sk-test-0123456789abcdef"
    (workdir / "src" / "leak.txt").write_text(f"token = {secret}\n")
    tb = toolbox(workdir, env={**os.environ, "SERVICE_API_KEY": secret})
    result = call(tb, "read_file", path="src/leak.txt")
    assert secret not in result.content and "[redacted]" in result.content
