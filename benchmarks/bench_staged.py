"""Time to done with staged checks against the whole suite every iteration.

A real package (``--package``, one record each in ``PACKAGES``) is fetched as its source
distribution, pure Python, and gets a one-line bug planted that a few of its own tests
catch. A scripted model writes a reproducing test, errs twice (each wrong fix makes that
test pass and breaks others), then fixes the code:

- ``more-itertools`` 10.5.0 (the default): 664 tests, a whole run about 1 s; ``ilen``
  counts one item too few.
- ``tomlkit`` 0.13.2: 859 tests, a whole run about 6 s on 2 cores (most of it the
  parametrized TOML spec cases); ``Array.__delitem__`` looks a negative index up
  unconverted, which two tests in ``test_items.py`` catch.

The same ``bugfix`` template runs three times per round, interleaved, each in a fresh
process on a fresh git repository: as shipped (the Python pack's ``tests`` observer is
staged, with the related-tests tier), staged without ``related_tests``, and with
``narrow`` removed (the whole suite runs after every turn). Prints the median wall time
to done of each and the ratios to the whole-suite one (goal: staged <= 0.5x whole).

The tests run with the package's own test environment: a fresh virtual environment
holding pytest and the test dependencies the package declares that its suite imports,
pinned (``--python venv``, the default), as a project's CI would have it.
``--python host`` runs them with whatever ``python`` is first on PATH instead, with every
pytest plugin installed there (each one loaded, and rewritten when no bytecode is
cached, by every pytest process: a fixed cost per check that narrow runs pay as often
as whole ones).

    python benchmarks/bench_staged.py [--package more-itertools|tomlkit] [--rounds 5]
        [--python venv|host]

Measured on 2 cores, medians of 3,
``python benchmarks/bench_staged.py --package tomlkit --rounds 3``, at load about 1 after
the baseline started listing its tests: staged + related 18.77 s, narrow only 21.23 s,
whole 31.24 s: 0.60x, narrow only 0.68x; floor 12.65 s = 0.41x. Shared with other work
(load 1-3):

    tomlkit:        staged + related 21.38 s, narrow only 22.85 s, whole 30.32 s:
                    0.71x, narrow only 0.75x; floor 13.23 s = 0.44x
                    (the engine before the baseline listed its tests, measured
                    right after: 22.38 s, 24.64 s, 33.85 s: 0.66x, 0.73x;
                    floor 16.52 s = 0.49x)

Under that load one arm's median moves by seconds (above, the staged arm's checks ran 2 s
slower than the engine's before); with both engines interleaved round by round (three
rounds, twice): staged + related 18.4-22.1 s against 22.1-25.9 s before, 0.64x and
0.48x (a whole arm slowed by load) against 0.69x and 0.65x, floor 0.43-0.44x against
0.47-0.50x. Earlier
(load about 1, before the listing): tomlkit 0.58x, floor 0.45x; more-itertools
(``--rounds 3``) staged + related 12.88 s, narrow only 14.02 s, whole 19.71 s: 0.65x,
floor 0.46x. On tomlkit the staged run does what it should: a failing narrow run of the
new test, a related run of the three test files importing ``tomlkit.items`` that catches
the first wrong fix (without ``related_tests`` only a whole run does), a failing narrow
run of the last failures that catches the second, then one whole run of the final tree.
The baseline no longer runs the tests twice: tomlkit's conftest generates 794 of its 859
cases (``pytest_generate_tests``), which no reading of the files can vouch for, so the
baseline lists them in another pytest process (``--collect-only``, about 1.2 s) and, as
the list names every id the run did, runs none of them again (a second run took about
5 s, nearly a whole run). That takes about 4 s off every arm, and the floor (start-up,
the baseline and the one whole run no staging removes, every narrow run free) from about
0.49x to 0.44x. What keeps the staged run above 0.5x now is above the floor: each narrow
or related check and each re-run of the reproduction (``fresh``, ``plain``) is a pytest
process of its own, about 1 s here (tomlkit's conftest reads every TOML case file for
each test function it collects), and together they take about twice a whole run.
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
from dataclasses import dataclass
from pathlib import Path

import yaml

PYTEST = "pytest==9.0.3"  # in every test environment, beside the package's own test deps
TEMPLATES = Path(__file__).resolve().parents[1] / "templates"


@dataclass(frozen=True)
class Package:
    """One package's shape: where the bug goes, and the scripted model's turns.

    ``lines`` is the line as shipped, the planted bug, then the model's two wrong fixes
    (each makes the reproducing test pass and breaks others); its last edit puts the
    shipped line back. ``test_deps`` are the test dependencies the package declares that
    its suite imports, pinned.
    """

    name: str
    version: str
    code: str
    lines: tuple[str, str, str, str]
    subject: str
    intent: str
    new_test: str
    repro: str
    test_deps: tuple[str, ...] = ()


PACKAGES = {
    p.name: p
    for p in (
        Package(
            "more-itertools",
            "10.5.0",
            "more_itertools/more.py",
            (
                "    return sum(compress(repeat(1), zip(iterable)))\n",
                "    return max(0, sum(compress(repeat(1), zip(iterable))) - 1)\n",
                "    return max(1, sum(compress(repeat(1), zip(iterable))))\n",  # empty input
                "    return sum(compress(repeat(1), zip(iterable))) or 1\n",  # still wrong there
            ),
            "ilen",
            "ilen() counts one item too few.",
            "tests/test_ilen_bug.py",
            "from more_itertools import ilen\n\n\n"
            "def test_ilen_counts_every_item():\n"
            "    assert ilen(iter([1, 2, 3])) == 3\n",
        ),
        # its dev dependencies name PyYAML for the spec tests beside coverage, lint and
        # docs tools, none of which the suite imports
        Package(
            "tomlkit",
            "0.13.2",
            "tomlkit/items.py",
            (
                "            indices_to_remove = [length + key if key < 0 else key]\n",
                "            indices_to_remove = [key]\n",
                "            indices_to_remove = [length + key]\n",  # breaks positive indices
                # off by one: the list has already shrunk
                "            indices_to_remove = [len(self) + key if key < 0 else key]\n",
            ),
            "Array.__delitem__",
            "Deleting an array item by a negative index (del doc['a'][-1]) raises IndexError.",
            "tests/test_del_bug.py",
            "import tomlkit\n\n\n"
            "def test_del_by_negative_index():\n"
            '    doc = tomlkit.parse("a = [1, 2, 3]\\n")\n'
            "    del doc['a'][-1]\n"
            "    assert doc['a'] == [1, 2]\n",
            ("PyYAML==6.0.2",),
        ),
    )
}


def fetch(pkg: Package, where: Path) -> Path:
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
            f"{pkg.name}=={pkg.version}",
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


def test_env(pkg: Package, where: Path) -> dict[str, str]:
    """The environment the runs get: PATH led by a fresh virtual environment with pytest
    and the package's test dependencies."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    pip = [str(where / "bin" / "python"), "-m", "pip", "install", "-q", PYTEST, *pkg.test_deps]
    subprocess.run(pip, check=True, capture_output=True)
    return {**os.environ, "PATH": f"{where / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}


def project(pkg: Package, sdist: Path, into: Path) -> Path:
    """A fresh repository holding the sdist with the bug planted."""
    work = into / "pkg"
    shutil.copytree(sdist, work)
    code = work / pkg.code
    text = code.read_text()
    right, bug = pkg.lines[:2]
    assert text.count(right) == 1
    code.write_text(text.replace(right, bug))
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
        subprocess.run(
            ["git", "-c", "user.name=b", "-c", "user.email=b@b", *args],
            cwd=work,
            check=True,
            capture_output=True,
        )
    return work


def script(pkg: Package, into: Path) -> Path:
    def edit(old: str, new: str, said: str) -> list[dict[str, object]]:
        call = {"name": "edit_file", "arguments": {"path": pkg.code, "old": old, "new": new}}
        return [{"tool_calls": [call]}, {"text": said}]

    right, bug, wrong, wrong_again = pkg.lines
    write = {"name": "write_file", "arguments": {"path": pkg.new_test, "content": pkg.repro}}
    turns = [
        {"tool_calls": [write]},
        {"text": "The new test fails."},
        *edit(bug, wrong, f"Fixed {pkg.subject}."),
        *edit(wrong, wrong_again, f"Fixed {pkg.subject} again."),
        *edit(wrong_again, right, f"Fixed {pkg.subject} for good."),
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


def one(pkg: Package, template: Path, sdist: Path, env: dict[str, str]) -> tuple[float, float]:
    """The wall time to done, and how much of it the checks after the baseline took."""
    with tempfile.TemporaryDirectory() as tmp:
        work = project(pkg, sdist, Path(tmp))
        model = script(pkg, Path(tmp))
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
                pkg.intent,
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
    ap.add_argument("--package", choices=tuple(PACKAGES), default="more-itertools")
    args = ap.parse_args()
    pkg = PACKAGES[args.package]
    with tempfile.TemporaryDirectory() as tmp:
        sdist = fetch(pkg, Path(tmp) / "sdist")
        env = test_env(pkg, Path(tmp) / "venv") if args.python == "venv" else dict(os.environ)
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
                took, checked = one(pkg, template, sdist, env)
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
    installed = " + ".join((PYTEST, *pkg.test_deps))
    where = f"{installed} in a fresh venv" if args.python == "venv" else "the host's python"
    print(f"{pkg.name} {pkg.version}: {count}; scripted model erring twice, done at iteration 4")
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
