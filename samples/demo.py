"""Run a sample end to end on a scratch copy: copy it, git-init it, run `looprun bugfix`.

    python samples/demo.py [invoice|pagination] [--keep] [-- extra looprun options]

The repository's own samples are never modified: the run happens in a temporary
directory, printed at the end (kept with --keep). Exits with looprun's exit code.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SAMPLES = ("invoice", "pagination")


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=demo", "-c", "user.email=demo@localhost", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def scratch_copy(name: str, into: Path) -> Path:
    """A fresh git repository holding a copy of sample ``name``."""
    dest = into / name
    shutil.copytree(
        HERE / name,
        dest,
        ignore=shutil.ignore_patterns(
            "__pycache__", "*.pyc", ".looprun", "script.yaml", "intent.txt", ".pytest_cache"
        ),
    )
    _git(dest, "init", "-q", "-b", "main")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", f"sample {name}")
    return dest


def command(name: str, workdir: Path, extra: list[str]) -> list[str]:
    intent = (HERE / name / "intent.txt").read_text(encoding="utf-8").strip()
    return [
        sys.executable,
        "-m",
        "looprun",
        "bugfix",
        "--intent",
        intent,
        "--workdir",
        str(workdir),
        "--model",
        f"script:{HERE / name / 'script.yaml'}",
        *extra,
    ]


def missing_tools(env: dict[str, str]) -> list[str]:
    """What the demo needs and this interpreter lacks: looprun itself, and the checks the
    bugfix template runs (pytest, ruff). Without them every check would fail the same way
    and the loop would only burn its iterations."""
    out = []
    for module in ("looprun", "pytest"):
        probe = subprocess.run(
            [sys.executable, "-c", f"import {module}"], env=env, capture_output=True
        )
        if probe.returncode != 0:
            out.append(module)
    if shutil.which("ruff", path=env.get("PATH")) is None:
        out.append("ruff")
    return out


def main(argv: list[str]) -> int:
    extra: list[str] = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1 :]
        argv = argv[: argv.index("--")]
    keep = "--keep" in argv
    names = [a for a in argv if not a.startswith("-")] or ["invoice"]
    if names[0] not in SAMPLES:
        print(f"unknown sample {names[0]!r}; choose one of {', '.join(SAMPLES)}", file=sys.stderr)
        return 2
    env = dict(os.environ)
    # The sample's checks run `python -m pytest`: use this interpreter's environment.
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    lacking = missing_tools(env)
    if lacking:
        print(
            f"the demo needs {', '.join(lacking)} in this environment ({sys.executable}); "
            "install them with: pip install -e '.[test]'",
            file=sys.stderr,
        )
        return 2
    scratch = Path(tempfile.mkdtemp(prefix="looprun-demo-"))
    workdir = scratch_copy(names[0], scratch)
    print(f"scratch copy: {workdir}", file=sys.stderr)
    code = subprocess.run(command(names[0], workdir, extra), env=env).returncode
    if keep or code != 0:
        print(f"kept for inspection: {workdir}", file=sys.stderr)
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
