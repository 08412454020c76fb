"""Run a sample end to end on a scratch copy: copy it, git-init it, run its template.

    python samples/demo.py [invoice|pagination|refactor_shipping|backfill_units|node_durations]
        [--keep] [-- extra looprun options]

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
# sample -> the built-in template it demonstrates, and the inputs it needs
SAMPLES: dict[str, tuple[str, tuple[str, ...]]] = {
    "invoice": ("bugfix", ()),
    "pagination": ("bugfix", ()),
    "java_money": ("bugfix", ()),
    "refactor_shipping": ("refactor", ()),
    "backfill_units": ("test_backfill", ("--set", "target=units/temperature.py,units/wind.py")),
    "go_textkit": ("bugfix", ()),
    "node_durations": ("bugfix", ()),
    "rust_invoice": ("bugfix", ()),
}


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
            "__pycache__", "*.pyc", ".looprun", "script*.yaml", "intent.txt", ".pytest_cache"
        ),
    )
    _git(dest, "init", "-q", "-b", "main")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", f"sample {name}")
    return dest


def command(name: str, workdir: Path, extra: list[str]) -> list[str]:
    intent = (HERE / name / "intent.txt").read_text(encoding="utf-8").strip()
    template, inputs = SAMPLES[name]
    return [
        sys.executable,
        "-m",
        "looprun",
        template,
        *inputs,
        "--intent",
        intent,
        "--workdir",
        str(workdir),
        "--model",
        f"script:{HERE / name / 'script.yaml'}",
        *extra,
    ]


def missing_tools(env: dict[str, str], name: str = "invoice") -> list[str]:
    """What the demo needs and this interpreter lacks: looprun itself, and the checks the
    sample's template runs (pytest, ruff; coverage for test_backfill). Without them every
    check would fail the same way and the loop would only burn its iterations."""
    out = []
    modules = ["looprun", "pytest"] + (["coverage"] if SAMPLES[name][0] == "test_backfill" else [])
    for module in modules:
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
    lacking = missing_tools(env, names[0])
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
