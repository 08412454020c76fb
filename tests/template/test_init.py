"""`looprun init`: the scaffolded team template validates as written, behaves like its
parent until edited, and is written atomically without clobbering anything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest
from click.testing import CliRunner

from looprun.cli.main import main
from looprun.cli.scaffold.files import schema_ref
from looprun.cli.scaffold.values import BASES
from looprun.system.resources import schema_path, schemas_dir
from looprun.template.loader import load_template

REPO = Path(__file__).resolve().parents[2]


def looprun(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "looprun", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def test_cli_writes_a_template_and_cases_that_validate_and_pass(tmp_path: Path) -> None:
    proc = looprun("init", "loops/payments-bugfix.yaml", "--cases", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    template = tmp_path / "loops" / "payments-bugfix.yaml"
    cases = tmp_path / "loops" / "payments-bugfix.cases.yaml"
    assert f"wrote {Path('loops/payments-bugfix.yaml')}" in proc.stdout

    first = template.read_text(encoding="utf-8").splitlines()[0]
    # outside a checkout of looprun: the schema's published $id, never a machine-local path
    published = json.loads(schema_path("template").read_text("utf-8"))["$id"]
    assert first == f"# yaml-language-server: $schema={published}"
    assert urlparse(published).scheme == "https"

    loaded = load_template(template)
    parent = load_template("bugfix")
    assert loaded.name == "payments-bugfix"
    assert loaded.limits == parent.limits
    assert loaded.act is not None and parent.act is not None
    assert loaded.act.constraints == parent.act.constraints
    assert [t.id for t in loaded.plan.tasks] == ["reproduce", "fix"]

    proc = looprun("validate", str(template), str(cases), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = looprun("test", str(cases), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "5 passed, 0 failed" in proc.stdout


@pytest.mark.parametrize("base", [b for b in BASES if b != "bugfix"])
def test_every_builtin_can_be_extended(tmp_path: Path, base: str) -> None:
    target = tmp_path / f"team-{base}.yaml"
    code, out = invoke("init", str(target), "--extends", base, "--cases")
    assert code == 0, out
    loaded = load_template(target)
    parent = load_template(base)
    assert loaded.name == f"team-{base}"
    assert loaded.limits == parent.limits
    defaults = {k: (v.type, v.required, v.default) for k, v in parent.inputs.items()}
    assert {k: (v.type, v.required, v.default) for k, v in loaded.inputs.items()} == defaults
    assert (loaded.act and loaded.act.constraints) == (parent.act and parent.act.constraints)
    assert f"extends: {base}\n" in target.read_text(encoding="utf-8")

    code, out = invoke("test", str(tmp_path / f"team-{base}.cases.yaml"))
    assert code == 0, out
    assert " 0 failed" in out and "PASS" in out


def test_the_overrides_take_effect_when_edited(tmp_path: Path) -> None:
    target = tmp_path / "team.yaml"
    assert invoke("init", str(target), "--cases")[0] == 0
    text = target.read_text(encoding="utf-8")
    text = text.replace('      allow:\n        - "**"', '      allow: ["src/**", "tests/**"]')
    text = text.replace("max_diff_lines: 400", "max_diff_lines: 150")
    text = text.replace('"diff.lines <= 400"', '"diff.lines <= 150"')
    text = text.replace("max_iterations: 12", "max_iterations: 5")
    target.write_text(text, encoding="utf-8")

    loaded = load_template(target)
    assert loaded.act is not None
    assert loaded.act.constraints.paths.allow == ("src/**", "tests/**")
    assert loaded.act.constraints.max_diff_lines == 150
    assert loaded.limits.max_iterations == 5
    # The starter cases still hold for the tightened template (401 lines stay over the limit).
    code, out = invoke("test", str(tmp_path / "team.cases.yaml"))
    assert code == 0, out


def test_an_existing_file_is_never_overwritten_without_force(tmp_path: Path) -> None:
    target = tmp_path / "team.yaml"
    target.write_text("looprun: 1\nname: mine\n", encoding="utf-8")
    code, out = invoke("init", str(target))
    assert code == 2
    assert "already exists" in out and "--force" in out
    assert target.read_text(encoding="utf-8") == "looprun: 1\nname: mine\n"

    code, out = invoke("init", str(target), "--force", "--name", "ours")
    assert code == 0, out
    assert load_template(target).name == "ours"


def test_an_existing_case_file_blocks_both_files(tmp_path: Path) -> None:
    (tmp_path / "team.cases.yaml").write_text("cases: []\n", encoding="utf-8")
    code, out = invoke("init", str(tmp_path / "team.yaml"), "--cases")
    assert code == 2 and "team.cases.yaml already exists" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["team.cases.yaml"]


def test_an_unknown_base_lists_the_builtins_and_writes_nothing(tmp_path: Path) -> None:
    code, out = invoke("init", str(tmp_path / "new" / "team.yaml"), "--extends", "hotfix")
    assert code == 2
    assert "hotfix" in out
    for name in BASES:
        assert name in out
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["team.txt"], "ends in .yaml or .yml"),
        (["."], "is a directory"),
        (["team.yaml", "--name", "our team"], "--name 'our team'"),
    ],
)
def test_usage_mistakes_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out = invoke("init", *args)
    assert code == 2
    assert message in out
    assert list(tmp_path.iterdir()) == []


def test_missing_directories_are_created_and_names_come_from_the_file(tmp_path: Path) -> None:
    target = tmp_path / "ci" / "loops" / "Payments Fix.yml"
    assert invoke("init", str(target), "--cases")[0] == 0
    assert load_template(target).name == "Payments-Fix"
    cases = target.with_name("Payments Fix.cases.yaml")
    assert 'template: "Payments Fix.yml"' in cases.read_text(encoding="utf-8")
    assert invoke("test", str(cases))[0] == 0


def test_a_failed_write_leaves_no_file_and_no_new_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(src: object, dst: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    code, out = invoke("init", str(tmp_path / "a" / "b" / "team.yaml"), "--cases")
    assert code == 1
    assert "cannot write" in out and "Permission denied" in out
    assert list(tmp_path.iterdir()) == []


def test_a_parent_that_is_a_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "loops").write_text("not a directory", encoding="utf-8")
    code, out = invoke("init", str(tmp_path / "loops" / "team.yaml"))
    assert code == 1
    assert "cannot write" in out
    assert [p.name for p in tmp_path.iterdir()] == ["loops"]


@pytest.mark.skipif(
    schemas_dir().resolve() != REPO / "schemas", reason="looprun runs from an installed copy"
)
def test_inside_a_checkout_the_schema_reference_is_relative() -> None:
    assert schema_ref(REPO / "loops" / "team.yaml") == "../schemas/template.schema.json"
    assert schema_ref(REPO / "samples" / "team" / "x.yaml") == "../../schemas/template.schema.json"
    assert (REPO / "samples" / "team" / "../../schemas/template.schema.json").is_file()


def test_an_explicit_schema_reference_is_written_as_given(tmp_path: Path) -> None:
    target = tmp_path / "team.yaml"
    assert invoke("init", str(target), "--schema", "../schemas/looprun.json")[0] == 0
    first = target.read_text(encoding="utf-8").splitlines()[0]
    assert first == "# yaml-language-server: $schema=../schemas/looprun.json"


def test_schema_output_writes_a_file_that_init_points_at_relatively(tmp_path: Path) -> None:
    """`looprun schema --output` gives editors a file in the repository; `init --schema`
    then points at it with a path relative to the new template, which works on every clone."""
    proc = looprun("schema", "--output", "schemas/looprun.schema.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    written = tmp_path / "schemas" / "looprun.schema.json"
    assert json.loads(written.read_text("utf-8")) == json.loads(
        schema_path("template").read_text("utf-8")
    )
    proc = looprun(
        "init", "loops/team/bugfix.yaml", "--schema", "schemas/looprun.schema.json", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    first = (tmp_path / "loops/team/bugfix.yaml").read_text("utf-8").splitlines()[0]
    assert first == "# yaml-language-server: $schema=../../schemas/looprun.schema.json"
    assert (tmp_path / "loops/team" / "../../schemas/looprun.schema.json").is_file()
    assert str(tmp_path) not in (tmp_path / "loops/team/bugfix.yaml").read_text("utf-8")
    bad = looprun("schema", "--output", "schemas/looprun.schema.json/x", cwd=tmp_path)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
