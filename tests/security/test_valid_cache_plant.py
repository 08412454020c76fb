"""A command cannot vouch for a template: the valid-cache that lets a run skip the schema
check is out of reach of what a run's commands write.

The observer's test is hostile: with looprun's own module it computes the entry that would
mark a schema-invalid template as known valid, and writes it into the user's cache. Under
bubblewrap the host is read-only to commands, so the write fails and the next run of that
template is refused with the schema's error, naming file and line. (An unsandboxed command
runs as the user, who could as well edit the engine itself: the sandbox is the boundary.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from tests.support.cli import looprun
from tests.support.git_repos import git_repo

from looprun.sandbox.bwrap import Bubblewrap

BWRAP_PROBLEM = Bubblewrap().problem()

PLANT = """\
import json
from pathlib import Path

from looprun.template.valid_cache import ValidCache, engine_stamp, file_digest

CACHE, TARGET = Path("where.txt").read_text().split()


def test_plants_a_verdict():
    path, where = ValidCache(Path(CACHE))._entry(TARGET)
    entry = {"format": 1, "stamp": engine_stamp(), "ref": where,
             "files": {where: file_digest(where)}, "probes": {}}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(entry))
        outcome = "written"
    except OSError as exc:
        outcome = f"refused ({exc.strerror})"
    print("ENTRY", outcome)
    assert False, "fails on purpose, so that the run iterates"
"""

TEMPLATE = """\
looprun: 1
name: plant
sandbox: required
inputs:
  intent: {type: string, required: true}
act:
  prompt: "{{ task.goal }}"
observe:
  tests:
    run: >-
      python3 -m pytest -q -p no:cacheprovider -o junit_logging=all
      --junitxml={{ run.artifacts }}/junit.xml test_plant.py
    parser: junit
    file: "{{ run.artifacts }}/junit.xml"
exit: [tests.ok]
limits: {max_iterations: 1}
"""


@pytest.mark.skipif(BWRAP_PROBLEM is not None, reason=f"no working bubblewrap: {BWRAP_PROBLEM}")
def test_a_sandboxed_command_cannot_plant_a_valid_cache_entry(tmp_path: Path) -> None:
    cache, work = tmp_path / "cache", tmp_path / "work"
    work.mkdir()
    invalid = tmp_path / "invalid.yaml"  # the schema refuses `max_step`; the loader alone would not
    invalid.write_text(TEMPLATE.replace("{max_iterations: 1}", "{max_iterations: 1, max_step: 9}"))
    (work / "test_plant.py").write_text(PLANT)
    (work / "where.txt").write_text(f"{cache / 'loaded'} {invalid}\n")
    git_repo(work)
    (tmp_path / "t.yaml").write_text(TEMPLATE)
    (tmp_path / "script.yaml").write_text(yaml.safe_dump([{"text": "done"}, {"text": "done"}]))
    env = {"LOOPRUN_CACHE_DIR": str(cache)}
    first = looprun(
        "run", str(tmp_path / "t.yaml"), "--intent", "plant", "--workdir", str(work),
        "--model", f"script:{tmp_path / 'script.yaml'}", "--json", cwd=tmp_path, env=env,
    )  # fmt: skip
    run_dir = Path(json.loads(first.stdout)["run_dir"])
    junit = (run_dir / "kept" / "1" / "junit.xml").read_text()
    assert "ENTRY refused (Read-only file system)" in junit  # the test ran; its write failed
    again = looprun(
        "run", str(invalid), "--intent", "plant", "--workdir", str(work),
        "--model", f"script:{tmp_path / 'script.yaml'}", cwd=tmp_path, env=env,
    )  # fmt: skip
    assert again.returncode == 2, again.stderr
    assert f"{invalid}:" in again.stderr and "max_step" in again.stderr
    assert "Traceback" not in again.stderr
