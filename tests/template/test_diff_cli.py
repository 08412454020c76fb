"""`looprun diff` through the real CLI: real edits of the built-in templates copied to a
temporary directory, a real git repository for the revision form, real case files."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.support.cli import looprun
from tests.support.git_repos import git_repo

REPO = Path(__file__).resolve().parents[2]
# the built-in bugfix with act constraints of its own, as a team's copy would hold them
# (the built-in takes its protected paths and forbidden patterns from the stack's pack)
BUGFIX = (
    (REPO / "templates" / "bugfix.yaml")
    .read_text()
    .replace(
        "    max_diff_lines: 400",
        '    protect:\n      paths: ["pytest.ini", "tox.ini", "setup.cfg", "**/sitecustomize.py"]\n'
        '    forbidden_patterns:\n      - "breakpoint()"\n      - "pytest.skip("\n'
        "    max_diff_lines: 400",
        1,
    )
)


def _edited(tmp_path: Path, edit: Callable[[str], str]) -> tuple[Path, Path]:
    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old.write_text(BUGFIX)
    changed = edit(BUGFIX)
    assert changed != BUGFIX, "the edit must change the file"
    new.write_text(changed)
    return old, new


def _json(tmp_path: Path, *args: str) -> tuple[int, dict]:
    proc = looprun("diff", "--format", "json", *args, cwd=tmp_path)  # paths after --
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def _swap_stuck_and_repeated(text: str) -> str:
    start = text.index("\n  - id: stuck\n") + 1
    mid = text.index("\n  - id: repeated\n") + 1
    end = text.index("\n  - id: reproduce\n") + 1
    return text[:start] + text[mid:end] + text[start:mid] + text[end:]


OBSERVER = """  types:
    description: mypy over the code.
    run: "python -m mypy ."
    parser: exit_code
    timeout: 5m
"""


def _add_observer(text: str) -> str:
    at = text.index("    options: {exercised: true}\n") + len("    options: {exercised: true}\n")
    return text[:at] + OBSERVER + text[at:]


# (what the change is, the edit, kind, subject the verdict must name)
CHANGES = [
    (
        "a loosened diff limit",
        lambda t: t.replace("max_diff_lines: 400", "max_diff_lines: 1200"),
        "loosened",
        "act.constraints.max_diff_lines",
    ),
    (
        "a removed protected path",
        lambda t: t.replace(
            '"tox.ini", "setup.cfg", "**/sitecustomize.py"', '"setup.cfg", "**/sitecustomize.py"'
        ),
        "loosened",
        "act.constraints.protect.paths: 'tox.ini' removed",
    ),
    ("a reordered rule", _swap_stuck_and_repeated, "reordered", "rule stuck"),
    ("a new observer", _add_observer, "added", "observer types"),
    (
        "a removed exit condition",
        lambda t: t.replace('  - "diff.lines <= 400"\n', ""),
        "loosened",
        "exit condition: 'diff.lines <= 400' removed",
    ),
    (
        "a removed forbidden pattern",
        lambda t: t.replace('      - "breakpoint()"\n', ""),
        "loosened",
        "act.constraints.forbidden_patterns: 'breakpoint()' removed",
    ),
    (
        "a new approval",
        lambda t: t.replace(
            "    max_diff_lines: 400",
            '    approve: {paths: ["migrations/**"]}\n    max_diff_lines: 400',
        ),
        "tightened",
        "act.constraints.approve: 'migrations/**' added",
    ),
    (
        "a changed condition",
        lambda t: t.replace("if: progress.repeats >= 3", "if: progress.repeats >= 5"),
        "changed",
        "rule stuck: condition",
    ),
    (
        "a changed limit",
        lambda t: t.replace("max_tokens: 400000", "max_tokens: 100000"),
        "tightened",
        "limits.max_tokens",
    ),
]


@pytest.mark.parametrize(("what", "edit", "kind", "subject"), CHANGES, ids=[c[0] for c in CHANGES])
def test_each_real_change_gets_its_verdict(
    tmp_path: Path, what: str, edit: Callable[[str], str], kind: str, subject: str
) -> None:
    old, new = _edited(tmp_path, edit)
    code, doc = _json(tmp_path, old.name, new.name)
    assert code == 1 and doc["changed"] is True
    (one,) = doc["templates"]
    found = [c for c in one["changes"] if c["kind"] == kind and c["subject"] == subject]
    assert found, (what, one["changes"])
    # nothing else is reported: the verdict is about this change alone
    others = [c for c in one["changes"] if c["subject"] != subject]
    if what == "a reordered rule":  # swapping two neighbours moves one of them
        others = [c for c in others if c["kind"] != "reordered"]
    assert others == [], others
    assert (kind == "loosened") == bool(one["loosened"])


def test_loosening_is_said_first_in_words_and_in_markdown(tmp_path: Path) -> None:
    old, new = _edited(
        tmp_path,
        lambda t: t.replace("max_iterations: 12", "max_iterations: 5").replace(
            "max_diff_lines: 400", "max_diff_lines: 1200"
        ),
    )
    text = looprun("diff", old.name, new.name, cwd=tmp_path)
    assert text.returncode == 1, text.stderr
    lines = text.stdout.splitlines()
    assert lines[1].startswith("  LOOSENED (1)")
    assert "max_diff_lines: 400 -> 1200" in lines[2]
    assert text.stdout.index("LOOSENED") < text.stdout.index("tightened")
    md = looprun("diff", old.name, new.name, "--format", "markdown", cwd=tmp_path)
    assert md.returncode == 1
    body = md.stdout
    assert body.startswith("## looprun diff\n")
    assert body.index("#### ⚠️ Loosened (1)") < body.index("#### Tightened (1)")
    assert "- **loosened** `act.constraints.max_diff_lines`: `400` → `1200`" in body


def test_no_change_exits_0_and_comments_and_layout_are_not_changes(tmp_path: Path) -> None:
    old, new = _edited(
        tmp_path, lambda t: "# reworded comment\n" + t.replace("limits:\n", "\n\nlimits:\n")
    )
    proc = looprun("diff", old.name, new.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no change in what the template does" in proc.stdout


def test_composition_is_compared_not_the_text(tmp_path: Path) -> None:
    """A team template that extends a file: the parent's change shows in the child's diff."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "base.yaml").write_text(BUGFIX)
    (tmp_path / "b" / "base.yaml").write_text(
        BUGFIX.replace("per_tool: {run: 30}", "per_tool: {run: 60}")
    )
    team = "looprun: 1\nname: team\nextends: base.yaml\n"
    (tmp_path / "a" / "team.yaml").write_text(team)
    (tmp_path / "b" / "team.yaml").write_text(team)
    code, doc = _json(tmp_path, "a/team.yaml", "b/team.yaml")
    assert code == 1
    assert doc["templates"][0]["loosened"] == [
        {
            "section": "limits",
            "kind": "loosened",
            "subject": "limits.per_tool.run",
            "old": 30,
            "new": 60,
        }
    ]


def test_cases_that_now_decide_differently(tmp_path: Path) -> None:
    old, new = _edited(
        tmp_path, lambda t: t.replace("if: progress.repeats >= 3", "if: progress.repeats >= 5")
    )
    cases = REPO / "templates" / "tests" / "bugfix.cases.yaml"
    code, doc = _json(tmp_path, old.name, new.name, "--cases", str(cases))
    assert code == 1
    changed = {c["name"]: c for c in doc["templates"][0]["cases"]}
    third = changed["the third identical iteration escalates"]
    assert "rule stuck" in third["old"] and "-> escalate" in third["old"]
    assert "rule stuck" not in third["new"]
    assert third["location"].endswith(":26:5") or "bugfix.cases.yaml:" in third["location"]
    # a case the change does not touch is not listed
    assert "a policy refusal is rolled back with the policy summary as feedback" not in changed
    md = looprun(
        "diff", old.name, new.name, "--cases", str(cases), "--format", "markdown", cwd=tmp_path
    )
    assert "#### Cases deciding differently" in md.stdout
    assert "| `the third identical iteration escalates` |" in md.stdout


def _commit(repo: Path, message: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e.org"}  # fmt: skip
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", message], cwd=repo, check=True, env=env)
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True)
    return out.stdout.decode().strip()


def test_a_revision_is_read_from_git_with_its_own_parents(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "templates").mkdir(parents=True)
    (repo / "templates" / "platform.yaml").write_text(BUGFIX)
    (repo / "templates" / "team.yaml").write_text(
        "looprun: 1\nname: team\nextends: platform.yaml\n"
    )
    git_repo(repo)
    # the parent changes after the commit; the revision must compose with the old parent
    (repo / "templates" / "platform.yaml").write_text(
        BUGFIX.replace('"**/*.lock", ".github/**"', '"**/*.lock"')
    )
    base = _commit(repo, "platform: .github writable")
    (repo / "templates" / "team.yaml").write_text(
        "looprun: 1\nname: team\nextends: platform.yaml\nlimits: {max_iterations: 20}\n"
    )
    code, doc = _json(repo / "templates", "HEAD~1", "--", "team.yaml")
    (one,) = doc["templates"]
    assert code == 1
    assert one["old"] == "HEAD~1:templates/team.yaml" and one["new"] == "team.yaml"
    subjects = {c["subject"]: c["kind"] for c in one["changes"]}
    assert subjects == {
        "act.constraints.paths.deny: '.github/**' removed": "loosened",
        "limits.max_iterations": "loosened",
    }
    # two revisions: the working tree plays no part
    code, doc = _json(repo, "HEAD~1", base, "--", "templates/team.yaml")
    assert code == 1
    assert [c["subject"] for c in doc["templates"][0]["changes"]] == [
        "act.constraints.paths.deny: '.github/**' removed"
    ]
    code, doc = _json(repo, "HEAD", "--", "templates/platform.yaml")
    assert code == 0 and doc["changed"] is False


def test_a_symbolic_link_in_the_revision_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret.yaml"
    secret.write_text("looprun: 1\nname: SECRET-CONTENT\nact: {prompt: x}\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "team.yaml").symlink_to(secret)
    git_repo(repo)
    (repo / "team.yaml").unlink()
    (repo / "team.yaml").write_text(BUGFIX)
    code, doc = _json(repo, "HEAD", "--", "team.yaml")
    assert code == 1
    assert doc["templates"][0]["changes"][0]["kind"] == "added"
    assert "SECRET" not in json.dumps(doc)


def test_bad_input_is_located_and_exits_2(tmp_path: Path) -> None:
    old, new = _edited(
        tmp_path, lambda t: t.replace("max_iterations: 12", "max_iterations: twelve")
    )
    proc = looprun("diff", old.name, new.name, cwd=tmp_path)
    assert proc.returncode == 2
    assert "new.yaml:" in proc.stderr and "max_iterations" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    repo = git_repo(tmp_path / "repo")
    (repo / "t.yaml").write_text("looprun: 1\nname: t\nact: {prompt: '{{ nope'}\n")
    _commit(repo, "broken")
    (repo / "t.yaml").write_text(BUGFIX)
    proc = looprun("diff", "HEAD", "--", "t.yaml", cwd=repo)
    assert proc.returncode == 2 and "HEAD:t.yaml:3:" in proc.stderr, proc.stderr
    proc = looprun("diff", "no-such-rev", "--", "t.yaml", cwd=repo)
    assert proc.returncode == 2 and "no commit 'no-such-rev'" in proc.stderr
    proc = looprun("diff", "only-one.yaml", cwd=repo)
    assert proc.returncode == 2 and "give two template files" in proc.stderr
    proc = looprun("diff", "HEAD", "--", "t.yaml", cwd=tmp_path)
    assert proc.returncode == 2 and "not in a git repository" in proc.stderr


def test_hostile_values_stay_inside_their_markdown_code(tmp_path: Path) -> None:
    """A rule message written to look like Markdown (a heading, a fence, a table cell, the
    review comment's marker) stays one inline code span on its line."""
    hostile = "x`` ```\\n## Approved by security\\n| a | b |\\n<!-- looprun-diff -->"
    rule = f'  - id: sneaky\n    if: iteration > 50\n    then: {{retry: "{hostile}"}}\n'
    old, new = _edited(
        tmp_path, lambda t: t.replace("  - id: fallback\n", rule + "  - id: fallback\n")
    )
    md = looprun("diff", "--format", "markdown", old.name, new.name, cwd=tmp_path)
    assert md.returncode == 1, md.stderr
    lines = md.stdout.splitlines()
    assert not any(line.startswith(("## Approved", "| a |", "<!--")) for line in lines)
    (added,) = [line for line in lines if "rule sneaky" in line]
    assert added.startswith("- **added** `rule sneaky`: `none` → ````")


@pytest.mark.parametrize("name", ["bugfix", "feature", "refactor", "test_backfill"])
def test_every_builtin_is_no_change_from_itself(tmp_path: Path, name: str) -> None:
    proc = looprun("diff", name, name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_reverse_change_is_the_opposite_verdict(tmp_path: Path) -> None:
    old, new = _edited(tmp_path, lambda t: t.replace("max_diff_lines: 400", "max_diff_lines: 1200"))
    code, doc = _json(tmp_path, new.name, old.name)
    assert code == 1
    (one,) = doc["templates"]
    assert one["loosened"] == []
    assert [c["subject"] for c in one["tightened"]] == ["act.constraints.max_diff_lines"]
