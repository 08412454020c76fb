"""Time to done with staged checks against the whole suite every iteration.

The package is ``more-itertools`` 10.5.0, fetched as its source distribution (pure
Python; 663 pytest tests that run offline with plain pytest), with a bug planted in
``ilen``. A scripted model writes a reproducing test, errs twice, then fixes the code.
The same ``bugfix`` template runs three times per round, interleaved, each in a fresh
process on a fresh git repository: as shipped (the Python pack's ``tests`` observer is
staged, with the related-tests tier), staged without ``related_tests``, and with
``narrow`` removed (the whole suite runs after every turn). Prints the median wall time
to done of each and the ratios to the whole-suite one (goal: staged <= 0.5x whole).

The tests run with the package's own test environment: a fresh virtual environment
holding pytest only (``--python venv``, the default), as a project's CI would have it.
``--python host`` runs them with whatever ``python`` is first on PATH instead, with every
pytest plugin installed there (each one loaded, and rewritten when no bytecode is
cached, by every pytest process: a fixed cost per check that narrow runs pay as often
as whole ones).

    python benchmarks/bench_staged.py [--rounds 5] [--python venv|host]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import yaml

PACKAGE, VERSION = "more-itertools", "10.5.0"
PYTEST = "pytest==9.0.3"  # the test environment's only package
CODE = "more_itertools/more.py"
RIGHT = "    return sum(compress(repeat(1), zip(iterable)))\n"
BUG = "    return max(0, sum(compress(repeat(1), zip(iterable))) - 1)\n"
WRONG = (
    "    return max(1, sum(compress(repeat(1), zip(iterable))))\n",  # wrong for empty input
    "    return sum(compress(repeat(1), zip(iterable))) or 1\n",  # still wrong for it
)
TEMPLATES = Path(__file__).resolve().parents[1] / "templates"
NEW_TEST = "tests/test_ilen_bug.py"
REPRO = (
    "from more_itertools import ilen\n\n\n"
    "def test_ilen_counts_every_item():\n"
    "    assert ilen(iter([1, 2, 3])) == 3\n"
)


def fetch(where: Path) -> Path:
    """The sdist, downloaded with pip and unpacked."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--no-binary",
            ":all:",
            f"{PACKAGE}=={VERSION}",
            "-d",
            str(where),
        ],
        check=True,
    )
    (archive,) = where.glob("*.tar.gz")
    with tarfile.open(archive) as tar:
        tar.extractall(where, filter="data")
    (tree,) = [p for p in where.iterdir() if p.is_dir()]
    return tree


def test_env(where: Path) -> dict[str, str]:
    """The environment the runs get: PATH led by a fresh virtual environment with pytest."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    pip = [str(where / "bin" / "python"), "-m", "pip", "install", "-q", PYTEST]
    subprocess.run(pip, check=True, capture_output=True)
    return {**os.environ, "PATH": f"{where / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}


def project(sdist: Path, into: Path) -> Path:
    """A fresh repository holding the sdist with the bug planted."""
    work = into / "pkg"
    shutil.copytree(sdist, work)
    code = work / CODE
    text = code.read_text()
    assert RIGHT in text
    code.write_text(text.replace(RIGHT, BUG))
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
        subprocess.run(
            ["git", "-c", "user.name=b", "-c", "user.email=b@b", *args],
            cwd=work,
            check=True,
            capture_output=True,
        )
    return work


def script(into: Path) -> Path:
    def edit(old: str, new: str, said: str) -> list[dict[str, object]]:
        call = {"name": "edit_file", "arguments": {"path": CODE, "old": old, "new": new}}
        return [{"tool_calls": [call]}, {"text": said}]

    write = {"name": "write_file", "arguments": {"path": NEW_TEST, "content": REPRO}}
    turns = [
        {"tool_calls": [write]},
        {"text": "The new test fails."},
        *edit(BUG, WRONG[0], "Fixed ilen."),
        *edit(WRONG[0], WRONG[1], "Fixed ilen again."),
        *edit(WRONG[1], RIGHT, "Fixed ilen for good."),
    ]
    path = into / "script.yaml"
    path.write_text(yaml.safe_dump(turns, sort_keys=False))
    return path


def edited_templates(into: Path, name: str, narrow: str | None) -> Path:
    """The built-in templates with the Python pack's `narrow` line replaced (or removed)."""
    copy = into / name
    shutil.copytree(TEMPLATES, copy)
    pack = copy / "observers" / "python.yaml"
    lines = pack.read_text().splitlines(keepends=True)
    at = [i for i, ln in enumerate(lines) if ln.lstrip().startswith("narrow:")]
    assert len(at) == 1
    indent = lines[at[0]][: len(lines[at[0]]) - len(lines[at[0]].lstrip())]
    lines[at[0]] = "" if narrow is None else f"{indent}narrow: {narrow}\n"
    pack.write_text("".join(lines))
    return copy / "bugfix.yaml"


def one(template: Path, sdist: Path, env: dict[str, str]) -> tuple[float, float]:
    """The wall time to done, and how much of it the checks after the baseline took."""
    with tempfile.TemporaryDirectory() as tmp:
        work = project(sdist, Path(tmp))
        model = script(Path(tmp))
        t0 = time.perf_counter()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "looprun",
                "run",
                str(template),
                "--workdir",
                str(work),
                "--intent",
                "ilen() counts one item too few.",
                "--model",
                f"script:{model}",
                "--set",
                "lint=false",
                "--set",
                "strict=true",
                "--json",
            ],
            capture_output=True,
            text=True,
            env=env,
        )
        took = time.perf_counter() - t0
        summary = json.loads(proc.stdout or "{}")
        if summary.get("outcome") != "done" or summary.get("iterations") != 4:
            raise SystemExit(f"not done in 4 iterations: {proc.stdout}\n{proc.stderr[-3000:]}")
        return took, float(summary["timing"]["phases"]["checks"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--python", choices=("venv", "host"), default="venv")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sdist = fetch(Path(tmp) / "sdist")
        env = test_env(Path(tmp) / "venv") if args.python == "venv" else dict(os.environ)
        count = (
            subprocess.run(
                ["python", "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider"],
                cwd=sdist,
                capture_output=True,
                text=True,
                env={**env, "PYTHONDONTWRITEBYTECODE": "1"},
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        variants = {
            "related": TEMPLATES / "bugfix.yaml",
            "narrow": edited_templates(
                Path(tmp), "narrow", "[last_failing, task_failing, changed_tests]"
            ),
            "whole": edited_templates(Path(tmp), "whole", None),
        }
        times: dict[str, list[float]] = {k: [] for k in variants}
        checks: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(args.rounds):
            for key, template in variants.items():
                took, checked = one(template, sdist, env)
                times[key].append(took)
                checks[key].append(checked)
    med = {k: statistics.median(v) for k, v in times.items()}
    w = med["whole"]
    # what no staging can save: the run without its checks after the baseline, plus one
    # whole run of the final tree (a quarter of the whole-suite loop's checks)
    fixed = statistics.median(
        t - c for t, c in zip(times["related"], checks["related"], strict=True)
    )
    floor = fixed + statistics.median(checks["whole"]) / 4
    where = f"{PYTEST} in a fresh venv" if args.python == "venv" else "the host's python"
    print(f"{PACKAGE} {VERSION}: {count}; scripted model erring twice, done at iteration 4")
    print(f"tests run with {where}")
    print(f"time to done, staged + related tier : {med['related']:.2f} s (median of {args.rounds})")
    print(f"time to done, staged, narrow only   : {med['narrow']:.2f} s (median of {args.rounds})")
    print(f"time to done, whole suite each run  : {w:.2f} s (median of {args.rounds}, baseline)")
    print(f"ratio staged + related / whole: {med['related'] / w:.2f}x (goal <= 0.5x)")
    print(f"ratio staged narrow only / whole: {med['narrow'] / w:.2f}x")
    c_related, c_whole = (statistics.median(checks[k]) for k in ("related", "whole"))
    print(
        f"floor: start-up, baseline and one whole run, every narrow run free: {floor:.2f} s"
        f" = {floor / w:.2f}x (checks after the baseline, median: staged + related"
        f" {c_related:.2f} s, whole {c_whole:.2f} s)"
    )


if __name__ == "__main__":
    main()
