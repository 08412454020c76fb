"""The facts each built-in parser provides, each with its value when nothing could be read.

Parsers fill these in; the registry declares their names from here, so validating a
template never imports a parser module. Fact names beyond ``COMMON_FACTS``.
"""

from __future__ import annotations

from typing import Any

JUNIT: dict[str, Any] = {
    "tests": 0,
    "passed": 0,
    "failed": 0,
    "errors": 0,
    "skipped": 0,
    "failing": [],
    "passing": [],
    "flaky": [],
    "failure_types": {},
    # failing id -> the project files its body ran code from (option `exercised`, pytest)
    "exercised": {},
    # failing id -> why the test raised its failure itself (option `exercised`, pytest)
    "self_raised": {},
    "failure_files": {},
    # nothing read, nothing disagreeing: an unreadable report is `ok: false` on its own
    "consistent": True,
    "tampering": "",
}
SARIF: dict[str, Any] = {
    "errors": 0,
    "warnings": 0,
    "notes": 0,
    "total": 0,
    "suppressed": 0,
    "rules": {},
    "files": {},
    "tool_errors": 0,
    "finding_keys": [],
}
COVERAGE: dict[str, Any] = {
    "percent": 0.0,
    "branch_percent": None,
    "lines_valid": 0,
    "lines_covered": 0,
    "files_measured": 0,
    "files": {},
    "target_percent": None,
    "targets": {},
}
GIT_DIFF: dict[str, Any] = {
    "files_changed": 0,
    "added": 0,
    "removed": 0,
    "lines": 0,
    "files": [],
    "outside": [],
    "forbidden": [],
    "binary": [],
    "files_added": [],
    "files_deleted": [],
    # file -> [[first, last], ...]: new-file lines added, or where lines were removed
    "changed_lines": {},
}
EXIT_CODE: dict[str, Any] = {"output_tail": "", "timed_out": False}
REGEX_DIAGNOSTICS: dict[str, Any] = {"errors": 0, "warnings": 0, "notes": 0, "total": 0}
# the pytest preset also reports test counts; no other preset can fill these
REGEX_TESTS: dict[str, Any] = {"tests": 0, "passed": 0, "failed": 0, "skipped": 0, "failing": []}
REGEX: dict[str, Any] = {**REGEX_DIAGNOSTICS, **REGEX_TESTS}
DIAGNOSTICS: dict[str, Any] = {**REGEX_DIAGNOSTICS, "files": 0}
DIAGNOSTIC_FORMATS: tuple[str, ...] = ("mypy", "pyright", "eslint")

# The options each built-in parser reads (every one also takes ``max_feedback``), and the
# values an option must take when only a few mean anything. Checked when a template loads
# and by ``looprun observe``, so ``options: {minimum: 80}`` is an error, not a gate that
# never closes.
# `exercised`: note which project files each failing test ran (where the runner can tell;
# a parser that cannot leaves `exercised` empty, which restricts nothing)
COMMON_OPTIONS: frozenset[str] = frozenset({"max_feedback", "exercised"})
OPTIONS: dict[str, frozenset[str]] = {
    # judge_raised: the engine judges where each failure was raised (`self_raised`) from
    # the report's tracebacks and the tree's files
    "junit": frozenset({"outcome_channel", "exercised", "judge_raised"}),
    # exercised: accepted for the templates that ask it of any runner; node cannot tell
    "node_test": frozenset({"exercised"}),
    "surefire": frozenset(),
    "sarif": frozenset({"fail_on"}),
    "coverage": frozenset({"min", "paths"}),
    "git_diff": frozenset({"allow", "deny", "forbidden_patterns", "max_lines"}),
    "exit_code": frozenset(),
    "regex": frozenset({"preset", "pattern", "fail_on"}),
    "json": frozenset({"facts", "ok", "trust"}),
    "diagnostics": frozenset({"format", "fail_on"}),
    "go_test": frozenset(),
    "cargo_test": frozenset(),
    "cargo_diagnostics": frozenset({"fail_on"}),
}
REGEX_PRESETS: tuple[str, ...] = (
    "mypy",
    "pyright",
    "tsc",
    "eslint",
    "eslint-stylish",
    "eslint-compact",
    "gcc",
    "clang",
    "rustc",
    "go-vet",
    "pytest",
)
OPTION_VALUES: dict[tuple[str, str], tuple[str, ...]] = {
    ("junit", "outcome_channel"): ("pytest",),
    ("sarif", "fail_on"): ("error", "warning", "note"),
    ("regex", "fail_on"): ("error", "warning", "note"),
    ("regex", "preset"): REGEX_PRESETS,
    ("diagnostics", "format"): DIAGNOSTIC_FORMATS,
    ("diagnostics", "fail_on"): ("error", "warning", "note"),
    ("cargo_diagnostics", "fail_on"): ("error", "warning", "note"),
    ("json", "trust"): ("exit_zero",),
}


def preset_facts(parser: str, options: Any) -> dict[str, Any] | None:
    """The facts a parser gives with these options, when they depend on them: the regex
    parser fills test counts only for the pytest preset; the json parser gives the facts
    its ``facts`` option names."""
    if parser == "json":
        named = options.get("facts") if isinstance(options, dict) else None
        return {str(k): None for k in named} if isinstance(named, dict) else None
    if parser != "regex":
        return None
    preset = options.get("preset") if isinstance(options, dict) else None
    return REGEX if preset == "pytest" else REGEX_DIAGNOSTICS
