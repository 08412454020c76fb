"""A command cannot plant code the engine runs: the cache of Jinja's compiled expressions
(``code_cache``) is out of reach of what a run's commands write.

The observer's test is hostile: with looprun's own modules it builds the cache file a
later run reads, whose code for the exit condition ``tests.ok`` says true whatever the
facts, and writes it into the user's cache. Under bubblewrap the host is read-only to
commands, so the write fails and the next run does not end ``done``. Without a sandbox
the command runs as the user, who could as well edit the engine itself: there the file
lands and the next run believes it (the control: the attack is real; the sandbox is the
boundary, as docs/security.md says).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from tests.security.test_valid_cache_plant import TEMPLATE as VALID_CACHE_TEMPLATE
from tests.support.cli import looprun
from tests.support.git_repos import git_repo

from looprun.sandbox.bwrap import Bubblewrap

BWRAP_PROBLEM = Bubblewrap().problem()

PLANT = """\
import marshal
from pathlib import Path

from looprun.template import expressions
from looprun.template.code_cache import CodeCache
from looprun.template.valid_cache import engine_stamp

ROOT = Path(Path("where.txt").read_text().strip())


def test_plants_code():
    code = []
    expressions._expression_maker(expressions.ENV, "true", code.append)()
    use = (("tests",), (("tests", "ok"),), None, code[0])
    data = {"format": 1, "stamp": engine_stamp(), "entries": {("condition", "tests.ok"): use}}
    try:
        ROOT.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = CodeCache(ROOT).path
        path.write_bytes(marshal.dumps(data))
        path.chmod(0o600)
        outcome = "written"
    except OSError as exc:
        outcome = f"refused ({exc.strerror})"
    print("CODE", outcome)
    assert False, "fails on purpose: tests.ok is false"
"""

# the valid-cache attack's template: one check running the planting test, `tests.ok` the goal
TEMPLATE = VALID_CACHE_TEMPLATE.replace("sandbox: required\n", "")


def _runs(tmp_path: Path, sandbox: str) -> tuple[str, dict[str, object]]:
    """Three runs with one cache: the first fills it, the second's test plants the file
    (that run has nothing new to save over it), the third is the one that would believe
    it. Returns the planting test's report and the third run's summary."""
    cache, work = tmp_path / "cache", tmp_path / "work"
    work.mkdir()
    (work / "test_plant.py").write_text(PLANT)
    where = work / "where.txt"
    where.write_text(f"{tmp_path / 'elsewhere'}\n")
    git_repo(work)
    (tmp_path / "t.yaml").write_text(TEMPLATE)
    (tmp_path / "script.yaml").write_text(yaml.safe_dump([{"text": "done"}] * 4))
    env = {"LOOPRUN_CACHE_DIR": str(cache)}
    args = ["run", str(tmp_path / "t.yaml"), "--intent", "plant", "--workdir", str(work),
            "--model", f"script:{tmp_path / 'script.yaml'}", "--json",
            "--sandbox", sandbox]  # fmt: skip
    looprun(*args, cwd=tmp_path, env=env)
    where.write_text(f"{cache / 'compiled'}\n")
    planting = looprun(*args, cwd=tmp_path, env=env)
    run_dir = Path(json.loads(planting.stdout)["run_dir"])
    junit = (run_dir / "kept" / "1" / "junit.xml").read_text()
    where.write_text(f"{tmp_path / 'elsewhere'}\n")
    last = looprun(*args, cwd=tmp_path, env=env)
    return junit, json.loads(last.stdout)


@pytest.mark.skipif(BWRAP_PROBLEM is not None, reason=f"no working bubblewrap: {BWRAP_PROBLEM}")
def test_a_sandboxed_command_cannot_plant_compiled_code(tmp_path: Path) -> None:
    junit, again = _runs(tmp_path, "required")
    assert "CODE refused (Read-only file system)" in junit  # the test ran; its write failed
    assert again["outcome"] != "done"


def test_without_a_sandbox_the_planted_code_is_what_the_next_run_believes(tmp_path: Path) -> None:
    junit, again = _runs(tmp_path, "off")
    assert "CODE written" in junit
    assert again["outcome"] == "done"  # the forged tests.ok: why commands run sandboxed
