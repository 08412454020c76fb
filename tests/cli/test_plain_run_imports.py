"""A plain run (no ``--executor ray``) starts without the Ray executor's modules: checked
in a fresh interpreter after a real run, in a real git repository, to its end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TEMPLATE = """\
looprun: 1
name: plain
inputs:
  intent: {type: string, required: true}
plan: {mode: none}
act:
  prompt: "{{ intent }}"
  tools: [write_file]
  max_steps: 4
  constraints:
    paths: {allow: ["**"]}
observe:
  status:
    parser: json
    file: status.json
    options: {facts: {done: done}, ok: done}
exit: [status.ok]
refine:
  - else: {retry: "not yet"}
"""

# runs the CLI in this interpreter, then prints the modules it loaded
DRIVER = """
import json, runpy, sys
argv = sys.argv[1:]
sys.argv = ["looprun", *argv]
try:
    runpy.run_module("looprun", run_name="__main__")
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _repo(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    (repo / "status.json").write_text('{"done": true}\n', encoding="utf-8")
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    return repo


def test_a_plain_run_does_not_import_the_ray_executor(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    template = tmp_path / "plain.yaml"
    template.write_text(TEMPLATE, encoding="utf-8")
    script = tmp_path / "script.json"
    turn = {"name": "write_file", "arguments": {"path": "notes.txt", "content": "hi\n"}}
    script.write_text(json.dumps([{"tool_calls": [turn]}, {"text": "ok"}]), encoding="utf-8")
    proc = subprocess.run(
        [
            *(sys.executable, "-c", DRIVER, str(template), "--intent", "write a note"),
            *("--workdir", str(repo), "--model", f"script:{script}", "--json"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["code"] == 0, proc.stderr[-2000:]
    assert (repo / "notes.txt").read_text(encoding="utf-8") == "hi\n"  # the run did its work
    loaded = result["modules"]
    assert "looprun.run.runner" in loaded  # the run's own code did load
    assert not [m for m in loaded if m.startswith(("looprun.remote", "ray"))]
