"""The policy on its own: paths, commands and diffs against act constraints."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from looprun.act import commandline, diffcheck
from looprun.act.diffrules import (
    Violation,
    check_protected,
    check_scoped_patterns,
    pattern_violations,
)
from looprun.act.policy import Policy, _forbidden_matcher
from looprun.data.changes import FileChange
from looprun.data.patchtext import chunks
from looprun.errors import Location, PolicyViolation
from looprun.template import slots
from looprun.template.expressions import compile_condition
from looprun.template.loader import load_template
from looprun.template.model import Constraints, PathRules, ScopedPattern
from looprun.template.slots import StackChoice


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "docs").mkdir()
    (root / "docs" / "guide.md").write_text("# guide\n")
    (root / "secrets").mkdir()
    (root / "secrets" / "key.pem").write_text("PRIVATE\n")
    (root / ".git").mkdir()
    (root / ".looprun").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "target.txt").write_text("outside\n")
    return root


def policy(workdir: Path, **kw: object) -> Policy:
    rules = PathRules(
        allow=tuple(kw.pop("allow", ("src/**", "tests/**"))),  # type: ignore[arg-type]
        deny=tuple(kw.pop("deny", ("secrets/", "**/*.lock"))),  # type: ignore[arg-type]
    )
    return Policy(workdir, Constraints(paths=rules, **kw))  # type: ignore[arg-type]


def rule_of(fn, *args, **kwargs) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(PolicyViolation) as info:
        fn(*args, **kwargs)
    return info.value.rule


# -- paths -------------------------------------------------------------------------------


def test_paths_inside_resolve_to_absolute(workdir: Path) -> None:
    pol = policy(workdir)
    assert pol.check_path("src/pkg/mod.py", write=True) == workdir / "src/pkg/mod.py"
    assert pol.check_path("./src/../src/new.py", write=True) == workdir / "src/new.py"
    assert pol.check_path(str(workdir / "src/pkg/mod.py"), write=True) == workdir / "src/pkg/mod.py"


def test_reads_are_wider_than_writes(workdir: Path) -> None:
    pol = policy(workdir)
    assert pol.check_path("docs/guide.md", write=False) == workdir / "docs/guide.md"
    assert rule_of(pol.check_path, "docs/guide.md", write=True) == "path.not_allowed"


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("../outside/target.txt", "path.outside"),
        ("src/../../outside/target.txt", "path.outside"),
        ("/etc/passwd", "path.outside"),
        (".git/config", "path.git"),
        ("src/../.git/HEAD", "path.git"),
        ("src/sub/.git/hooks/pre-commit", "path.git"),
        (".GIT/config", "path.git"),
        (".looprun/runs/x/journal.jsonl", "path.looprun"),
        ("secrets/key.pem", "path.deny"),
        ("src/Cargo.lock", "path.deny"),
        ("", "path.invalid"),
        ("src/a\x00b", "path.invalid"),
    ],
)
def test_refused_reads(workdir: Path, path: str, rule: str) -> None:
    assert rule_of(policy(workdir).check_path, path, write=False) == rule


def test_symlinks_are_followed_before_judging(workdir: Path, tmp_path: Path) -> None:
    pol = policy(workdir)
    (workdir / "src" / "out_file").symlink_to(tmp_path / "outside" / "target.txt")
    (workdir / "src" / "out_dir").symlink_to(tmp_path / "outside")
    (workdir / "src" / "dangling").symlink_to(tmp_path / "outside" / "nothing-yet")
    (workdir / "src" / "to_git").symlink_to(workdir / ".git")
    (workdir / "src" / "to_secrets").symlink_to(workdir / "secrets")
    (workdir / "src" / "inside").symlink_to(workdir / "src" / "pkg" / "mod.py")
    assert rule_of(pol.check_path, "src/out_file", write=False) == "path.outside"
    assert rule_of(pol.check_path, "src/out_dir/target.txt", write=True) == "path.outside"
    assert rule_of(pol.check_path, "src/out_dir/new.txt", write=True) == "path.outside"
    assert rule_of(pol.check_path, "src/dangling", write=True) == "path.outside"
    assert rule_of(pol.check_path, "src/to_git/config", write=True) == "path.git"
    assert rule_of(pol.check_path, "src/to_secrets/key.pem", write=False) == "path.deny"
    # A link that stays inside is fine, and writes go to its target.
    assert pol.check_path("src/inside", write=True) == workdir / "src/pkg/mod.py"


def test_symlinked_workdir_still_contains_its_files(workdir: Path, tmp_path: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(workdir)
    pol = Policy(alias, Constraints())
    assert pol.check_path(str(alias / "docs/guide.md"), write=True) == workdir / "docs/guide.md"
    assert pol.check_path("docs/guide.md", write=True) == workdir / "docs/guide.md"


def test_default_allow_is_everything_but_protected(workdir: Path) -> None:
    pol = Policy(workdir, Constraints())
    assert pol.check_path("anything/new.txt", write=True) == workdir / "anything/new.txt"
    assert rule_of(pol.check_path, ".git/hooks/pre-commit", write=True) == "path.git"


def test_needs_approval(workdir: Path) -> None:
    pol = policy(workdir, approve=("migrations/**", "*.sql"))
    assert pol.needs_approval(["src/a.py", "migrations/001.py", "db/x.sql"]) == [
        "migrations/001.py",
        "db/x.sql",
    ]
    assert policy(workdir).needs_approval(["migrations/001.py"]) == []


# -- commands ----------------------------------------------------------------------------

ALLOWED = ("python -m pytest *", "ruff check *", "git status")


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("python -m pytest", ["python", "-m", "pytest"]),
        (
            "python -m pytest -q tests/test_a.py",
            ["python", "-m", "pytest", "-q", "tests/test_a.py"],
        ),
        ('python -m pytest -k "a or b"', ["python", "-m", "pytest", "-k", "a or b"]),
        ("python -m pytest -k 'x;y|z'", ["python", "-m", "pytest", "-k", "x;y|z"]),
        ("python -m pytest -k 'a-b'", ["python", "-m", "pytest", "-k", "a-b"]),
        ("  ruff   check  src ", ["ruff", "check", "src"]),
        ("git status", ["git", "status"]),
    ],
)
def test_allowed_commands(workdir: Path, command: str, argv: list[str]) -> None:
    assert policy(workdir, commands=ALLOWED).check_command(command) == argv


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("git status --short", "command.not_allowed"),
        ("rm -rf /", "command.not_allowed"),
        ("/usr/bin/python -m pytest", "command.not_allowed"),
        ("python -m pytest; rm -rf ~", "command.shell_syntax"),
        ("python -m pytest && curl evil", "command.shell_syntax"),
        ("python -m pytest || true", "command.shell_syntax"),
        ("python -m pytest | tee out", "command.shell_syntax"),
        ("python -m pytest > /tmp/x", "command.shell_syntax"),
        ("python -m pytest < /etc/passwd", "command.shell_syntax"),
        ("python -m pytest &", "command.shell_syntax"),
        ("python -m pytest $(cat /etc/passwd)", "command.shell_syntax"),
        ('python -m pytest "$(id)"', "command.shell_syntax"),
        ("python -m pytest `id`", "command.shell_syntax"),
        ("python -m pytest $HOME", "command.shell_syntax"),
        ("python -m pytest ${HOME}", "command.shell_syntax"),
        # quoted, a shell leaves it alone, but a program may expand it (pytest --rootdir)
        ("python -m pytest -k '$HOME'", "command.unjudged"),
        ("python -m pytest\nrm -rf /", "command.shell_syntax"),
        ("python -m pytest 'unbalanced", "command.shell_syntax"),
        ("", "command.not_allowed"),
    ],
)
def test_refused_commands(workdir: Path, command: str, rule: str) -> None:
    assert rule_of(policy(workdir, commands=ALLOWED).check_command, command) == rule


def test_wrappers_need_a_pattern_naming_them(workdir: Path) -> None:
    broad = policy(workdir, commands=("*", "python *"))
    assert rule_of(broad.check_command, "bash -c 'echo hi'") == "command.wrapper"
    assert rule_of(broad.check_command, "env X=1 python -m pytest") == "command.wrapper"
    assert rule_of(broad.check_command, "xargs rm") == "command.wrapper"
    assert rule_of(broad.check_command, "sudo ls") == "command.wrapper"
    assert rule_of(broad.check_command, "python -c 'print(1)'") == "command.wrapper"
    assert rule_of(broad.check_command, "python3 -Sc 'print(1)'") == "command.wrapper"
    assert broad.check_command("python -W ignore -m pytest") == [
        "python", "-W", "ignore", "-m", "pytest"
    ]  # fmt: skip
    explicit = policy(workdir, commands=("bash scripts/check.sh", "env", "python -c *"))
    assert explicit.check_command("bash scripts/check.sh") == ["bash", "scripts/check.sh"]
    assert explicit.check_command("env") == ["env"]
    assert explicit.check_command("python -c 'print(1)'") == ["python", "-c", "print(1)"]
    assert rule_of(explicit.check_command, "bash -c 'id'") == "command.not_allowed"


def test_pattern_may_allow_shell_syntax_explicitly(workdir: Path) -> None:
    pol = policy(workdir, commands=("grep -E a|b *",))
    assert pol.check_command("grep -E a|b src") == ["grep", "-E", "a|b", "src"]


def test_pattern_matching_is_by_token() -> None:
    assert commandline.pattern_matches("python -m pytest *", ["python", "-m", "pytest"])
    assert commandline.pattern_matches("pytest --junitxml=* *", ["pytest", "--junitxml=a.xml"])
    assert commandline.pattern_matches("a * z", ["a", "b", "c", "z"])
    assert not commandline.pattern_matches("a * z", ["a", "b", "z", "c"])
    assert not commandline.pattern_matches("python -m pytest", ["python", "-m", "pytest", "-x"])
    assert not commandline.pattern_matches("ruff check *", ["ruff", "format"])


def test_quoting_is_honoured_when_looking_for_shell_syntax() -> None:
    assert commandline.shell_features("echo 'a;b' \"c|d\" e\\;f") == []
    assert commandline.shell_features('echo "$(id)"') == ["$("]
    assert commandline.shell_features("echo a&&b; c") == ["&&", ";"]


# -- diffs -------------------------------------------------------------------------------


def _git_diff(tmp_path: Path, before: dict[str, str], after: dict[str, str]) -> str:
    """A real git diff between two versions of a small tree."""
    repo = tmp_path / "diffrepo"
    repo.mkdir(parents=True)
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-c", "core.quotepath=off", *args],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    git("init", "-q")
    trees = []
    for version in (before, after):
        for old in repo.iterdir():
            if old.is_dir() and old.name != ".git":
                shutil.rmtree(old)
            elif old.name != ".git":
                old.unlink()
        for name, text in version.items():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            (repo / name).write_text(text)
        git("add", "-A")
        trees.append(git("write-tree").strip())
    return git("diff", "--no-renames", *trees)


def test_diff_limits_and_forbidden_patterns_on_a_real_diff(tmp_path: Path) -> None:
    before = {"calc.py": "def f():\n    return 1\n", "old.py": "a\nb\n"}
    after = {
        "calc.py": "def f():\n    breakpoint()\n    return 2\n",
        "new file.py": "import pytest\n\npytest.skip('later')\n+++ not a header\n",
    }
    diff = _git_diff(tmp_path, before, after)
    pol = Policy(
        tmp_path,
        Constraints(
            max_diff_lines=5, forbidden_patterns=("breakpoint()", "pytest.skip(", "re:^\\+\\+")
        ),
    )
    found = pol.check_diff(diff)
    rules = [v.rule for v in found]
    assert rules.count("diff.too_large") == 1
    messages = [v.message for v in found if v.rule == "pattern.forbidden"]
    assert "forbidden pattern 'breakpoint()' added at calc.py:2" in messages
    assert "forbidden pattern 'pytest.skip(' added at new file.py:3" in messages
    assert "forbidden pattern 're:^\\\\+\\\\+' added at new file.py:4" in messages
    # Removed lines never count as added.
    removed_only = _git_diff(tmp_path / "b", {"x.py": "breakpoint()\n"}, {"x.py": "ok\n"})
    assert (
        Policy(tmp_path, Constraints(forbidden_patterns=("breakpoint()",))).check_diff(removed_only)
        == []
    )


def test_bugfix_forbids_test_run_detection_only_outside_the_tests(tmp_path: Path) -> None:
    """The built-in bugfix's scoped patterns, with its tests_glob rendered, on a real diff:
    every file but the tests is code under test, whatever its name."""
    cheat = 'if "pytest" in sys.modules or os.environ.get("PYTEST_CURRENT_TEST"):\n'
    cheat += "    caller = sys._getframe(1)\n"
    after = {
        name: cheat
        for name in (
            "src/pkg/calc.py",  # code: flagged
            "src/pkg/tests_helpers.py",  # code with "tests" in its name: flagged
            "tests/test_calc.py",  # under tests_glob: allowed
            "tests/helpers/fixtures.py",  # under tests_glob, not named test_*: allowed
            "src/pkg/test_inline.py",  # a test file by name, outside tests_glob: allowed
            "conftest.py",  # allowed
        )
    }
    diff = _git_diff(tmp_path, {"README": "x\n"}, {"README": "x\n", **after})
    template = load_template("bugfix")
    assert template.act is not None
    rules = [
        p.render({"inputs": {"tests_glob": "tests/**"}})
        for p in template.act.constraints.scoped_patterns
    ]
    found = Policy(tmp_path, template.act.constraints).check_patterns(diff, rules)

    flagged = sorted({v.detail.split(":")[0] for v in found})
    assert flagged == ["src/pkg/calc.py", "src/pkg/tests_helpers.py"]
    assert len(found) == 6 and {v.rule for v in found} == {"pattern.forbidden"}
    # the unscoped patterns are not these: a test may read PYTEST_CURRENT_TEST
    assert Policy(tmp_path, template.act.constraints).check_diff(diff) == []


def test_small_diff_passes(tmp_path: Path) -> None:
    diff = _git_diff(tmp_path, {"a.py": "x = 1\n"}, {"a.py": "x = 2\n"})
    assert Policy(tmp_path, Constraints(max_diff_lines=2)).check_diff(diff) == []
    assert [v.rule for v in Policy(tmp_path, Constraints(max_diff_lines=1)).check_diff(diff)] == [
        "diff.too_large"
    ]


def _whole(pol: Policy, diff: str, scoped: list[ScopedPattern]) -> tuple[list[object], int]:
    """What the policy found reading a diff whole, from the whole-text readers."""
    found: list[object] = []
    for path in diffcheck.changed_paths(diff):
        if pol._deny.match_file(path) or not pol._allow.match_file(path):
            found.append(("path.denied", path))
    stats = diffcheck.stats(diff)
    limit = pol.constraints.max_diff_lines
    if limit is not None and stats.lines > limit:
        found.append(("diff.too_large", f"+{stats.added} -{stats.removed} {len(stats.files)}"))
    rules = [(p, _forbidden_matcher(p), None, "") for p in pol.constraints.forbidden_patterns]
    found += [(v.rule, v.message) for v in pattern_violations(diff, rules)]
    found += [(v.rule, v.message) for v in check_scoped_patterns(diff, scoped)]
    return found, stats.lines


def _seen(found: list[Violation]) -> list[object]:
    out: list[object] = []
    for v in found:
        if v.rule == "path.denied":
            out.append((v.rule, v.detail))
        elif v.rule == "diff.too_large":
            out.append(
                (
                    v.rule,
                    v.message.split("(")[1].split(")")[0]
                    + " "
                    + v.message.split(" in ")[1].split()[0],
                )
            )
        else:
            out.append((v.rule, v.message))
    return out


def test_a_diff_judged_part_by_part_finds_what_reading_it_whole_finds(tmp_path: Path) -> None:
    """Per-file parts, each judged alone, add up to the verdict on the whole text: path
    rules, the line limit on the sums, and at most 20 pattern hits in diff order."""
    before = {
        "src/a.py": "x = 1\n--- not a header\n",
        "src/gone.py": "breakpoint()\n",
        "src/tail.py": "no newline",
        "blob.bin": "\0\1\2",
    }
    after = {
        "src/a.py": "x = 2\n",
        "src/tail.py": "no newline\nbreakpoint() # still none",
        "blob.bin": "\0\3\2",
        "secrets/key.txt": "breakpoint()\n",
        "src/b.py": "".join(f"breakpoint()  # {i}\n" for i in range(15)),
        "src/c.py": "".join(f"eval(x); breakpoint()  # {i}\n" for i in range(25)),
        "tests/t.py": "eval(1)\n+++ b/added\n",
    }
    diff = _git_diff(tmp_path, before, after)
    scoped = [
        ScopedPattern("eval(", re.compile(re.escape("eval(")), paths=("src/**",), message="no")
    ]
    constraints = Constraints(
        paths=PathRules(allow=("src/**", "tests/**", "blob.bin"), deny=("secrets/**",)),
        max_diff_lines=10,
        forbidden_patterns=("breakpoint()", "re:^\\+\\+"),
    )
    pol = Policy(tmp_path, constraints, paths_on_diff=True)
    parts = chunks(diff)
    assert len(parts) == 8 and "".join(parts) == diff
    found, lines = pol.review_diff(parts, scoped)
    expected = _whole(pol, diff, scoped)
    assert (_seen(found), lines) == expected
    assert [r for r, _ in expected[0]].count("pattern.forbidden") == 40  # both capped at 20
    assert ("path.denied", "secrets/key.txt") in expected[0]
    # the same again (each part's verdict kept), and in another policy from scratch
    assert pol.review_diff(parts, scoped) == (found, lines)
    assert Policy(tmp_path, constraints, paths_on_diff=True).review_diff(parts, scoped) == (
        found,
        lines,
    )
    # a part that does not end a line is judged with the part after it, as in the text
    glued = [parts[0].rstrip("\n"), *parts[1:]]
    again, glued_lines = pol.review_diff(glued, scoped)
    assert (_seen(again), glued_lines) == _whole(pol, "".join(glued), scoped)


def test_a_part_that_changed_since_the_last_review_is_judged_again(tmp_path: Path) -> None:
    before = {"a.py": "x = 1\n", "b.py": "y = 1\n"}
    clean = chunks(_git_diff(tmp_path / "1", before, {"a.py": "x = 2\n", "b.py": "y = 2\n"}))
    dirty = chunks(
        _git_diff(tmp_path / "2", before, {"a.py": "x = 2\nbreakpoint()\n", "b.py": "y = 2\n"})
    )
    assert clean[1] == dirty[1] and clean[0] != dirty[0]
    pol = Policy(tmp_path, Constraints(forbidden_patterns=("breakpoint()",)))
    assert pol.review_diff(clean, []) == ([], 4)
    found, lines = pol.review_diff(dirty, [])
    assert [v.message for v in found] == ["forbidden pattern 'breakpoint()' added at a.py:2"]
    assert lines == 5
    assert pol.review_diff([], []) == ([], 0)
    assert pol.review_diff(clean, []) == ([], 4)
    # other scoped rules: every part is judged under them
    rule = ScopedPattern("y = 2", re.compile("y = 2"))
    assert [v.detail for v in pol.review_diff(clean, [rule])[0]] == ["b.py:1: y = 2"]
    assert pol.review_diff(clean, []) == ([], 4)


def test_allow_new_lets_a_protected_path_take_only_new_files() -> None:
    """A task that may only add tests: new test files pass; editing or deleting an
    existing one, or creating a conftest.py or a file elsewhere, is a violation."""
    changes = [
        FileChange("tests/test_new.py", "A"),
        FileChange("tests/test_old.py", "M"),
        FileChange("tests/test_gone.py", "D"),
        FileChange("tests/conftest.py", "A"),
        FileChange("tests/deep/conftest.py", "A"),
        FileChange("src/pkg/mod.py", "M"),
        FileChange("src/pkg/new.py", "A"),
    ]
    found = check_protected(
        changes, ["**"], False, "in task reproduce", ["tests/**", "!**/conftest.py"]
    )
    assert [v.detail for v in found] == [
        "tests/test_old.py",
        "tests/test_gone.py",
        "tests/conftest.py",
        "tests/deep/conftest.py",
        "src/pkg/mod.py",
        "src/pkg/new.py",
    ]
    assert "tests/conftest.py is protected in task reproduce and may not be created" in [
        v.message for v in found
    ]
    # without allow_new every change is one
    assert len(check_protected(changes, ["**"], False, "in task reproduce")) == len(changes)


@pytest.mark.parametrize("untrusted", [False, True])
def test_values_at_picks_the_values_of_the_keys_in_order(untrusted: bool) -> None:
    condition = compile_condition(
        "values_at(types, ids) == ['ImportError', 'AssertionError']",
        Location("t.yaml"),
        untrusted=untrusted,
    )
    types = {"a": "AssertionError", "b": "ImportError", "c": "NameError"}
    assert condition.evaluate({"types": types, "ids": ["b", "missing", "a"]})
    assert not condition.evaluate({"types": types, "ids": ["a", "b"]})


def test_the_node_pack_forbids_silencing_the_type_check_only_in_the_code(tmp_path: Path) -> None:
    """The node stack's bugfix on a real diff: `@ts-ignore` and its kin in the code under
    test are refused; a test that expects a type error may say so."""
    silenced = "// @ts-ignore\nconst n: number = 'x';\n// @ts-expect-error\n// @ts-nocheck\n"
    after = {"src/duration.ts": silenced, "test/duration.test.ts": "// @ts-expect-error\nf(1);\n"}
    diff = _git_diff(tmp_path, {"README": "x\n"}, {"README": "x\n", **after})
    with slots.chosen(StackChoice("node", "a test")):
        template = load_template("bugfix")
    assert template.act is not None
    constraints = template.act.constraints
    rules = [p.render({"inputs": {"tests_glob": "test/**"}}) for p in constraints.scoped_patterns]
    found = Policy(tmp_path, constraints).check_patterns(diff, rules)
    silencing = [v for v in found if "silence the type check" in v.message]
    assert sorted(v.detail.split(":")[:2] for v in silencing) == [
        ["src/duration.ts", "1"],
        ["src/duration.ts", "3"],
        ["src/duration.ts", "4"],
    ]
