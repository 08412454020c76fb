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
    "flaky": [],
}
SARIF: dict[str, Any] = {
    "errors": 0,
    "warnings": 0,
    "notes": 0,
    "total": 0,
    "rules": {},
    "files": {},
    "tool_errors": 0,
}
COVERAGE: dict[str, Any] = {
    "percent": 0.0,
    "branch_percent": None,
    "lines_valid": 0,
    "lines_covered": 0,
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
}
EXIT_CODE: dict[str, Any] = {"output_tail": "", "timed_out": False}
REGEX: dict[str, Any] = {
    "errors": 0,
    "warnings": 0,
    "notes": 0,
    "total": 0,
    # the pytest preset also reports test counts
    "tests": 0,
    "passed": 0,
    "failed": 0,
    "skipped": 0,
    "failing": [],
}
