"""A plain run imports only what its template uses: no Ray executor (no ``--executor
ray``), no agent CLI adapters (no ``act.agent``), no sub-loop machinery (no
``each_task``), no lock file or git cache (no remote template), no HTTP client (a
scripted model), no report (not in GitHub Actions), and no schema validator once the
template is known to have loaded cleanly unchanged. Checked in a fresh interpreter after
a real run, in a real git repository, to its end."""

from __future__ import annotations

import json
import os
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


def _run(tmp_path: Path, repo: Path, template: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "script.json"
    turn = {"name": "write_file", "arguments": {"path": "notes.txt", "content": "hi\n"}}
    script.write_text(json.dumps([{"tool_calls": [turn]}, {"text": "ok"}]), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    env["LOOPRUN_CACHE_DIR"] = str(tmp_path / "cache")
    return subprocess.run(
        [
            *(sys.executable, "-c", DRIVER, str(template), "--intent", "write a note"),
            *("--workdir", str(repo), "--model", f"script:{script}", "--json"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def _modules(proc: subprocess.CompletedProcess[str], repo: Path) -> list[str]:
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["code"] == 0, proc.stderr[-2000:]
    assert (repo / "notes.txt").read_text(encoding="utf-8") == "hi\n"  # the run did its work
    loaded: list[str] = result["modules"]
    assert "looprun.run.runner" in loaded  # the run's own code did load
    return loaded


HEAVY = (
    *("looprun.remote", "ray", "looprun.act.agents", "looprun.report", "httpx", "jsonschema"),
    *("looprun.tracing.otel", "opentelemetry", "looprun.act.mcp.client", "mcp"),
)
# only some templates use these: sub-loops (each_task), remote templates (git+ references)
OPTIONAL = (
    *("looprun.run.subloop", "looprun.loop.subloops", "looprun.journal.handoff"),
    *("looprun.template.sharing.resolver", "looprun.template.sharing.gitcache"),
    "looprun.template.sharing.lockfile",
)
# standard-library parts only some runs need: the TOML parser (a check that runs pytest
# reads its configuration), sockets (a sandboxed agent's bridge to its model), tarfile
# (a sub-loop's journal handed over)
UNUSED = ("tomllib", "socket", "tarfile")


def test_a_plain_run_imports_only_what_its_template_uses(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    template = tmp_path / "plain.yaml"
    template.write_text(TEMPLATE, encoding="utf-8")
    first = _modules(_run(tmp_path, repo, template), repo)
    # a template the cache does not know is validated (a valid one without jsonschema,
    # which loads only to word an error)
    assert "looprun.template.schema_check" in first
    assert not [m for m in first if m.startswith(HEAVY)]
    assert not [m for m in first if m.startswith(OPTIONAL)]
    assert not [m for m in first if m in UNUSED]
    assert list((tmp_path / "cache" / "loaded").iterdir())  # now known as loaded cleanly
    (repo / "notes.txt").unlink()
    again = _modules(_run(tmp_path, repo, template), repo)
    assert not [m for m in again if m == "ray" or m.startswith(tuple(h + "." for h in HEAVY))]
    assert not [m for m in again if m in HEAVY]


def test_a_changed_template_is_validated_again(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    template = tmp_path / "plain.yaml"
    template.write_text(TEMPLATE, encoding="utf-8")
    _modules(_run(tmp_path, repo, template), repo)  # now known as loaded cleanly
    (repo / "notes.txt").unlink()
    # a key only the schema refuses (the template's builder would not look at it)
    template.write_text(TEMPLATE.replace("max_steps: 4", "max_step: 4"), encoding="utf-8")
    proc = _run(tmp_path, repo, template)
    assert json.loads(proc.stdout.strip().splitlines()[-1])["code"] == 2
    assert f"{template}:9:3: " in proc.stderr and "max_step" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (repo / "notes.txt").exists()  # nothing ran
