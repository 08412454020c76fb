"""A sub-template's own ``models:`` roles apply to its sub-loops, below the command line,
the environment and the config file (the real CLI, real worktrees, scripted models)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from subloop_templates import INNER, OUTER, edit_turns, per_task_script
from tests.support.cli import looprun
from tests.support.git_repos import git_repo


def _setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    work = tmp_path / "proj"
    work.mkdir()
    (work / "left.txt").write_text("l\n")
    (work / "right.txt").write_text("r\n")
    git_repo(work)
    sub_script = tmp_path / "sub.yaml"  # the sub-template's own model: one plain script
    sub_script.write_text(yaml.safe_dump(edit_turns("own.txt", "from the sub-template\n")))
    outer_script = per_task_script(  # per-task scripts of the outer model
        tmp_path / "outer.yaml",
        {"left": ("left.txt", "outer left\n"), "right": ("right.txt", "outer right\n")},
    )
    tpl = tmp_path / "tpl"
    tpl.mkdir()
    inner = INNER.replace(
        "plan: {mode: none}", f'plan: {{mode: none}}\nmodels: {{act: "script:{sub_script}"}}'
    )
    (tpl / "edit.yaml").write_text(inner)
    outer = OUTER.replace("each_task:", f'models: {{act: "script:{outer_script}"}}\neach_task:')
    (tpl / "pair.yaml").write_text(outer)  # parallel: both start from the same tree
    return work, tpl / "pair.yaml", outer_script


def _env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_CONFIG_HOME": str(tmp_path / "no-config")}


def test_subloops_use_the_subtemplates_own_model(tmp_path: Path) -> None:
    work, outer, _ = _setup(tmp_path)
    proc = looprun(
        str(outer), "--intent", "go", "--workdir", str(work), "--json",
        cwd=work, env=_env(tmp_path),
    )  # fmt: skip
    summary = json.loads(proc.stdout)
    assert summary["outcome"] == "done", proc.stderr
    assert "run.json was changed" not in proc.stderr  # nothing rewrote it
    # both sub-loops played the sub-template's script, not the outer per-task ones
    assert (work / "own.txt").read_text() == "from the sub-template\n"
    assert (work / "left.txt").read_text() == "l\n"
    for rec in summary["subloops"]:
        exchanges = Path(summary["run_dir"]) / "subloops" / f"{rec['id']}-1" / "exchanges.jsonl"
        models = {json.loads(ln)["model"] for ln in exchanges.read_text().splitlines()}
        assert models == {f"script:{tmp_path / 'sub.yaml'}"}


def test_the_command_line_beats_the_subtemplate_and_per_task_scripts_still_work(
    tmp_path: Path,
) -> None:
    work, outer, outer_script = _setup(tmp_path)
    proc = looprun(
        str(outer), "--intent", "go", "--workdir", str(work), "--json",
        "--model", f"script:{outer_script}", cwd=work, env=_env(tmp_path),
    )  # fmt: skip
    summary = json.loads(proc.stdout)
    assert summary["outcome"] == "done", proc.stderr
    assert (work / "left.txt").read_text() == "outer left\n"
    assert (work / "right.txt").read_text() == "outer right\n"
    assert not (work / "own.txt").exists()
    run = json.loads((Path(summary["run_dir"]) / "run.json").read_text())
    assert run["cli_models"]["act"] == f"script:{outer_script}"


def test_the_environment_beats_the_subtemplate(tmp_path: Path) -> None:
    work, outer, outer_script = _setup(tmp_path)
    env = _env(tmp_path) | {"LOOPRUN_ACT_MODEL": f"script:{outer_script}"}
    proc = looprun(
        str(outer), "--intent", "go", "--workdir", str(work), "--json", cwd=work, env=env
    )
    assert json.loads(proc.stdout)["outcome"] == "done", proc.stderr
    assert (work / "left.txt").read_text() == "outer left\n"
    assert not (work / "own.txt").exists()
