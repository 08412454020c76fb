"""The template behind ``looprun --until CMD``: one task, one check, the usual caps.

``--until`` is the shortest loop: the model acts with the built-in tools until a command
exits 0, its bounded output the feedback. It is not a second engine: the command line is
turned into a template's text here, and that template is loaded, validated and run like
any other (and ``--save`` hands the same text to the user to grow).

Everything the user typed stays data. ``CMD`` is the default of a ``command`` input
(substituted into the observer's ``run`` once, never rendered), the intent is the usual
``intent`` input, and a path that reaches a protect glob (which the engine renders, so
``intent`` and ``inputs`` may appear there) is a Jinja string literal when it holds a
brace. The text is built as data and dumped by PyYAML, so no value can end a scalar.

Pure: which of the command's words name files is for the caller to say (it looks at the
working directory); this module only reads the words.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterable, Sequence
from typing import Any

import yaml

from looprun.errors import UsageError

# pytest reads its options from these (`addopts = -p plugin` rewrites what it reports),
# and the interpreter runs these at start-up: read-only for an --until run of pytest
PYTEST_CONFIG = (
    "pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini",
    "setup.cfg", "**/conftest.py", "**/sitecustomize.py", "**/usercustomize.py", "**/*.pth",
)  # fmt: skip
# the suite itself: a new test module could patch the code under test when it is imported
PYTEST_TESTS = ("**/test_*.py", "**/*_test.py")
# the file other runners read the check from
RUNNER_FILES: dict[str, tuple[str, ...]] = {
    "make": ("/Makefile", "/makefile", "/GNUmakefile"),
    "tox": ("tox.ini",),
    "nox": ("noxfile.py",),
    "npm": ("/package.json",),
    "pnpm": ("/package.json",),
    "yarn": ("/package.json",),
}
# what a change may not add when the check is pytest: a skip, a plugin, code under test
# that behaves differently under a test run, an exit that skips the report
PYTEST_FORBIDDEN: tuple[Any, ...] = (
    "pytest.skip(",
    "pytest.mark.skip",
    "pytest.mark.xfail",
    "@unittest.skip",
    "pytest_plugins",
    "pluginmanager",
    {
        "pattern": "PYTEST_CURRENT_TEST",
        "exclude": list(PYTEST_TESTS),
        "message": "the code under test may not detect that a test is running",
    },
    {
        "pattern": "re:[\"']pytest[\"']\\s+(not\\s+)?in\\s+sys\\.modules",
        "exclude": list(PYTEST_TESTS),
        "message": "the code under test may not detect that pytest is running",
    },
    "re:\\bos\\._exit\\(",  # an exit that skips the test run's own report
)
_GLOB_SPECIAL = frozenset("*?[]\\!#")
# a check with any of these is not offered to the model's `run` as is: model commands run
# without a shell, and an allow pattern reads glob characters as wildcards
_NOT_PLAIN = frozenset(";&|<>$`(){}*?[]\\\n\r'\"#~!")


class _Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper, with text of several lines as a literal block (readable in a
    saved template; PyYAML falls back to quoting where a block cannot hold the text)."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


def _list(dumper: yaml.SafeDumper, value: list[Any]) -> yaml.SequenceNode:
    flow = all(isinstance(v, str) and "\n" not in v for v in value)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=flow)


_Dumper.add_representer(str, _text)
_Dumper.add_representer(list, _list)


def split_command(command: str) -> list[str]:
    """The check's words as a shell would split them; an empty or unbalanced one is a
    usage error (the check would never run)."""
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise UsageError(f"--until {command!r}: cannot read the command ({exc})") from None
    if not words:
        raise UsageError("--until: the check command is empty")
    return words


def _program(word: str) -> str:
    return os.path.basename(word)


def runs_pytest(words: Sequence[str]) -> bool:
    """Whether the command runs pytest (``pytest``, ``py.test``, ``python -m pytest``,
    ``coverage run -m pytest``, ``uv run pytest``, ...)."""
    for i, word in enumerate(words):
        if _program(word) in ("pytest", "py.test"):
            return True
        if word == "-mpytest" or (word == "-m" and words[i + 1 : i + 2] == ["pytest"]):
            return True
    return False


def candidate_paths(words: Sequence[str]) -> list[str]:
    """The words that may name a file or directory of the working directory: arguments,
    ``--opt=VALUE`` values, a pytest node id's file (``t.py::test_x``); relative ones only,
    without ``..``. Which exist is the caller's to check."""
    found: list[str] = []
    for word in words:
        if word.startswith("-"):
            if "=" not in word:
                continue
            word = word.split("=", 1)[1]
        elif "=" in word and word.split("=", 1)[0].isidentifier():
            continue  # VAR=value before the program
        path = word.split("::", 1)[0].removeprefix("./").rstrip("/")
        if not path or path.startswith(("/", "~")) or ".." in path.split("/") or path == ".":
            continue
        if path not in found:
            found.append(path)
    return found


def _literal_glob(path: str) -> str:
    """A glob matching exactly ``path`` at the root of the working directory."""
    escaped = "".join("\\" + c if c in _GLOB_SPECIAL else c for c in path)
    return "/" + escaped


def _as_data(glob: str) -> str:
    """A glob the engine renders (protect globs may use ``inputs``), kept as written:
    a Jinja string literal when it holds a brace."""
    if "{" not in glob and "}" not in glob and "%" not in glob and "#" not in glob:
        return glob
    return "{{ " + json.dumps(glob) + " }}"


def protected_globs(
    words: Sequence[str], files: Iterable[str], dirs: Iterable[str], extra: Iterable[str] = ()
) -> list[str]:
    """What the run may not change: the files and directories the command names, what
    configures its runner, and the user's own ``--protect`` globs."""
    globs = [_literal_glob(f) for f in files]
    globs += [_literal_glob(d) + "/**" for d in dirs]
    programs = {_program(w) for w in words}
    for program, names in RUNNER_FILES.items():
        if program in programs:
            globs += names
    if runs_pytest(words):
        globs += PYTEST_CONFIG + PYTEST_TESTS
    globs += list(extra)
    seen: list[str] = []
    for glob in map(_as_data, globs):
        if glob not in seen:
            seen.append(glob)
    return seen


def _plain_command(words: Sequence[str], command: str) -> bool:
    """Whether the model's ``run`` may be allowed exactly the check: plain words, no
    variable assignment before the program."""
    return not any(c in _NOT_PLAIN for c in command) and "=" not in words[0]


def until_document(
    command: str, protect: Sequence[str], *, model_may_run: bool, pytest: bool
) -> dict[str, Any]:
    """The template as data: ``command`` the check, ``protect`` the read-only globs."""
    tools = ["read_file", "write_file", "edit_file", "list_files", "search"]
    constraints: dict[str, Any] = {
        "paths": {
            "allow": ["**"],
            "deny": [".git/**", ".looprun/**", ".github/**", "**/.env", "**/.env.*"],
        },
        "protect": {"paths": list(protect)},
    }
    if model_may_run:
        tools.append("run")
        constraints["commands"] = {"allow": [command]}
    tools.append("flag_for_human")
    constraints["max_diff_lines"] = 400
    if pytest:
        constraints["forbidden_patterns"] = [
            dict(p) if isinstance(p, dict) else p for p in PYTEST_FORBIDDEN
        ]
    return {
        "looprun": 1,
        "name": "until",
        "description": "Act until the check command exits 0; its output is the feedback.",
        "inputs": {
            "intent": {
                "type": "string",
                "required": True,
                "description": "What you want done, in words.",
            },
            "check": {
                "type": "command",
                "default": command,
                "description": "The check: exit 0 is done; its output, bounded, is the feedback.",
            },
        },
        "plan": {"mode": "none"},
        "act": {
            "system": (
                "You are a careful engineer working in a git repository through tools. Make "
                "small, reviewable changes. A check runs automatically after your turn; you "
                "do not need to claim success - the check decides. If the task cannot be done "
                "as asked, say so with flag_for_human."
            ),
            "prompt": (
                "{{ task.goal }}\n\n"
                "Done means this command exits 0 (it runs after your turn):\n"
                "    {{ inputs.check }}\n"
                "Do not change the files it names or what configures it: they are read-only."
                "{% if feedback %}\n\nResult of the check after your last change:\n"
                "{{ feedback }}{% endif %}\n"
            ),
            "tools": tools,
            "max_steps": 30,
            "constraints": constraints,
        },
        "observe": {
            "check": {
                "description": "The --until command; exit 0 is done.",
                "run": "{{ inputs.check }}",
                "parser": "exit_code",
                "options": {"max_feedback": 4000},
                "timeout": "15m",
            },
        },
        "exit": ["check.ok", "policy.violations == 0"],
        "refine": [
            {
                "id": "policy_violation",
                "if": "policy.violations > 0",
                "then": {
                    "rollback": "previous",
                    "feedback": "Your last change broke a rule and was undone:\n"
                    "{{ policy.summary }}",
                },
            },
            {
                "id": "repeated",
                "if": "progress.repeats >= 2",
                "then": {
                    "retry": "The same result again: your approach is not working.\nStep "
                    "back, re-read the failing code and try a different approach.\n"
                    "{{ check.feedback }}"
                },
            },
            {"id": "fallback", "else": {"retry": "{{ check.feedback }}"}},
        ],
        "limits": {
            "max_iterations": 10,
            "max_tokens": 400000,
            "timeout": "30m",
            "max_cost_usd": 3.0,
            "per_tool": {"run": 30},
            "max_repeats": 3,
        },
        "context": {"budget_tokens": 24000, "recent_rounds": 3},
    }


def until_template(command: str, files: Iterable[str], dirs: Iterable[str],
                   extra_protect: Iterable[str] = ()) -> str:  # fmt: skip
    """The template's YAML text for ``looprun --until command`` (``files``/``dirs``: the
    command's words that name them in the working directory)."""
    words = split_command(command)
    pytest = runs_pytest(words)
    protect = protected_globs(words, files, dirs, extra_protect)
    document = until_document(
        command, protect, model_may_run=_plain_command(words, command), pytest=pytest
    )
    body = yaml.dump(document, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=88)
    return (
        "# The loop `looprun --until` runs: edit it like any template, run it with\n"
        "# `looprun FILE --intent TEXT`.\n" + body
    )
