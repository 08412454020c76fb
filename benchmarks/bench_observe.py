"""Observe benchmarks: JUnit parsing at scale, and feedback size from a huge pytest log.

    python benchmarks/bench_observe.py [--cases 100000] [--runs 5] [--every 50] [--frames 40]
        [--errors 500] [--skips 33] [--shape both|gentle|failing]

1. Generates JUnit files of N test cases in two shapes and times ``looprun observe junit
   FILE`` against junitparser alone reading the same file, each in a fresh process (medians
   of several runs, interleaved; their ratio; peak RSS of each process), then in-process
   (peak Python memory via tracemalloc):
   - gentle: one in ``--every`` failing, one in ``--errors`` erring, each with a traceback
     of ``--frames`` frames, one in ``--skips`` skipped;
   - failing: what a broken suite writes, as pytest writes it: 30% failing (parametrized
     ids, a multi-line message, a 20-frame traceback, captured stdout and stderr), 10%
     erring in setup with their own tracebacks, 10% skipped.
2. Generates a ~10 MB failing pytest log and checks that the pytest-text fallback's
   feedback stays under 4 KB while naming every failing test id and the first assertion.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from junitparser import JUnitXml

from looprun.observe.base import ParseInput
from looprun.observe.junit import JUnitParser
from looprun.observe.regex import RegexParser


def _traceback(n: int, frames: int) -> str:
    """A long pytest-style traceback: library frames, then the test's own."""
    lines = []
    for f in range(frames):
        lines.append(
            f"/usr/lib/python3/site-packages/lib{f % 7}/core.py:{100 + f}: in call_{f}\n"
            f"    return self._inner_{f}(value, *args, **kwargs)\n"
        )
    lines.append(
        f"tests/test_mod{n // 1000}.py:{n % 500 + 3}: in test_{n}\n"
        f"    assert f({n}) == {n}\n"
        f"E       AssertionError: expected {n}, got {n + 1}\n"
        f"E       assert {n + 1} == {n}\n"
    )
    return "".join(lines).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def make_junit(
    path: Path, cases: int, every: int = 100, frames: int = 0, errors: int = 0, skips: int = 0
) -> tuple[int, int]:
    """N cases, one in ``every`` failing, one in ``errors`` erring (0: none), one in
    ``skips`` skipped (0: none); ``frames`` > 0 gives each failure and error a traceback of
    that many frames (long text, as a real suite's failures have). Returns (failing, erring)."""
    failing = erring = 0
    with path.open("w", encoding="utf-8") as fh:
        fh.write('<?xml version="1.0" encoding="utf-8"?>\n<testsuites>\n')
        per_suite = 1000
        for s in range(0, cases, per_suite):
            fh.write(f'<testsuite name="pytest" tests="{per_suite}">\n')
            for n in range(s, min(cases, s + per_suite)):
                cls = f"tests.test_mod{n // per_suite}"
                if n % every == 7 % every:
                    failing += 1
                    text = (
                        _traceback(n, frames)
                        if frames
                        else f"def test_{n}():\n&gt;       assert f({n}) == {n}\n"
                        f"E       AssertionError: expected {n}, got {n + 1}\n\n"
                        f"tests/test_mod{n // per_suite}.py:{n % 500 + 3}: AssertionError"
                    )
                    fh.write(
                        f'<testcase classname="{cls}" name="test_{n}" time="0.01">'
                        f'<failure message="AssertionError: expected {n}, got {n + 1}">'
                        f"{text}</failure></testcase>\n"
                    )
                elif errors and n % errors == 11 % errors:
                    erring += 1
                    text = _traceback(n, frames) if frames else "fixture 'db' not found"
                    fh.write(
                        f'<testcase classname="{cls}" name="test_{n}" time="0.01">'
                        f'<error message="failed on setup with &quot;RuntimeError: db {n} '
                        f'down&quot;">{text}</error></testcase>\n'
                    )
                elif skips and n % skips == 5 % skips:
                    fh.write(
                        f'<testcase classname="{cls}" name="test_{n}" time="0.0">'
                        f'<skipped type="pytest.skip" message="needs a GPU">'
                        f"tests/test_mod{n // per_suite}.py:{n % 500 + 3}: needs a GPU"
                        "</skipped></testcase>\n"
                    )
                else:
                    fh.write(f'<testcase classname="{cls}" name="test_{n}" time="0.001"/>\n')
            fh.write("</testsuite>\n")
        fh.write("</testsuites>\n")
    return failing, erring


def _broken_case(n: int, cls: str, file: str) -> str:
    """One case of a broken suite: every third of ten fails, one in ten errs in setup, one
    in ten is skipped, the rest pass; failures carry what pytest captured."""
    kind = n % 10
    head = f'<testcase classname="{cls}" name="test_value[{n}]" file="{file}" line="{n % 400}"'
    if kind in (1, 4, 7):
        message = (
            f"AssertionError: value {n} is wrong&#10;assert {n + 1} == {n}&#10;"
            f" +  where {n + 1} = compute({n})"
        )
        out = "".join(f"debug: step {i} of test {n} reached\n" for i in range(12))
        return (
            f'{head} time="0.02"><failure message="{message}">{_traceback(n, 20)}'
            f"</failure><system-out>{out}</system-out>"
            f"<system-err>warning: retrying connection {n}\n</system-err></testcase>\n"
        )
    if kind == 2:
        return (
            f'{head} time="0.01"><error message="failed on setup with &quot;'
            f'ConnectionError: db {n} refused&quot;">{_traceback(n, 15)}'
            "E   ConnectionError: connection refused\n</error></testcase>\n"
        )
    if kind == 9:
        return (
            f'{head} time="0.0"><skipped type="pytest.skip" message="needs a GPU">'
            f"{file}:{n % 400}: needs a GPU</skipped></testcase>\n"
        )
    return f'{head} time="0.003"/>\n'


def make_broken_junit(path: Path, cases: int) -> tuple[int, int]:
    """A failure-heavy report of N cases (see ``_broken_case``). Returns (failing, erring)."""
    failing = erring = 0
    per_suite = 500
    with path.open("w", encoding="utf-8") as fh:
        fh.write('<?xml version="1.0" encoding="utf-8"?>\n<testsuites>\n')
        for s in range(0, cases, per_suite):
            fh.write(f'<testsuite name="pytest" tests="{per_suite}">\n')
            cls, file = f"tests.test_mod{s}", f"tests/test_mod{s}.py"
            for n in range(s, min(cases, s + per_suite)):
                failing += n % 10 in (1, 4, 7)
                erring += n % 10 == 2
                fh.write(_broken_case(n, cls, file))
            fh.write("</testsuite>\n")
        fh.write("</testsuites>\n")
    return failing, erring


ALONE = """
import sys
from junitparser import JUnitXml
tests = failed = 0
for suite in JUnitXml.fromfile(sys.argv[1]):
    for case in suite:
        tests += 1
        failed += not case.is_passed and not case.is_skipped
print(tests, failed)
"""


# As an installed copy runs: compiled modules cached (.pyc). Where the environment forbids
# writing them, every fresh process would compile looprun from source (junitparser keeps
# the .pyc files its installation wrote), which is not what a user pays.
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def fresh(cmd: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system) and peak RSS (MB) of one fresh process.
    CPU time is what the process itself cost: on a loaded machine the wall time also
    counts the time other processes had the cores."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=_ENV)
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) not in (0, 1):  # observe exits 1: tests failed
        raise SystemExit(f"{cmd[:4]} failed")
    return took, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def compare_fresh(report: Path, runs: int) -> None:
    ours, alone = [], []
    fresh([sys.executable, "-m", "looprun", "observe", "junit", str(report)])  # .pyc written
    for _ in range(runs):
        ours.append(fresh([sys.executable, "-m", "looprun", "observe", "junit", str(report)]))
        alone.append(fresh([sys.executable, "-c", ALONE, str(report)]))
    o_s, a_s = statistics.median(t for t, _, _ in ours), statistics.median(t for t, _, _ in alone)
    o_c, a_c = statistics.median(c for _, c, _ in ours), statistics.median(c for _, c, _ in alone)
    o_mb, a_mb = max(m for _, _, m in ours), max(m for _, _, m in alone)
    print("  fresh processes (interpreter start-up included), medians, interleaved:")
    print(f"    looprun observe junit : {o_s:.2f} s wall, {o_c:.2f} s CPU, peak RSS {o_mb:.0f} MB")
    print(f"    junitparser alone     : {a_s:.2f} s wall, {a_c:.2f} s CPU, peak RSS {a_mb:.0f} MB")
    print(f"    ratio (ours / alone)  : wall {o_s / a_s:.2f}x, CPU {o_c / a_c:.2f}x")


def junitparser_alone(path: Path) -> tuple[int, int]:
    xml = JUnitXml.fromfile(str(path))
    tests = failed = 0
    for suite in xml:
        for case in suite:
            tests += 1
            if not case.is_passed and not case.is_skipped:
                failed += 1
    return tests, failed


def timed(fn: Callable[[], object], runs: int) -> tuple[float, float, float]:
    """Median wall and CPU seconds over ``runs``, and peak traced memory (MB) of one
    extra run."""
    times, cpu = [], []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return statistics.median(times), statistics.median(cpu), peak / 1e6


def make_pytest_log(path: Path, target_bytes: int, failures: int) -> None:
    noise = "".join(
        f"captured line {i}: some debug output with values {i * 7}\n" for i in range(50)
    )
    with path.open("w", encoding="utf-8") as fh:
        fh.write(
            "============================= test session starts ==============================\n"
        )
        fh.write("collected 5000 items\n\n")
        fh.write(
            "=================================== FAILURES ===================================\n"
        )
        per = max(1, target_bytes // failures)
        for n in range(failures):
            fh.write(f"{'_' * 30} test_case_{n} {'_' * 30}\n\n")
            fh.write(f"    def test_case_{n}():\n>       assert compute({n}) == {n * 2}\n")
            fh.write(
                f"E       assert {n * 2 + 1} == {n * 2}\n"
                f"E        +  where {n * 2 + 1} = compute({n})\n\n"
            )
            fh.write(f"tests/test_big.py:{n * 4 + 10}: AssertionError\n")
            fh.write(
                "----------------------------- Captured stdout call -----------------------------\n"
            )
            written = 0
            while written < per:
                fh.write(noise)
                written += len(noise)
        fh.write(
            "=========================== short test summary info ============================\n"
        )
        for n in range(failures):
            fh.write(f"FAILED tests/test_big.py::test_case_{n} - assert {n * 2 + 1} == {n * 2}\n")
        fh.write(f"{'=' * 17} {failures} failed, {5000 - failures} passed in 12.34s {'=' * 17}\n")


def in_process(root: Path, report: Path, cases: int, failing: int, erring: int, runs: int) -> None:
    """One report parsed in this process, ours against junitparser."""
    parser = JUnitParser()
    data = ParseInput(workdir=root, file=report)
    obs = parser.parse(data)
    assert obs.counts["tests"] == cases and obs.counts["failed"] == failing, obs.counts
    assert obs.counts["errors"] == erring, obs.counts
    assert len(obs.facts["failing"]) == failing + erring
    assert junitparser_alone(report) == (cases, failing + erring)
    ours, ours_cpu, ours_mb = timed(lambda: parser.parse(data), runs)
    alone, alone_cpu, alone_mb = timed(lambda: junitparser_alone(report), runs)
    print("  in-process (after imports), medians:")
    for name, wall, cpu, mb in (
        ("looprun junit parser", ours, ours_cpu, ours_mb),
        ("junitparser alone   ", alone, alone_cpu, alone_mb),
    ):
        print(f"  {name} : {wall:.3f} s wall, {cpu:.3f} s CPU, peak {mb:.1f} MB")
    print(
        f"  ratio (ours / alone) : wall {ours / alone:.2f}x, CPU {ours_cpu / alone_cpu:.2f}x, "
        f"memory {ours_mb / alone_mb:.2f}x"
    )
    print(f"  feedback             : {len(obs.feedback.encode())} bytes")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--failures", type=int, default=60)
    ap.add_argument("--every", type=int, default=50, help="one case in N fails (50: 2%%)")
    ap.add_argument("--frames", type=int, default=40, help="frames per failure's traceback")
    ap.add_argument("--errors", type=int, default=500, help="one case in N errs (500: 0.2%%)")
    ap.add_argument("--skips", type=int, default=33, help="one case in N skipped (33: 3%%)")
    ap.add_argument("--shape", choices=("both", "gentle", "failing"), default="both")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="looprun-bench-") as tmp:
        root = Path(tmp)
        shapes: list[tuple[Path, int, int, str]] = []
        if args.shape in ("both", "gentle"):
            report = root / "gentle.xml"
            failing, erring = make_junit(
                report, args.cases, args.every, args.frames, args.errors, args.skips
            )
            shapes.append((report, failing, erring, f"one in {args.skips} skipped"))
        if args.shape in ("both", "failing"):
            report = root / "failing.xml"
            failing, erring = make_broken_junit(report, args.cases)
            shape = "failure-heavy: 10% skipped, multi-line messages, captured output"
            shapes.append((report, failing, erring, shape))
        # every fresh process first: a child's peak RSS counts what this process held
        # when it forked, which the in-process runs grow
        for report, failing, erring, shape in shapes:
            size_mb = report.stat().st_size / 1e6
            print(
                f"junit {report.stem}: {args.cases} cases ({failing} failing, {erring} "
                f"erring, {shape}), {size_mb:.1f} MB"
            )
            compare_fresh(report, args.runs)
        for report, failing, erring, _ in shapes:
            print(f"junit {report.stem}:")
            in_process(root, report, args.cases, failing, erring, args.runs)
            report.unlink()

        log = root / "pytest.log"
        make_pytest_log(log, 10_000_000, args.failures)
        start = time.perf_counter()
        text_obs = RegexParser().parse(
            ParseInput(workdir=root, file=log, exit_code=1, options={"preset": "pytest"})
        )
        took = time.perf_counter() - start
        fb = text_obs.feedback
        # an id is named on its own line or among a file's ids (``f.py::{test_a, test_b}``)
        named = sum(bool(re.search(rf"\btest_case_{n}\b", fb)) for n in range(args.failures))
        print(
            f"pytest log: {log.stat().st_size / 1e6:.1f} MB, {args.failures} failing tests, "
            f"parsed in {took:.2f} s"
        )
        print(
            f"  feedback: {len(fb.encode())} bytes (limit 4096); names {named}/{args.failures} "
            f"failing ids; first assertion present: {'assert 1 == 0' in fb}"
        )
        assert len(fb.encode()) < 4096 and named == args.failures and "assert 1 == 0" in fb


if __name__ == "__main__":
    main()
