"""``run.artifacts`` is where commands write, so the engine treats what is in it as planted,
through the real CLI under bubblewrap, with observers that attack the ones after them:

- a check plants links named like a later check's report (``findings.json``) and another
  file it writes (``notes.txt``), pointing into the workdir: the later check's files must
  land in the artifacts directory, not through the links into the repository;
- a check leaves its own report as a link to a file the sandbox hides from it: the engine
  must not read it for the check (a link is not a report);
- a file one observe round leaves (``carry.txt``) must be gone in the next round, and a
  report planted for a later check (``stale.json``) never passes as that check's result.
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
pytestmark = pytest.mark.skipif(
    BWRAP_PROBLEM is not None, reason=f"no working bubblewrap here: {BWRAP_PROBLEM}"
)

SECRET = "sk-hidden-5a4b3c2d1e"

LOOK = """\
import os, sys
print(sorted(os.listdir(sys.argv[1])))
"""

PLANT = """\
import os, sys
arts = sys.argv[1]
os.symlink(os.path.abspath("planted.json"), os.path.join(arts, "findings.json"))
os.symlink(os.path.abspath("through.txt"), os.path.join(arts, "notes.txt"))
open(os.path.join(arts, "stale.json"), "w").write('{"count": 0}')
open(os.path.join(arts, "carry.txt"), "w").write("from an earlier round")
"""

LINT = """\
import json, os, sys
json.dump({"count": 3}, open(sys.argv[1], "w"))
open(os.path.join(os.path.dirname(sys.argv[1]), "notes.txt"), "w").write("a side file")
"""

SILENT = """\
import json, os, sys
if os.path.exists("silent.done"):
    sys.exit(1)  # from the second round on, it crashes before writing its report
open("silent.done", "w").close()
json.dump({"count": 1}, open(sys.argv[1], "w"))
"""

LEAK = """\
import os, sys
secret = open("secret-path.txt").read().strip()
try:
    open(secret).read()
    print("the sandbox let me read it")
except OSError as exc:
    print("cannot read it:", exc.strerror)
if not os.path.exists("leak.done"):  # the baseline must pass for the run to go on
    open("leak.done", "w").close()
    open(sys.argv[1], "w").write('{"token": "none"}')
else:
    os.symlink(secret, sys.argv[1])
"""


def _template(hidden: Path) -> str:
    return f"""\
looprun: 1
name: planted
sandbox: {{mode: required, hide: ["{hidden}"]}}
inputs:
  intent: {{type: string, required: true}}
act:
  prompt: "{{{{ task.goal }}}}"
  tools: [run]
observe:
  look:
    run: "python3 look.py {{{{ run.artifacts }}}}"
    parser: exit_code
  plant:
    run: "python3 plant.py {{{{ run.artifacts }}}}"
    parser: exit_code
  lint:
    run: "python3 lint.py {{{{ run.artifacts }}}}/findings.json"
    parser: json
    options: {{facts: {{count: count}}}}
    file: "{{{{ run.artifacts }}}}/findings.json"
  silent:
    run: "python3 silent.py {{{{ run.artifacts }}}}/stale.json"
    parser: json
    options: {{facts: {{count: count}}}}
    file: "{{{{ run.artifacts }}}}/stale.json"
  leak:
    run: "python3 leak.py {{{{ run.artifacts }}}}/leak.json"
    parser: json
    options: {{facts: {{token: token}}}}
    file: "{{{{ run.artifacts }}}}/leak.json"
exit: [look.ok]
limits: {{max_iterations: 1}}
"""


def test_planted_links_and_files_in_the_artifacts_never_reach_a_later_check(
    tmp_path: Path,
) -> None:
    work, hidden = tmp_path / "work", tmp_path / "hidden"
    work.mkdir()
    hidden.mkdir()
    (hidden / "secret.json").write_text(json.dumps({"token": SECRET}))
    scripts = {"look.py": LOOK, "plant.py": PLANT, "lint.py": LINT, "silent.py": SILENT}
    for name, text in {**scripts, "leak.py": LEAK}.items():
        (work / name).write_text(text)
    (work / "secret-path.txt").write_text(str(hidden / "secret.json"))
    (work / ".gitignore").write_text("planted.json\nthrough.txt\nsilent.done\nleak.done\n")
    git_repo(work)
    (tmp_path / "t.yaml").write_text(_template(hidden))
    (tmp_path / "script.yaml").write_text(yaml.safe_dump([{"text": "ok"}]))
    proc = looprun(
        "run", str(tmp_path / "t.yaml"), "--intent", "plant", "--workdir", str(work),
        "--model", f"script:{tmp_path / 'script.yaml'}", "--json",
        cwd=tmp_path, env={"LOOPRUN_SANDBOX_BACKENDS": "bwrap"},
    )  # fmt: skip
    assert proc.stdout.strip(), proc.stderr
    run_dir = Path(json.loads(proc.stdout)["run_dir"])
    rounds = [
        json.loads((run_dir / "observe" / f"{n}.json").read_text())["observers"] for n in (0, 1)
    ]
    baseline, first = rounds

    # the link planted for `lint` was not followed: its report is in the artifacts
    assert not (work / "planted.json").exists()
    assert not (work / "through.txt").exists()  # nor a link at another name it writes
    assert (baseline["lint"]["ok"], first["lint"]["ok"]) == (True, True), first["lint"]
    # a report planted for `silent`, which wrote none, is not its result
    assert "report not found" in (first["silent"]["error"] or ""), first["silent"]
    # the next round starts with an empty artifacts directory
    assert baseline["look"]["output_tail"].strip() == "[]"
    assert first["look"]["output_tail"].strip() == "[]", first["look"]
    # the engine does not read, through a link, what the sandbox hides from the check
    assert "cannot read it" in (run_dir / "kept" / "1" / "leak.output.txt").read_text()
    assert "symbolic link" in (first["leak"]["error"] or ""), first["leak"]
    for path in run_dir.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert SECRET not in path.read_text(errors="replace"), path
