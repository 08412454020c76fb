"""The escape corpus: tool calls a hostile or confused model might send.

Every attempt runs against a real directory with a canary file beside the workdir,
symlinks pointing out, a real ``.git`` and the engine's ``.looprun``. For each refusal
the whole area (workdir and its surroundings) hashes the same before and after, and
the result carries a Violation naming the rule. Process attempts (hangs, leftover
children, floods of output, secrets in the environment) are checked by their effects.
"""

from __future__ import annotations

import hashlib
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from looprun.act.tools import Toolbox
from looprun.models.base import ToolCall
from looprun.template.model import BUILTIN_TOOLS, Constraints, PathRules

PY = Path(sys.executable).name
SECRET = "sk-live-9f8e7d6c5b4a39281706"

CONSTRAINTS = Constraints(
    paths=PathRules(allow=("src/**", "tests/**"), deny=("secrets/",)),
    commands=(f"{PY} -m pytest *", f"{PY} scripts/*", "echo *", "env", "printenv *", "git diff *"),
    command_timeout_s=1.5,
    max_output_bytes=8_000,
)


@pytest.fixture
def arena(tmp_path: Path) -> Path:
    """``arena/work`` is the workdir; everything else in ``arena`` is outside it."""
    arena = tmp_path / "arena"
    work = arena / "work"
    (work / "src").mkdir(parents=True)
    (work / "tests").mkdir()
    (work / "scripts").mkdir()
    (work / "secrets").mkdir()
    (work / "secrets" / "prod.env").write_text("DB=prod\n")
    (work / "src" / "app.py").write_text("print('app')\n")
    (work / "README.md").write_text("# readme\n")
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    (work / ".looprun" / "runs").mkdir(parents=True)
    (work / ".looprun" / "runs" / "journal.jsonl").write_text('{"event": "start"}\n')
    (arena / "canary.txt").write_text("do not touch\n")
    (arena / "outside").mkdir()
    (arena / "outside" / "data.txt").write_text("outside data\n")
    (work / "src" / "link_file").symlink_to(arena / "canary.txt")
    (work / "src" / "link_dir").symlink_to(arena / "outside")
    (work / "src" / "dangling").symlink_to(arena / "outside" / "not-yet.txt")
    (work / "src" / "gitlink").symlink_to(work / ".git")
    (work / "src" / "rel_up").symlink_to("../..")
    return arena


def fingerprint(root: Path) -> dict[str, str]:
    """Type, content and mode of everything under root, never following symlinks."""
    seen: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            st = path.lstat()
            if path.is_symlink():
                seen[rel] = f"link:{os.readlink(path)}"
            elif path.is_dir():
                seen[rel] = f"dir:{oct(st.st_mode)}"
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                seen[rel] = f"file:{oct(st.st_mode)}:{digest}"
    return seen


def toolbox(arena: Path, **kw: Any) -> Toolbox:
    return Toolbox(arena / "work", CONSTRAINTS, BUILTIN_TOOLS, **kw)


def tc(name: str, **args: Any) -> ToolCall:
    return ToolCall(id="evil", name=name, arguments=args)


def _abs(arena_rel: str) -> str:
    # Absolute paths are filled in per test (the arena lives in a temp dir).
    return "ABS:" + arena_rel


CORPUS: list[tuple[str, ToolCall, str]] = [
    # traversal
    ("read-parent-canary", tc("read_file", path="../canary.txt"), "path.outside"),
    (
        "write-parent-canary",
        tc("write_file", path="../canary.txt", content="pwned"),
        "path.outside",
    ),
    (
        "write-deep-traversal",
        tc("write_file", path="src/../../canary.txt", content="x"),
        "path.outside",
    ),
    (
        "edit-traversal",
        tc("edit_file", path="src/../../outside/data.txt", old="outside", new="x"),
        "path.outside",
    ),
    ("list-parent", tc("list_files", path=".."), "path.outside"),
    ("search-parent", tc("search", pattern="touch", path="../"), "path.outside"),
    # absolute paths
    ("read-etc-passwd", tc("read_file", path="/etc/passwd"), "path.outside"),
    (
        "write-absolute-canary",
        tc("write_file", path=_abs("canary.txt"), content="x"),
        "path.outside",
    ),
    (
        "write-absolute-new",
        tc("write_file", path=_abs("outside/new.txt"), content="x"),
        "path.outside",
    ),
    # symlinks out
    ("read-symlinked-file", tc("read_file", path="src/link_file"), "path.outside"),
    ("write-symlinked-file", tc("write_file", path="src/link_file", content="x"), "path.outside"),
    (
        "write-into-symlinked-dir",
        tc("write_file", path="src/link_dir/new.txt", content="x"),
        "path.outside",
    ),
    (
        "edit-in-symlinked-dir",
        tc("edit_file", path="src/link_dir/data.txt", old="outside", new="x"),
        "path.outside",
    ),
    ("write-dangling-link", tc("write_file", path="src/dangling", content="x"), "path.outside"),
    (
        "write-through-relative-link",
        tc("write_file", path="src/rel_up/canary.txt", content="x"),
        "path.outside",
    ),
    ("list-symlinked-dir", tc("list_files", path="src/link_dir"), "path.outside"),
    # .git and .looprun
    (
        "write-git-hook",
        tc("write_file", path=".git/hooks/pre-commit", content="#!/bin/sh\nid\n"),
        "path.git",
    ),
    ("write-git-config", tc("write_file", path=".git/config", content="[core]\n"), "path.git"),
    ("edit-git-head", tc("edit_file", path=".git/HEAD", old="ref", new="x"), "path.git"),
    ("read-git-config", tc("read_file", path=".git/config"), "path.git"),
    (
        "write-git-via-link",
        tc("write_file", path="src/gitlink/hooks/post-checkout", content="x"),
        "path.git",
    ),
    (
        "write-git-uppercase",
        tc("write_file", path=".GIT/hooks/pre-commit", content="x"),
        "path.git",
    ),
    (
        "write-nested-git",
        tc("write_file", path="src/vendor/.git/hooks/pre-commit", content="x"),
        "path.git",
    ),
    (
        "write-journal",
        tc("write_file", path=".looprun/runs/journal.jsonl", content="{}"),
        "path.looprun",
    ),
    ("read-journal", tc("read_file", path="./.looprun/runs/journal.jsonl"), "path.looprun"),
    # allow and deny lists
    ("write-denied", tc("write_file", path="secrets/prod.env", content="DB=mine"), "path.deny"),
    ("read-denied", tc("read_file", path="secrets/prod.env"), "path.deny"),
    ("write-not-allowed", tc("write_file", path="README.md", content="x"), "path.not_allowed"),
    # every shell metacharacter
    ("cmd-semicolon", tc("run", command="echo hi; touch ../pwned"), "command.shell_syntax"),
    ("cmd-and", tc("run", command="echo hi && touch ../pwned"), "command.shell_syntax"),
    ("cmd-or", tc("run", command="echo hi || touch ../pwned"), "command.shell_syntax"),
    ("cmd-pipe", tc("run", command="echo hi | tee ../pwned"), "command.shell_syntax"),
    ("cmd-subst", tc("run", command="echo $(touch ../pwned)"), "command.shell_syntax"),
    ("cmd-subst-quoted", tc("run", command='echo "$(touch ../pwned)"'), "command.shell_syntax"),
    ("cmd-backticks", tc("run", command="echo `touch ../pwned`"), "command.shell_syntax"),
    ("cmd-redirect-out", tc("run", command="echo pwned > ../canary.txt"), "command.shell_syntax"),
    (
        "cmd-redirect-append",
        tc("run", command="echo pwned >> ../canary.txt"),
        "command.shell_syntax",
    ),
    ("cmd-redirect-in", tc("run", command="echo < ../canary.txt"), "command.shell_syntax"),
    ("cmd-background", tc("run", command="echo hi &"), "command.shell_syntax"),
    ("cmd-newline", tc("run", command="echo hi\ntouch ../pwned"), "command.shell_syntax"),
    ("cmd-variable", tc("run", command="echo ${HOME}"), "command.shell_syntax"),
    ("cmd-process-subst", tc("run", command="echo <(id)"), "command.shell_syntax"),
    # wrappers and inline code
    ("wrap-bash-c", tc("run", command="bash -c 'touch ../pwned'"), "command.not_allowed"),
    ("wrap-sh-c", tc("run", command="sh -c 'touch ../pwned'"), "command.not_allowed"),
    ("wrap-env-assign", tc("run", command=f"env X=1 {PY} -m pytest"), "command.not_allowed"),
    ("wrap-xargs", tc("run", command="xargs touch"), "command.not_allowed"),
    ("wrap-sudo", tc("run", command="sudo touch /pwned"), "command.not_allowed"),
    (
        "wrap-python-c",
        tc("run", command=f"{PY} -c \"import os; os.system('touch ../pwned')\""),
        "command.not_allowed",
    ),
    (
        "wrap-pytest-then-shell",
        tc("run", command=f"{PY} -m pytest -q; touch ../pwned"),
        "command.shell_syntax",
    ),
    ("wrap-absolute-shell", tc("run", command="/bin/sh -c id"), "command.not_allowed"),
    # arguments that reach outside by other spellings: expanded by the program itself
    ("arg-rootdir-tilde", tc("run", command=f"{PY} -m pytest --rootdir=~"), "command.unjudged"),
    ("arg-tilde-path", tc("run", command=f"{PY} -m pytest ~/tests"), "command.unjudged"),
    (
        "arg-home-single-quoted",
        tc("run", command=f"{PY} -m pytest '--rootdir=$HOME'"),
        "command.unjudged",
    ),
    ("arg-cache-clear", tc("run", command=f"{PY} -m pytest --cache-clear"), "command.unjudged"),
    # ... nested in long options, key=value values and values the program splits again
    (
        "arg-override-ini-long",
        tc("run", command=f"{PY} -m pytest --override-ini=cache_dir=../outside/c"),
        "command.path_outside",
    ),
    (
        "arg-override-ini-attached",
        tc("run", command=f"{PY} -m pytest -ocache_dir=/tmp/elsewhere"),
        "command.path_outside",
    ),
    (
        "arg-addopts-words",
        tc("run", command=f"{PY} -m pytest -o 'addopts=--rootdir ..'"),
        "command.path_outside",
    ),
    ("arg-rootdir-up", tc("run", command=f"{PY} -m pytest --rootdir=.."), "command.path_outside"),
    (
        "arg-junitxml-outside",
        tc("run", command=f"{PY} -m pytest --junitxml=../canary.txt"),
        "command.path_outside",
    ),
    # deny globs hold for what commands read and write
    (
        "arg-junitxml-denied",
        tc("run", command=f"{PY} -m pytest --junitxml=secrets/report.xml"),
        "command.path_deny",
    ),
    (
        "git-no-index-reads-denied",
        tc("run", command="git diff --no-index README.md secrets/prod.env"),
        "command.path_deny",
    ),
    (
        "git-no-index-reads-outside",
        tc("run", command="git diff --no-index README.md ../canary.txt"),
        "command.path_outside",
    ),
    (
        "git-output-denied",
        tc("run", command="git diff --output=secrets/prod.env"),
        "command.path_deny",
    ),
    (
        "git-output-outside",
        tc("run", command="git diff --output ../canary.txt"),
        "command.path_outside",
    ),
    ("echo-names-denied", tc("run", command="echo secrets/prod.env"), "command.path_deny"),
]


@pytest.mark.parametrize(("name", "call", "rule"), CORPUS, ids=[c[0] for c in CORPUS])
def test_escape_attempt_is_refused(arena: Path, name: str, call: ToolCall, rule: str) -> None:
    args = dict(call.arguments or {})
    if str(args.get("path", "")).startswith("ABS:"):
        args["path"] = str(arena / args["path"][4:])
    before = fingerprint(arena)
    result = toolbox(arena).call(ToolCall(call.id, call.name, args))
    assert result.is_error, result
    assert result.violation is not None and result.violation.rule == rule, result
    assert result.violation.tool == call.name
    assert result.changed == ()
    assert fingerprint(arena) == before
    assert not (arena / "pwned").exists()


def test_a_tool_that_does_not_exist_runs_nothing_and_is_no_violation(arena: Path) -> None:
    before = fingerprint(arena)
    result = toolbox(arena).call(tc("shell", command="touch ../pwned"))
    assert result.is_error and "no tool named 'shell'" in result.content
    assert result.violation is None  # a tool error for the model to correct
    assert fingerprint(arena) == before and not (arena / "pwned").exists()


def test_search_and_listing_do_not_follow_links_out(arena: Path) -> None:
    work = arena / "work"
    (work / "src" / "to_git_config").symlink_to(work / ".git" / "config")
    (work / "src" / "to_secret").symlink_to(work / "secrets" / "prod.env")
    tb = toolbox(arena)
    for pattern in ("do not touch", "outside data", "repositoryformatversion", "DB=prod"):
        result = tb.call(tc("search", pattern=pattern))
        assert result.content == "no matches", (pattern, result.content)
    listed = tb.call(tc("list_files")).content.splitlines()
    assert "src/app.py" in listed
    assert not any("link" in p or "to_" in p or "dangling" in p for p in listed), listed


def test_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 30


# -- process attempts ---------------------------------------------------------------------


def _dead(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[1].startswith("Z")  # a zombie has stopped running
    except FileNotFoundError:
        return True
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False


SPAWN_CHILD = """\
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print("CHILD", child.pid, flush=True)
{rest}
"""


def _pid(output: str) -> int:
    for line in output.splitlines():
        if line.startswith("CHILD "):
            return int(line.split()[1])
    raise AssertionError(f"no child pid in {output!r}")


def test_hanging_command_is_killed_with_its_group(arena: Path) -> None:
    script = arena / "work" / "scripts" / "hang.py"
    script.write_text(SPAWN_CHILD.format(rest="time.sleep(600)"))
    before = fingerprint(arena)
    start = time.monotonic()
    result = toolbox(arena).call(tc("run", command=f"{PY} scripts/hang.py"))
    elapsed = time.monotonic() - start
    assert result.is_error and "timed out after" in result.content
    assert elapsed < 5, f"took {elapsed:.1f}s for a 1.5s timeout"
    pid = _pid(result.content)
    deadline = time.monotonic() + 2
    while not _dead(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _dead(pid), "the child of a timed-out command is still running"
    assert fingerprint(arena) == before


def test_run_deadline_bounds_a_command_too(arena: Path) -> None:
    (arena / "work" / "scripts" / "slow.py").write_text("import time\ntime.sleep(600)\n")
    start = time.monotonic()
    result = toolbox(arena, deadline=time.monotonic() + 0.5).call(
        tc("run", command=f"{PY} scripts/slow.py")
    )
    assert result.is_error and time.monotonic() - start < 3


def test_children_left_running_are_killed(arena: Path) -> None:
    script = arena / "work" / "scripts" / "orphan.py"
    script.write_text(SPAWN_CHILD.format(rest="print('parent exits')"))
    start = time.monotonic()
    result = toolbox(arena).call(tc("run", command=f"{PY} scripts/orphan.py"))
    assert "exit code 0" in result.content and "parent exits" in result.content
    assert time.monotonic() - start < 5
    pid = _pid(result.content)
    deadline = time.monotonic() + 2
    while not _dead(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _dead(pid), "a background child outlived the command"


def test_200mb_of_output_is_capped_in_bounded_memory(arena: Path) -> None:
    script = arena / "work" / "scripts" / "flood.py"
    script.write_text(
        "import sys\n"
        "out = sys.stdout.buffer\n"
        "out.write(b'HEAD-MARKER\\n')\n"
        "chunk = b'y' * 1023 + b'\\n'\n"
        "for _ in range(200 * 1024):\n"
        "    out.write(chunk)\n"
        "out.write(b'TAIL-MARKER\\n')\n"
    )
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    result = toolbox(arena).call(tc("run", command=f"{PY} scripts/flood.py"))
    peak_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert "HEAD-MARKER" in result.content and "TAIL-MARKER" in result.content
    assert "bytes of output cut" in result.content
    assert len(result.content) < 9_000
    assert peak_after - peak_before < 50 * 1024, "output was buffered in memory"


def test_secrets_in_the_environment_never_reach_the_child(arena: Path) -> None:
    env = {
        **os.environ,
        "PAYMENTS_API_KEY": SECRET,
        "DB_PASSWORD": SECRET + "-db",
        "GITHUB_TOKEN": "ghp_" + SECRET,
        "HARMLESS_SETTING": "visible-value",
    }
    tb = toolbox(arena, env=env)
    for command in ("env", "printenv PAYMENTS_API_KEY"):
        result = tb.call(tc("run", command=command))
        assert SECRET not in result.content
        assert "[redacted]" not in result.content, "scrubbed from the child, not just redacted"
    assert "HARMLESS_SETTING=visible-value" in tb.call(tc("run", command="env")).content
