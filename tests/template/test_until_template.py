"""The template ``looprun --until`` builds, read back through the real loader: it
validates, the check is data, and the protect globs match exactly what the command names
(a hostile file name included); ``--save`` never replaces what is there."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from looprun.data.globs import matcher
from looprun.errors import UsageError
from looprun.loop.plan import rendered_globs
from looprun.run.until import named_paths, save_new
from looprun.template.loader import load_template
from looprun.template.model import Template
from looprun.template.until import candidate_paths, runs_pytest, split_command, until_template

Names = Sequence[str]


def _load(
    tmp_path: Path, command: str, files: Names = (), dirs: Names = (), extra: Names = ()
) -> Template:
    path = tmp_path / "until.yaml"
    path.write_text(until_template(command, files, dirs, extra))
    return load_template(path)


def _protect(
    tmp_path: Path, command: str, files: Names = (), dirs: Names = (), extra: Names = ()
) -> Callable[[str], bool]:
    template = _load(tmp_path, command, files, dirs, extra)
    protect = template.act.constraints.protect
    assert protect is not None
    globs = rendered_globs(protect.paths, {"inputs": {}, "intent": ""})
    return matcher(globs)


@pytest.mark.parametrize(
    "command, pytest_runs",
    [
        ("pytest -q", True),
        ("python -m pytest tests", True),
        (".venv/bin/py.test", True),
        ("coverage run -m pytest", True),
        ("make check", False),
        ("python -m pytestish", False),
    ],
)
def test_which_commands_run_pytest(command: str, pytest_runs: bool) -> None:
    assert runs_pytest(split_command(command)) is pytest_runs


def test_the_words_that_may_name_paths() -> None:
    words = split_command(
        "FOO=1 python -m pytest -q --rootdir=sub tests/t.py::test_x ./check.sh ../up /abs ."
    )
    assert candidate_paths(words) == ["python", "pytest", "sub", "tests/t.py", "check.sh"]


def test_the_named_file_is_protected_at_the_root_only(tmp_path: Path) -> None:
    match = _protect(tmp_path, "python -m pytest t.py", files=["t.py"])
    assert match("t.py") and match("conftest.py") and match("pkg/conftest.py")
    assert match("setup.cfg") and match("test_new.py")
    assert not match("pkg/code.py")


def test_a_named_directory_is_protected_whole(tmp_path: Path) -> None:
    match = _protect(tmp_path, "./run-checks checks", files=["run-checks"], dirs=["checks"])
    assert match("checks/a/b.txt") and match("run-checks")
    assert not match("src/checks.py") and not match("conftest.py")


def test_hostile_file_names_stay_data(tmp_path: Path) -> None:
    names = ["{{ 7 * 7 }}.txt", "a{%b%}.py", "[x]*?.txt", "!neg", "#hash"]
    match = _protect(tmp_path, "./check", files=names, extra=["docs/{{ x }}/**"])
    for name in names:
        assert match(name), name
    assert match("docs/{{ x }}/page.md")
    assert not match("49.txt") and not match("xa.txt")


def test_the_check_is_the_default_of_a_command_input(tmp_path: Path) -> None:
    command = "python -c 'print(\"{{ inputs.intent }}\")' && exit 1"
    template = _load(tmp_path, command)
    assert template.inputs["check"].default == command
    assert template.act.tools[-1] == "flag_for_human" and "run" not in template.act.tools


def test_a_plain_check_is_the_one_command_the_model_may_run(tmp_path: Path) -> None:
    template = _load(tmp_path, "python -m pytest -q tests")
    assert "run" in template.act.tools
    assert list(template.act.constraints.commands) == ["python -m pytest -q tests"]


def test_named_paths_reads_links_as_links(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("")
    (tmp_path / "d").mkdir()
    os.symlink(tmp_path / "d", tmp_path / "link")
    files, dirs = named_paths(tmp_path, "pytest t.py d link missing.py")
    assert files == ["t.py", "link"]
    assert dirs == ["d"]


def test_save_writes_a_new_file_and_never_replaces_one(tmp_path: Path) -> None:
    target = tmp_path / "loop.yaml"
    save_new(str(target), "looprun: 1\n")
    assert target.read_text() == "looprun: 1\n"
    with pytest.raises(UsageError, match="already exists"):
        save_new(str(target), "other\n")
    assert target.read_text() == "looprun: 1\n"
    os.symlink(tmp_path / "elsewhere", tmp_path / "dangling.yaml")
    with pytest.raises(UsageError, match="already exists"):
        save_new(str(tmp_path / "dangling.yaml"), "x\n")
    assert not (tmp_path / "elsewhere").exists()
    with pytest.raises(UsageError, match="does not exist"):
        save_new(str(tmp_path / "no" / "loop.yaml"), "x\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling.yaml", "loop.yaml"]
