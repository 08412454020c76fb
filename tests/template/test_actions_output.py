"""Under GitHub Actions every line `validate` prints is read by the runner: a YAML key
carrying newlines (LF or CR, both end a line for the runner) and workflow commands must
not start a line of its own."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support.cli import cli_env


def test_a_yaml_key_with_newlines_cannot_forge_workflow_commands(tmp_path: Path) -> None:
    key = r"x\n::stop-commands::tok\n::error::forged\r::warning::also"
    (tmp_path / "t.yaml").write_text(f'looprun: 1\nname: t\nlimits:\n  "{key}": 3\n')
    proc = subprocess.run(
        [sys.executable, "-m", "looprun", "validate", "t.yaml"],
        cwd=tmp_path,
        env=cli_env({"GITHUB_ACTIONS": "true"}),
        capture_output=True,
        timeout=120,
    )  # bytes: a CR must be seen as the runner sees it
    assert proc.returncode == 2, proc.stderr
    out = proc.stdout.decode()
    lines = re.split(r"\r\n|\r|\n", out + proc.stderr.decode())
    # the problem line names the key on one line, its newlines shown as \n and \r
    [plain] = [ln for ln in lines if ln.startswith("t.yaml:4:")]
    assert r"x\n::stop-commands::tok\n::error::forged\r::warning::also" in plain
    # only looprun's own annotations start a line with '::', each one line
    commands = [ln for ln in lines if ln.lstrip().startswith("::")]
    assert commands and all(ln.startswith("::error file=t.yaml,line=") for ln in commands)
    [forged] = [ln for ln in commands if "stop-commands" in ln]
    assert forged.startswith("::error file=t.yaml,line=4,col=3::unknown key 'x%0A::stop")
    assert "x%0A::stop-commands::tok%0A::error::forged%0D::warning::also" in forged
