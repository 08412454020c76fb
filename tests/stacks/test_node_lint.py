"""The node pack's lint: the project's own `tsc --noEmit` read with the regex tsc preset, on a
real TypeScript install (npm, in the test's own project)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from looprun.checks.runner import observe_command

PACK = Path(__file__).resolve().parents[2] / "templates" / "observers" / "node.yaml"


def _typescript_project(root: Path) -> Path:
    if shutil.which("npm") is None:
        if os.environ.get("CI"):
            pytest.fail("npm is not installed: CI must run these tests")
        pytest.skip("npm is not installed (apt-get install nodejs npm)")
    root.mkdir()
    (root / "package.json").write_text(json.dumps({"name": "t", "version": "1.0.0"}))
    options = {"strict": True, "noEmit": True, "target": "es2022", "module": "commonjs"}
    (root / "tsconfig.json").write_text(json.dumps({"compilerOptions": options}))
    done = subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "typescript@5"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"npm install typescript failed: {done.stderr[-500:]}")
        pytest.skip("typescript could not be installed from the npm registry")
    return root


@pytest.mark.e2e
def test_type_errors_are_items_with_their_place_and_a_clean_project_is_ok(tmp_path: Path) -> None:
    project = _typescript_project(tmp_path / "p")
    lint = yaml.safe_load(PACK.read_text())["observe"]["lint"]
    command = yaml.safe_load(PACK.read_text())["inputs"]["lint_command"]["default"]
    assert lint["run"] == "{{ inputs.lint_command }}"
    src = project / "src"
    src.mkdir()
    (src / "total.ts").write_text(
        "export function total(xs: number[]): number {\n"
        "  return xs.reduce((a, b) => a + b, 0);\n}\n"
        "export const label: string = total([1, 2]);\n"
    )
    obs = observe_command(
        "regex", workdir=project, command=command, options=lint["options"], timeout_s=120
    )
    assert obs.ok is False and obs.to_facts()["errors"] == 1
    (item,) = obs.items
    assert (item.file, item.line, item.rule) == ("src/total.ts", 4, "TS2322")
    assert "not assignable to type 'string'" in item.message

    (src / "total.ts").write_text(
        "export function total(xs: number[]): number {\n"
        "  return xs.reduce((a, b) => a + b, 0);\n}\n"
        "export const label: string = String(total([1, 2]));\n"
    )
    clean = observe_command(
        "regex", workdir=project, command=command, options=lint["options"], timeout_s=120
    )
    assert clean.ok is True and clean.to_facts()["errors"] == 0
    # without a tsconfig.json tsc cannot check anything: an exit the pack calls cannot-run
    (project / "tsconfig.json").unlink()
    none = observe_command(
        "regex", workdir=project, command=command, options=lint["options"], timeout_s=120
    )
    assert none.exit_code in lint["cannot_run_exit"]
