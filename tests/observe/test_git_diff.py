from __future__ import annotations

from pathlib import Path

import pytest
from observe_helpers import run, write

from looprun.checks.git_diff import with_git_output
from looprun.observe.base import ParseInput
from looprun.observe.git_diff import GitDiffParser, GitOutput


def git(root: Path, *args: str) -> str:
    proc = run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], root)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q", "-b", "main")
    write(tmp_path, {"src/a.py": "x = 1\ny = 2\n", "tests/test_a.py": "def test():\n    pass\n"})
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "base")
    return tmp_path


def observe(data: ParseInput):
    """git asked by checks/, its output read by the pure parser: what the runner does."""
    return GitDiffParser().parse(with_git_output(data))


def parse(root: Path, **options):
    return observe(ParseInput(workdir=root, options=options))


def test_changes_outside_forbidden_binary_and_index_untouched(repo):
    write(repo, {"src/a.py": "x = 1\nbreakpoint()\ny = 3\n", "docs/new.md": "hi\n"})
    (repo / "src" / "blob.bin").write_bytes(b"\x00\x01\x02" * 10)
    (repo / "tests" / "test_a.py").unlink()
    git(repo, "add", "src/a.py")  # the user's own staging must survive
    staged_before = git(repo, "diff", "--cached", "--name-only")
    obs = parse(
        repo, allow=["src/**", "tests/**"], forbidden_patterns=["breakpoint()", "re:y = \\d"]
    )
    assert git(repo, "diff", "--cached", "--name-only") == staged_before == "src/a.py\n"
    assert not obs.ok
    assert sorted(obs.facts["files"]) == [
        "docs/new.md",
        "src/a.py",
        "src/blob.bin",
        "tests/test_a.py",
    ]
    assert list(obs.facts["outside"]) == ["docs/new.md"]
    assert list(obs.facts["binary"]) == ["src/blob.bin"]
    assert list(obs.facts["files_deleted"]) == ["tests/test_a.py"]
    hits = {(h["file"], h["line"], h["pattern"]) for h in obs.facts["forbidden"]}
    assert hits == {("src/a.py", 2, "breakpoint()"), ("src/a.py", 3, "re:y = \\d")}
    # added: breakpoint(), y = 3, hi = 3 lines; removed: y = 2 and the 2 test lines
    assert (obs.counts["added"], obs.counts["removed"], obs.counts["lines"]) == (3, 3, 6)
    assert "src/a.py:2" in obs.feedback and "docs/new.md" in obs.feedback


def test_clean_tree_and_limits(repo):
    assert parse(repo).ok and parse(repo).counts["files_changed"] == 0
    write(repo, {"src/a.py": "".join(f"v{i} = {i}\n" for i in range(20))})
    assert parse(repo, max_lines=100).ok
    small = parse(repo, max_lines=5)
    assert not small.ok and "max_lines=5" in small.feedback
    assert not parse(repo, deny=["src/a.py"]).ok


def test_base_and_untracked_and_not_a_repo(repo, tmp_path_factory):
    base = git(repo, "rev-parse", "HEAD").strip()
    write(repo, {"new.txt": "one\n"})
    git(repo, "add", "new.txt")
    git(repo, "commit", "-q", "-m", "second")
    obs = observe(ParseInput(workdir=repo, base=base))
    assert list(obs.facts["files_added"]) == ["new.txt"]
    plain = tmp_path_factory.mktemp("plain")
    bad = parse(plain)
    assert not bad.ok and "not a git repository" in bad.error


def test_the_parser_reads_only_the_git_output_handed_in(tmp_path):
    given = GitOutput(
        numstat="2\t1\tsrc/a.py\0-\t-\tlogo.png\0",
        status="M\0src/a.py\0A\0logo.png\0",
        patch="diff --git a/src/a.py b/src/a.py\n--- a/src/a.py\n+++ b/src/a.py\n"
        "@@ -1 +1,2 @@\n-x = 1\n+x = 2\n+breakpoint()\n",
    )
    data = ParseInput(
        workdir=tmp_path / "not-a-repo",
        options={"allow": ["src/**"], "forbidden_patterns": ["breakpoint()"]},
        git_output=given,
    )
    obs = GitDiffParser().parse(data)
    assert list(obs.facts["files"]) == ["src/a.py", "logo.png"]
    assert list(obs.facts["outside"]) == ["logo.png"]
    assert list(obs.facts["files_added"]) == ["logo.png"]
    assert (obs.counts["added"], obs.counts["removed"]) == (2, 1)
    assert [(h["file"], h["line"]) for h in obs.facts["forbidden"]] == [("src/a.py", 2)]
    failed = GitDiffParser().parse(ParseInput(workdir=tmp_path, git_output=GitOutput(error="no")))
    assert not failed.ok and failed.error == "no"
    assert not GitDiffParser().parse(ParseInput(workdir=tmp_path)).ok  # nothing handed in


def test_a_bad_pattern_is_reported_before_git_is_asked(tmp_path):
    data = ParseInput(workdir=tmp_path, options={"forbidden_patterns": ["re:("]})
    assert with_git_output(data) is data
    assert "invalid forbidden pattern" in (GitDiffParser().parse(data).error or "")
