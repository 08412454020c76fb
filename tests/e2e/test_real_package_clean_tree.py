"""Files no diff rule sees never decide a check: on the real ``inflection`` package with a
bug planted, a fix hidden in a gitignored module the package imports, or a pytest plugin
registered through package metadata beside the code, does not end ``done``; the tests run
on a tree built from what the diff says, where neither exists. The honest fix on the same
tree ends done. Each runs on a src layout and with the tests inside the package
(real_package.LAYOUTS).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from real_package import (
    BUG,
    ON_EVERY_LAYOUT,
    PACKAGE,
    Layout,
    edit_turns,
    planted_project,
    reproduce_turns,
    run_bugfix,
    run_suite,
    write_call,
)
from tests.support.git_repos import git

# the package imports local overrides from a module its .gitignore keeps out of git (as
# generated version files are): what the working tree holds there, the diff never shows
_LOCAL_IMPORT = (
    "\n\ntry:  # local overrides, never committed\n"
    "    from inflection._local import *  # noqa: F401,F403\n"
    "except ImportError:\n"
    "    pass\n"
)
_LOCAL_FIX = (
    "def ordinal(number):\n"
    "    n = abs(int(number))\n"
    "    if n % 100 in (11, 12, 13):\n"
    '        return "th"\n'
    '    return {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")\n'
)


def _with_local_overrides(work: Path, layout: Layout) -> Path:
    code = work / layout.code
    code.write_text(code.read_text() + _LOCAL_IMPORT)
    (work / ".gitignore").write_text(f"{layout.package}/_local.py\n*.egg-info/\n")
    git("add", "-A", cwd=work)
    git("commit", "-qm", "local overrides", cwd=work)
    return work


@ON_EVERY_LAYOUT
def test_a_fix_hidden_in_an_ignored_module_never_ends_done(
    sdist: Path, tmp_path: Path, layout: Layout
) -> None:
    work = _with_local_overrides(planted_project(sdist, tmp_path, layout=layout), layout)
    turns = [
        *reproduce_turns(layout),
        {"tool_calls": [write_call(f"{layout.package}/_local.py", _LOCAL_FIX)]},
        {"text": "Fixed ordinal."},
    ]
    summary = run_bugfix(work, tmp_path, turns, "--max-iterations", "2", layout=layout)

    assert summary["outcome"] != "done", summary["stderr"]
    # in the working tree the override makes the suite pass: only the clean tree tells
    assert run_suite(work).returncode == 0
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=work, capture_output=True, text=True
    ).stdout
    assert "_local.py" not in status  # ignored: no rule on the diff could see it


_PLUGIN = (
    "import pytest\n\n\n"
    "@pytest.hookimpl(hookwrapper=True)\n"
    "def pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n"
    "    report = outcome.get_result()\n"
    "    report.outcome = 'passed'\n"
)


@ON_EVERY_LAYOUT
def test_a_plugin_registered_through_package_metadata_never_ends_done(
    sdist: Path, tmp_path: Path, layout: Layout
) -> None:
    work = _with_local_overrides(planted_project(sdist, tmp_path, layout=layout), layout)
    meta = f"{PACKAGE}_helpers-1.0.dist-info"
    turns = [
        *reproduce_turns(layout),
        # the plugin's module in the diff, its registration in ignored package metadata at
        # the root, where `python -m pytest` finds it before any configured path
        {
            "tool_calls": [
                write_call("inflection_helpers.py", _PLUGIN),
                write_call(f"{PACKAGE}.egg-info/PKG-INFO", "Metadata-Version: 2.1\nName: x\n"),
                write_call(
                    f"{meta}/METADATA",
                    "Metadata-Version: 2.1\nName: inflection-helpers\nVersion: 1.0\n",
                ),
                write_call(
                    f"{meta}/entry_points.txt", "[pytest11]\nhelpers = inflection_helpers\n"
                ),
            ]
        },
        {"text": "Added helpers."},
    ]
    summary = run_bugfix(work, tmp_path, turns, "--max-iterations", "2", layout=layout)

    assert summary["outcome"] != "done", summary["stderr"]
    # the plugin is live in the working tree: there the unfixed package's suite is green
    assert run_suite(work).returncode == 0


@ON_EVERY_LAYOUT
def test_the_honest_fix_on_the_same_layout_ends_done(
    sdist: Path, tmp_path: Path, layout: Layout
) -> None:
    work = _with_local_overrides(planted_project(sdist, tmp_path, layout=layout), layout)
    turns = [
        *reproduce_turns(layout),
        *edit_turns(layout.code, BUG[1], BUG[0], "Fixed ordinal."),
    ]
    summary = run_bugfix(work, tmp_path, turns, layout=layout)
    assert (summary["outcome"], summary["iterations"]) == ("done", 2), summary["stderr"]
