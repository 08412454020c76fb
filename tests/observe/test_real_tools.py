"""Parsers against what real tools print today: colours, wrapped messages, default formats,
collection errors, crashed interpreters, xdist workers and run-to-run noise."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from observe_helpers import pytest_argv, run, write

from looprun.checks.runner import observe_command
from looprun.observe.base import ParseInput
from looprun.observe.junit import JUnitParser
from looprun.observe.regex import RegexParser


def regex(workdir: Path, text: str, preset: str, exit_code: int | None = None):
    log = workdir / f"{preset}.log"
    log.write_text(text, "utf-8")
    return RegexParser().parse(
        ParseInput(workdir=workdir, file=log, exit_code=exit_code, options={"preset": preset})
    )


def test_coloured_pytest_output_is_still_read(buggy_project: Path):
    """CI often forces colour (--color=yes, PY_COLORS): escape codes must not hide failures."""
    proc = run(pytest_argv("--color=yes"), buggy_project)
    assert "\x1b[" in proc.stdout
    obs = regex(buggy_project, proc.stdout, "pytest")
    assert (obs.counts["failed"], obs.counts["passed"]) == (3, 1)
    assert "tests/test_invoice.py::test_total" in obs.facts["failing"]
    assert "\x1b" not in obs.feedback


def test_coloured_tsc_output_is_not_green(tmp_path: Path):
    # what `tsc --pretty` prints (colours on), a report file read without an exit status
    text = (
        "\x1b[96msrc/a.ts\x1b[0m:\x1b[93m1\x1b[0m:\x1b[93m7\x1b[0m - \x1b[91merror\x1b[0m"
        "\x1b[90m TS2322: \x1b[0mType 'string' is not assignable to type 'number'.\n\n"
        '\x1b[7m1\x1b[0m const x: number = "s";\n'
    )
    obs = regex(tmp_path, text, "tsc")
    assert not obs.ok and obs.counts["errors"] == 1
    assert (obs.items[0].file, obs.items[0].line, obs.items[0].rule) == ("src/a.ts", 1, "TS2322")


def test_truncated_summary_message_is_completed_from_the_traceback(buggy_project: Path):
    """The short summary cuts messages to the terminal width; the E line has it all."""
    # pytest never cuts the summary when it believes it runs in CI, so hide that from it.
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "BUILD_NUMBER")}
    env["COLUMNS"] = "50"
    proc = subprocess.run(
        pytest_argv(), cwd=buggy_project, capture_output=True, text=True, env=env, check=False
    )
    assert "..." in proc.stdout  # the summary really was cut
    obs = regex(buggy_project, proc.stdout, "pytest", proc.returncode)
    total = next(i for i in obs.items if i.id.endswith("::test_total"))
    assert total.message == "AssertionError: expected 42, got 41"


MYPY_BAD = """\
def f(x: int) -> str:
    return x


y: list[int] = ["a long string that makes the pretty output wrap its message"]
"""


@pytest.mark.parametrize(
    "flags",
    [
        [],
        ["--show-column-numbers", "--show-error-end"],
        ["--show-column-numbers", "--show-error-end", "--pretty"],
    ],
    ids=["plain", "error-end", "pretty"],
)
def test_mypy_preset_on_real_mypy(tmp_path: Path, flags: list[str]):
    pytest.importorskip("mypy")
    write(tmp_path, {"bad.py": MYPY_BAD})
    proc = run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--no-incremental",
            "--cache-dir",
            os.devnull,
            *flags,
            "bad.py",
        ],
        tmp_path,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    obs = regex(tmp_path, proc.stdout, "mypy")  # read as a report file: no exit status
    assert not obs.ok and obs.counts["errors"] == 2
    rules = {(i.file, i.line, i.rule) for i in obs.items}
    assert rules == {("bad.py", 2, "return-value"), ("bad.py", 5, "list-item")}
    ret = next(i for i in obs.items if i.rule == "return-value")
    assert ret.message.endswith('expected "str")')


def test_eslint_default_stylish_format(tmp_path: Path):
    """ESLint 9 dropped the unix/compact formatters from core: its default output counts."""
    text = (
        f"\n{tmp_path}/src/b.js\n"
        "  1:5   error    'unused' is assigned a value but never used  no-unused-vars\n"
        "  2:15  warning  Unexpected 'debugger' statement              no-debugger\n"
        "\n/elsewhere/c.js\n"
        "  3:1  error  Parsing error: Unexpected token }\n"
        "\n✖ 3 problems (2 errors, 1 warning)\n"
    )
    for preset in ("eslint", "eslint-stylish"):
        obs = regex(tmp_path, text, preset)
        assert not obs.ok
        assert (obs.counts["errors"], obs.counts["warnings"]) == (2, 1)
        found = {(i.file, i.line, i.col, i.rule, i.severity) for i in obs.items}
        assert found == {
            ("src/b.js", 1, 5, "no-unused-vars", "error"),
            ("src/b.js", 2, 15, "no-debugger", "warning"),
            ("/elsewhere/c.js", 3, 1, None, "error"),
        }


def test_collection_error_is_named_by_its_file(tmp_path: Path):
    write(
        tmp_path,
        {
            "tests/test_ok.py": "def test_ok():\n    pass\n",
            "tests/test_broken.py": "import nope_x\n",
        },
    )
    proc = run(pytest_argv("--continue-on-collection-errors", "--junitxml=r.xml"), tmp_path)
    obs = JUnitParser().parse(
        ParseInput(workdir=tmp_path, file=tmp_path / "r.xml", exit_code=proc.returncode)
    )
    assert not obs.ok and obs.counts["errors"] == 1
    assert list(obs.facts["failing"]) == ["tests/test_broken.py"]
    assert "tests/test_broken.py:1: ModuleNotFoundError: No module named 'nope_x'" in obs.feedback


CRASH = """\
import ctypes


def test_fine():
    pass


def test_crash():
    ctypes.string_at(0)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_segfault_mid_run_names_where_it_died(tmp_path: Path):
    write(tmp_path, {"test_seg.py": CRASH})
    cmd = " ".join(shlex.quote(a) for a in pytest_argv("-q", "--junitxml=r.xml"))
    junit = observe_command("junit", workdir=tmp_path, command=cmd, file=Path("r.xml"))
    assert not junit.ok and junit.exit_code not in (0, None)
    assert "r.xml: report not found" in (junit.error or "")
    assert "Segmentation fault in test_crash (test_seg.py:9)" in junit.feedback
    text = observe_command("regex", workdir=tmp_path, command=cmd, options={"preset": "pytest"})
    assert not text.ok
    crash = text.items[0]
    assert (crash.file, crash.line) == ("test_seg.py", 9)
    assert "Segmentation fault" in crash.message


NOISY = """\
import pytest


@pytest.fixture
def resource():
    raise RuntimeError(f"cannot open handle {id(object())}")


def test_uses(resource):
    pass


@pytest.mark.parametrize("n", range(4))
def test_n(n, tmp_path):
    assert n < 0, f"{tmp_path} at {object()!r}"
"""


# xdist named: the suite keeps its own plugins out of the pytest runs it starts
_XDIST = ("-p", "xdist", "-n", "2", "-p", "no:randomly", "--junitxml=r.xml")


def test_signature_ignores_decimal_addresses_and_xdist_workers(tmp_path: Path):
    pytest.importorskip("xdist")
    signatures = set()
    for name in ("one", "two"):
        root = tmp_path / name
        write(root, {"test_noise.py": NOISY})
        run(pytest_argv(*_XDIST), root)
        obs = JUnitParser().parse(ParseInput(workdir=root, file=root / "r.xml"))
        assert (obs.counts["failed"], obs.counts["errors"]) == (4, 1)
        signatures.add(obs.signature)
    assert len(signatures) == 1
    changed = tmp_path / "two" / "test_noise.py"
    changed.write_text(NOISY.replace("cannot open", "cannot close"))
    run(pytest_argv(*_XDIST), tmp_path / "two")
    again = JUnitParser().parse(ParseInput(workdir=tmp_path / "two", file=tmp_path / "two/r.xml"))
    assert again.signature not in signatures


def test_failure_types_name_the_exception_each_failing_test_raised(tmp_path: Path):
    """A reproduction is judged by what its failure raised: a broken test (ImportError,
    NameError) is told apart from an assertion or the bug's own exception."""
    write(
        tmp_path,
        {
            "shop.py": "class OutOfStock(ValueError):\n    pass\n\n\n"
            "def take(n):\n    raise OutOfStock(n)\n",
            "tests/test_shop.py": """\
                import pytest
                import shop


                def test_assert():
                    assert shop.__name__ == "store"

                def test_message():
                    assert False, "explained"

                def test_import():
                    from shop import give

                def test_name():
                    nothere()

                def test_own_exception():
                    shop.take(1)

                def test_fail():
                    pytest.fail("no")

                def test_pass():
                    pass
                """,
        },
    )
    proc = run(pytest_argv("--junitxml=r.xml"), tmp_path)
    obs = JUnitParser().parse(
        ParseInput(workdir=tmp_path, file=tmp_path / "r.xml", exit_code=proc.returncode)
    )
    assert dict(obs.facts["failure_types"]) == {
        "tests/test_shop.py::test_assert": "AssertionError",
        "tests/test_shop.py::test_message": "AssertionError",
        "tests/test_shop.py::test_import": "ImportError",
        "tests/test_shop.py::test_name": "NameError",
        "tests/test_shop.py::test_own_exception": "OutOfStock",
        "tests/test_shop.py::test_fail": "Failed",
    }
