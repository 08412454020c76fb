"""``looprun completion SHELL``: the script is sourced in a real bash, which then asks the
real ``looprun`` (on PATH, as installed) what completes a word."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")


def _installed(tmp_path: Path) -> dict[str, str]:
    """An environment with a ``looprun`` console script first on PATH, as pip writes it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "looprun"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nfrom looprun.cli.main import main\nsys.exit(main())\n"
    )
    script.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


def _complete(tmp_path: Path, line: str) -> list[str]:
    """What bash's completion offers for the last word of ``line``, after sourcing the
    script ``looprun completion bash`` printed."""
    env = _installed(tmp_path)
    source = subprocess.run(
        ["looprun", "completion", "bash"], capture_output=True, text=True, env=env, check=True
    ).stdout
    (tmp_path / "completion.bash").write_text(source)
    words = line.split(" ")
    program = (
        "source completion.bash\n"
        f"COMP_WORDS=({' '.join(repr(w) for w in words)})\n"
        f"COMP_CWORD={len(words) - 1}\n"
        "_looprun_completion looprun\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    proc = subprocess.run(
        ["bash", "--norc", "-c", program],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return [w for w in proc.stdout.splitlines() if w]


@needs_bash
def test_a_subcommand_completes(tmp_path: Path) -> None:
    assert _complete(tmp_path, "looprun val") == ["validate"]


@needs_bash
def test_an_option_completes(tmp_path: Path) -> None:
    assert "--no-cache" in _complete(tmp_path, "looprun validate --no")
    assert _complete(tmp_path, "looprun run --unt") == ["--until"]


@needs_bash
def test_a_choice_completes(tmp_path: Path) -> None:
    assert set(_complete(tmp_path, "looprun completion ")) == {"bash", "zsh", "fish"}


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_ask_looprun(tmp_path: Path, shell: str) -> None:
    proc = subprocess.run(
        ["looprun", "completion", shell], capture_output=True, text=True, env=_installed(tmp_path)
    )
    assert proc.returncode == 0, proc.stderr
    assert f"_LOOPRUN_COMPLETE={shell}_complete" in proc.stdout.replace('"', "")


def test_an_unknown_shell_is_a_usage_error(tmp_path: Path) -> None:
    proc = subprocess.run(
        ["looprun", "completion", "tcsh"], capture_output=True, text=True, env=_installed(tmp_path)
    )
    assert proc.returncode == 2 and "tcsh" in proc.stderr and "Traceback" not in proc.stderr
