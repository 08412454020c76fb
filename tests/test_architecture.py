"""The architecture rules that can be checked by importing: what each layer may load.

Each import runs in a fresh interpreter, so a module is charged with everything it pulls
in, not with what an earlier test happened to import.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

LOOP = Path(__file__).resolve().parents[1] / "engine" / "looprun" / "loop"
# The CLI's wiring: it builds the real ports (git workspace, HTTP models, terminal
# approver) and prints results, so it may import what the loop core may not.
WIRING = {"runner", "real_ports", "run_models"}
CORE = sorted(p.stem for p in LOOP.glob("*.py") if p.stem not in WIRING | {"__init__"})
# HTTP, git, YAML, the schema validator and the terminal stay behind the ports.
FORBIDDEN = (
    "httpx",
    "yaml",
    "jsonschema",
    "click",
    "looprun.gitutil",
    "looprun.workspace",
    "looprun.models.http",
    "looprun.models.openai",
    "looprun.models.anthropic",
    "looprun.sandbox",
    "looprun.sandbox.bwrap",
    "looprun.sandbox.landlock",
)


def _loaded_after(code: str) -> set[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_the_core_module_list_is_not_empty() -> None:
    assert {"engine", "turn", "limits", "progress", "outer", "refine"} <= set(CORE)


@pytest.mark.parametrize("module", CORE)
def test_loop_core_imports_nothing_of_http_git_yaml_or_the_terminal(module: str) -> None:
    loaded = _loaded_after(f"import looprun.loop.{module}")
    assert not loaded & set(FORBIDDEN), f"looprun.loop.{module} pulls in {loaded & set(FORBIDDEN)}"


def test_importing_the_package_has_no_side_effects_beyond_loading() -> None:
    loaded = _loaded_after("import looprun, looprun.cli")
    assert "jsonschema" not in loaded and "httpx" not in loaded


@pytest.mark.parametrize("args", [["--help"], ["runs", "--json"], ["schema", "--help"]])
def test_commands_that_do_not_validate_do_not_import_jsonschema(
    args: list[str], tmp_path: Path
) -> None:
    code = (
        "import sys, runpy\n"
        f"sys.argv = ['looprun', *{args!r}]\n"
        "try:\n"
        "    runpy.run_module('looprun', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "import json\n"
        "print()\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('jsonschema', 'httpx')))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert json.loads(out.stdout.splitlines()[-1]) == [], out.stderr
