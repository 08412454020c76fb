"""The node pack's inputs, read from the repository at the run's base: which test runner
package.json's ``scripts.test`` runs (each needs its own reporter wiring), and whether the
TypeScript check and ESLint can run.

Read from the base, once, before any model call, and recorded with the run: a test script
the model edits later changes neither what the check runs (package.json is pinned) nor how
its report is read. A script looprun cannot read (mocha, an unknown command, two runners,
none) stops the run with the choice left to the user: ``--set runner=NAME``.
"""

from __future__ import annotations

import json
import shlex

from looprun.checks.stacks.base import Setting, SetupInput
from looprun.errors import UsageError

RUNNERS = ("node", "vitest", "jest")
_CHOOSE = (
    "choose with --set runner=node|vitest|jest if the script runs one of them "
    "(node: `node --test`, vitest 3, jest 29; vitest's and jest's command last in the "
    "script, which gets the reporters appended)"
)
# runners whose report looprun cannot read: named, never guessed around
_UNSUPPORTED = frozenset(
    {
        "mocha",
        "_mocha",
        "ava",
        "tap",
        "tape",
        "karma",
        "jasmine",
        "playwright",
        "cypress",
        "uvu",
        "lab",
        "c8",
        "nyc",
    }
)
_PACKAGE_MANAGERS = frozenset({"npm", "pnpm", "yarn", "bun"})
# run the command after them (and their options): npx, env setters, coverage tools
_WRAPPERS = frozenset({"npx", "cross-env", "env", "dotenv", "nyc", "c8"})
_SEPARATORS = frozenset({"&&", "||", ";", "|", "&", ";;", "(", ")"})


def settings(at: SetupInput) -> tuple[Setting, ...]:
    """The runner and the lint checks (tsc, ESLint), for the inputs the template declares:
    read from the base, or what ``--set`` chose (the caller keeps the user's)."""
    out: list[Setting] = []
    if "runner" in at.declared:
        given = at.given.get("runner")
        if given is None:
            out.append(runner_setting(at.read("package.json")))
        elif given in RUNNERS:
            out.append(Setting("runner", given, "--set runner"))
        else:
            raise UsageError(f"--set runner={given}: not a runner (runners: {', '.join(RUNNERS)})")
    if "lint" in at.declared:
        out.extend(_checks(at))
    return tuple(out)


def runner_setting(package: bytes | None) -> Setting:
    """``runner`` from package.json's bytes at the base; UsageError when it cannot be told."""
    script = test_script(package)
    runner = runner_of(script)
    return Setting("runner", runner, f"package.json's test script at the run's base: \"{script}\"")


def test_script(package: bytes | None) -> str:
    if package is None:
        raise UsageError(f"no package.json at the repository's root: no test script; {_CHOOSE}")
    try:
        doc = json.loads(package.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise UsageError(f"package.json: not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"package.json:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})"
        ) from None
    scripts = doc.get("scripts") if isinstance(doc, dict) else None
    script = scripts.get("test") if isinstance(scripts, dict) else None
    if not isinstance(script, str) or not script.strip():
        raise UsageError(f"package.json has no scripts.test: no test script to run; {_CHOOSE}")
    return script.strip()


def runner_of(script: str) -> str:
    """The one runner ``script`` runs; UsageError for none, two, or one looprun cannot read."""
    commands = _commands(script)
    found = [(i, r) for i, cmd in enumerate(commands) if (r := _runner(cmd))]
    shown = f'package.json\'s test script "{script}"'
    bad = sorted({r for _, r in found if r not in RUNNERS})
    if bad:
        raise UsageError(
            f"{shown} runs {', '.join(bad)}, whose results looprun cannot read; {_CHOOSE}"
        )
    if not found:
        raise UsageError(f"{shown} runs no test runner looprun knows; {_CHOOSE}")
    if len(found) > 1:
        names = " and ".join(r for _, r in found)
        raise UsageError(f"{shown} runs more than one test runner ({names}); {_CHOOSE}")
    index, runner = found[0]
    if runner != "node" and index != len(commands) - 1:
        raise UsageError(
            f"{shown} runs {runner} before another command: the reporters appended to "
            f"the script would reach that command instead; {_CHOOSE}"
        )
    return runner


def _commands(script: str) -> list[list[str]]:
    """The script's simple commands, as words (shell operators split them)."""
    lexer = shlex.shlex(script, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:  # an unbalanced quote: one command of its words
        words = script.split()
    out: list[list[str]] = [[]]
    for word in words:
        if word in _SEPARATORS:
            out.append([])
        else:
            out[-1].append(word)
    return [c for c in out if c]


def _runner(words: list[str]) -> str | None:
    """The runner one command runs (unsupported ones by their name), else None."""
    words = _unwrapped(words)
    if not words:
        return None
    head = _program(words[0])
    if head in _PACKAGE_MANAGERS:
        # `npm run unit` runs another script, whose arguments npm would not pass on
        runs_script = len(words) > 1 and words[1] in ("run", "exec", "x")
        return "another package script" if runs_script else None
    if head == "node":
        if "--test" in words[1:]:
            return "node"
        script = next((w for w in words[1:] if not w.startswith("-")), "")
        name = _program(script).removesuffix(".js").removesuffix(".mjs")
        return _named(name)
    return _named(head)


def _named(name: str) -> str | None:
    if name in ("vitest", "jest"):
        return name
    return name if name in _UNSUPPORTED else None


def _unwrapped(words: list[str]) -> list[str]:
    """Without leading variable assignments and wrappers (npx, cross-env, env)."""
    i = 0
    while i < len(words) and (_assigns(words[i]) or _wraps(words[i])):
        i += 1
        if _program(words[i - 1]) in _WRAPPERS:
            while i < len(words) and words[i].startswith("-"):
                i += 1
    return words[i:]


def _assigns(word: str) -> bool:
    return "=" in word and not word.startswith("-") and word.split("=", 1)[0].isidentifier()


def _wraps(word: str) -> bool:
    return _program(word) in _WRAPPERS or word in ("--", "-y", "--yes", "--no-install")


def _program(word: str) -> str:
    """``node_modules/.bin/jest`` -> ``jest``; ``node_modules/jest/bin/jest.js`` -> ``jest``."""
    parts = word.replace("\\", "/").rstrip("/").split("/")
    if len(parts) >= 3 and parts[-2] == "bin" and parts[-3] not in (".bin", "node_modules"):
        return parts[-3]
    return parts[-1]


# where ESLint finds a project's configuration at its root: a flat config, a legacy
# .eslintrc file, or package.json's `eslintConfig` key
ESLINT_CONFIGS = (
    *(f"eslint.config.{ext}" for ext in ("js", "mjs", "cjs", "ts", "mts", "cts")),
    *(f".eslintrc.{ext}" for ext in ("js", "cjs", "yaml", "yml", "json")),
    ".eslintrc",
)
SETUP_READS = ("package.json", "tsconfig.json", *ESLINT_CONFIGS)  # what settings() reads


def _checks(at: SetupInput) -> list[Setting]:
    """``typecheck`` and ``eslint`` (where the template declares them) and ``lint``, the
    switch of the check that runs them: on when either can run. What ``--set`` chose wins;
    a configuration without its tool is said, and that check stays off."""
    out: list[Setting] = []
    on: list[str] = []
    found = {"typecheck": _type_check(at)}
    if "eslint" in at.declared:
        found["eslint"] = _eslint(at)
    for name, (value, why) in found.items():
        given = at.given.get(name)
        if given is not None:
            value, why = given, f"--set {name}"
        if value == "true":
            on.append(why)
        if name in at.declared:
            out.append(Setting(name, value, why))
        elif value is None and why:
            out.append(Setting("lint", None, why))
    given = at.given.get("lint")
    if given is not None:
        out.append(Setting("lint", given, "--set lint"))
    elif on:
        out.append(Setting("lint", "true", "; ".join(on)))
    return [s for s in out if s.value is not None or s.why]


def _type_check(at: SetupInput) -> tuple[str | None, str]:
    """On when the base has a root tsconfig.json and the project's own tsc is installed; a
    tsconfig.json without tsc is said, and the check stays off."""
    if at.read("tsconfig.json") is None:
        return None, ""
    tsc = at.workdir / "node_modules" / ".bin" / "tsc"
    if tsc.is_file():
        return "true", "tsconfig.json at the run's base, node_modules/.bin/tsc"
    return (
        None,
        "off: tsconfig.json at the run's base but no node_modules/.bin/tsc "
        "(npm install typescript to type-check)",
    )


def _eslint(at: SetupInput) -> tuple[str | None, str]:
    """On when the base configures ESLint at its root and the project's own eslint is
    installed; a configuration without eslint is said, and the check stays off."""
    config = next((name for name in ESLINT_CONFIGS if at.read(name) is not None), None)
    if config is None and _has_eslint_config_key(at.read("package.json")):
        config = "package.json's eslintConfig"
    if config is None:
        return None, ""
    if (at.workdir / "node_modules" / ".bin" / "eslint").is_file():
        return "true", f"{config} at the run's base, node_modules/.bin/eslint"
    return (
        None,
        f"off: {config} at the run's base but no node_modules/.bin/eslint "
        "(npm install eslint to lint)",
    )


def _has_eslint_config_key(package: bytes | None) -> bool:
    try:
        doc = json.loads((package or b"").decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(doc, dict) and "eslintConfig" in doc
