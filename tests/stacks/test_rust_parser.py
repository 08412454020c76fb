"""The cargo_test and cargo_diagnostics parsers on the real toolchain's output: small crates
written to tmp_path, ``cargo test`` / ``cargo clippy`` run for real, the output parsed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.stacks.rust_support import (
    cargo_diagnostics,
    cargo_test,
    crate,
    require_clippy,
    run_cargo,
)

from looprun.observe.base import ParseInput
from looprun.observe.cargo_test import CargoTestParser
from looprun.observe.registry import declared_empty_facts, get_parser, parser_facts

LIB = """\
/// Adds two numbers.
///
/// ```
/// assert_eq!(calc::add(1, 2), 3);
/// ```
pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

/// Halves a number (its doctest is wrong on purpose).
///
/// ```
/// assert_eq!(calc::half(8), 5);
/// ```
pub fn half(a: i32) -> i32 {
    a / 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds() {
        assert_eq!(add(2, 2), 4);
    }

    #[test]
    fn adds_wrong() {
        assert_eq!(add(2, 2), 5, "two and two");
    }

    #[test]
    fn unwraps_none() {
        let v: Option<i32> = None;
        v.unwrap();
    }

    #[test]
    fn divides_by_zero() {
        let zero = add(0, 0);
        half(1 / zero);
    }

    #[test]
    #[ignore]
    fn slow() {}

    #[test]
    #[should_panic]
    fn panics_as_expected() {
        panic!("expected");
    }
}
"""

IT = """\
#[test]
fn adds_in_it() {
    assert_eq!(calc::add(1, 1), 2);
}

#[test]
fn half_in_it() {
    assert!(calc::half(3) == 2, "half of three");
}
"""


def line_of(text: str, needle: str, nth: int = 1) -> int:
    """The 1-based line of the ``nth`` line holding ``needle``."""
    found = [n for n, line in enumerate(text.splitlines(), 1) if needle in line]
    return found[nth - 1]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object, int]:
    root = crate(tmp_path_factory.mktemp("mixed") / "calc", "calc", {"src/lib.rs": LIB})
    (root / "tests").mkdir()
    (root / "tests/it.rs").write_text(IT)
    obs, code = cargo_test(root)
    return root, obs, code


@pytest.mark.e2e
def test_ids_counts_and_types_of_a_real_run(mixed):
    _, obs, code = mixed
    facts = obs.to_facts()
    assert code == 101
    # unit: adds, panics_as_expected pass; 3 fail; 1 ignored. it: 1 pass, 1 fail.
    # doc: add passes, half fails
    assert (facts["passed"], facts["failed"], facts["skipped"], facts["errors"]) == (4, 5, 1, 0)
    assert set(facts["passing"]) == {
        "src/lib.rs::tests::adds",
        "src/lib.rs::tests::panics_as_expected",
        "tests/it.rs::adds_in_it",
        "doc::src/lib.rs - add",
    }
    assert facts["failure_types"] == {
        "src/lib.rs::tests::adds_wrong": "",
        "src/lib.rs::tests::unwraps_none": "panic",
        "src/lib.rs::tests::divides_by_zero": "panic",
        # assert!(cond, "message") panics with the message alone, as panic!("message") does
        "tests/it.rs::half_in_it": "panic",
        "doc::src/lib.rs - half": "",
    }
    assert facts["consistent"] is True and facts["tampering"] == ""
    assert obs.ok is False


@pytest.mark.e2e
def test_feedback_names_id_file_line_and_message(mixed):
    _, obs, _ = mixed
    by_id = {i.id: i for i in obs.items}
    wrong = by_id["src/lib.rs::tests::adds_wrong"]
    assert (wrong.file, wrong.line) == ("src/lib.rs", line_of(LIB, "assert_eq!(add(2, 2), 5"))
    # Rust >= 1.73: assertion `left == right` failed: two and two / left: 4 / right: 5;
    # before: assertion failed: `(left == right)` / left: `4`, / right: `5`: two and two
    assert wrong.message.startswith("assertion")
    assert "two and two" in wrong.message + wrong.detail
    assert re.search(r"left: `?4", wrong.detail) and re.search(r"right: `?5", wrong.detail)
    div = by_id["src/lib.rs::tests::divides_by_zero"]
    assert (div.file, div.line) == ("src/lib.rs", line_of(LIB, "half(1 / zero)"))
    assert div.message == "attempt to divide by zero"
    it = by_id["tests/it.rs::half_in_it"]
    assert (it.file, it.line) == ("tests/it.rs", 8)
    assert it.message == "half of three"
    doc = by_id["doc::src/lib.rs - half"]
    # the doctest's line (its fence), not the generated code's
    assert (doc.file, doc.line) == ("src/lib.rs", line_of(LIB, "/// ```", 3))
    assert f"src/lib.rs::tests::adds_wrong (src/lib.rs:{wrong.line}): assertion" in obs.feedback
    assert "tests/it.rs::half_in_it (tests/it.rs:8)" in obs.feedback
    # the integration test's own file and the frames of the backtrace are failure files
    assert obs.to_facts()["failure_files"]["tests/it.rs::half_in_it"] == ["tests/it.rs"]
    assert obs.to_facts()["failure_files"]["src/lib.rs::tests::divides_by_zero"] == ["src/lib.rs"]


@pytest.mark.e2e
def test_a_test_that_returns_err_fails_with_type_err(tmp_path: Path):
    """Alone in its binary: before Rust 1.7x the Err is written to stderr uncaptured, where
    it can land inside another test's result line."""
    lib = "pub fn parse(s: &str) -> Result<i32, std::num::ParseIntError> {\n    s.parse()\n}\n"
    test = (
        "use std::num::ParseIntError;\n\n#[test]\nfn returns_err() -> Result<(), ParseIntError> {\n"
        '    errs::parse("x")?;\n    Ok(())\n}\n'
    )
    root = crate(tmp_path / "errs", "errs", {"src/lib.rs": lib, "tests/it.rs": test})
    obs, _ = cargo_test(root)
    assert obs.to_facts()["failure_types"] == {"tests/it.rs::returns_err": "Err"}
    assert obs.items[0].message.startswith("the test returned")
    assert obs.items[0].file == "tests/it.rs"
    assert obs.facts["consistent"] is True


@pytest.mark.e2e
def test_a_crate_that_does_not_compile_is_compile_errors_with_locations(tmp_path: Path):
    root = crate(tmp_path / "broken", "broken", {"src/lib.rs": "pub fn one() -> i32 { 1 }\n"})
    (root / "tests").mkdir()
    (root / "tests/new.rs").write_text("#[test]\nfn t() {\n    assert_eq!(broken::two(), 2);\n}\n")
    obs, code = cargo_test(root)
    assert code == 101
    assert obs.to_facts()["failing"] == ["build::tests/new.rs"]
    assert obs.to_facts()["failure_types"] == {"build::tests/new.rs": "CompileError"}
    assert (obs.counts["errors"], obs.counts["passed"]) == (1, 0)
    (item,) = obs.items
    assert (item.file, item.line, item.col) == ("tests/new.rs", 3, 24)
    assert item.message.startswith("error[E0425]: cannot find function `two`")
    assert obs.ok is False and obs.facts["consistent"] is True


FORGE = """\
use std::io::Write;

#[test]
fn honest_failure() {
    assert_eq!(forge::answer(), 42);
}

#[test]
fn forger() {
    // io::stdout() is not captured by libtest: this lands in cargo's output
    let mut out = std::io::stdout();
    writeln!(out, "test honest_failure ... ok").unwrap();
}
"""


@pytest.mark.e2e
def test_a_test_that_prints_a_verdict_is_tampering(tmp_path: Path):
    root = crate(tmp_path / "forge", "forge", {"src/lib.rs": "pub fn answer() -> i32 { 41 }\n"})
    (root / "tests").mkdir()
    (root / "tests/it.rs").write_text(FORGE)
    obs, _ = cargo_test(root)
    assert obs.facts["consistent"] is False
    assert "reported twice" in obs.facts["tampering"]
    assert obs.ok is False
    assert "tampered" in obs.feedback


EXIT = """\
#[test]
fn fails() {
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(quit::answer(), 42);
}

#[test]
fn quits() {
    println!("test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out");
    std::process::exit(0);
}
"""


@pytest.mark.e2e
def test_a_test_that_exits_the_process_is_tampering_not_a_pass(tmp_path: Path):
    root = crate(tmp_path / "quit", "quit", {"src/lib.rs": "pub fn answer() -> i32 { 41 }\n"})
    (root / "tests").mkdir()
    (root / "tests/it.rs").write_text(EXIT)
    obs, code = cargo_test(root)
    assert code == 0  # cargo believed the binary passed: the failing test never reported
    assert obs.facts["consistent"] is False
    assert "without its `test result` line" in obs.facts["tampering"]
    assert obs.ok is False


@pytest.mark.e2e
def test_a_binary_that_dies_is_an_error_item(tmp_path: Path):
    root = crate(tmp_path / "dies", "dies", {"src/lib.rs": "pub fn f() {}\n"})
    (root / "tests").mkdir()
    (root / "tests/it.rs").write_text("#[test]\nfn aborts() {\n    std::process::abort();\n}\n")
    obs, code = cargo_test(root)
    assert code == 101
    assert obs.to_facts()["failing"] == ["tests/it.rs::<binary>"]
    assert obs.to_facts()["failure_types"] == {"tests/it.rs::<binary>": "crash"}
    assert "SIGABRT" in obs.items[0].message
    assert obs.facts["consistent"] is True and obs.ok is False


@pytest.mark.e2e
def test_all_passing_is_ok_and_an_ignored_test_is_skipped(tmp_path: Path):
    root = crate(
        tmp_path / "green",
        "green",
        {"src/lib.rs": "#[test]\nfn a() {}\n#[test]\n#[ignore]\nfn b() {}\n"},
    )
    obs, code = cargo_test(root)
    assert code == 0
    assert obs.ok is True
    assert (obs.counts["passed"], obs.counts["skipped"]) == (1, 1)
    assert obs.to_facts()["passing"] == ["src/lib.rs::a"]


@pytest.mark.e2e
def test_clippy_findings(tmp_path: Path):
    root = crate(
        tmp_path / "lint",
        "lint",
        {"src/lib.rs": "pub fn v() -> usize {\n    let v = vec![1, 2];\n    v.len()\n}\n"},
    )
    require_clippy(root)
    obs = cargo_diagnostics(root, "clippy")
    assert obs.ok is True and obs.facts["errors"] == 0
    (item,) = obs.items
    assert (item.rule, item.file, item.line, item.severity) == (
        "clippy::useless_vec",
        "src/lib.rs",
        2,
        "warning",
    )


@pytest.mark.e2e
def test_rustc_warnings_and_compile_errors_without_clippy(tmp_path: Path):
    """`cargo check`, the pack's lint where clippy is not installed: one finding for a file
    two targets compile (the lib and its tests), errors with their code and location."""
    lib = "pub fn v() -> usize {\n    let unused = 1;\n    2\n}\n#[test]\nfn t() {}\n"
    root = crate(tmp_path / "check", "check", {"src/lib.rs": lib})
    obs = cargo_diagnostics(root, "check")
    assert obs.ok is True and obs.facts["errors"] == 0
    (item,) = obs.items
    assert (item.rule, item.file, item.line, item.col) == ("unused_variables", "src/lib.rs", 2, 9)
    (root / "src/lib.rs").write_text("pub fn v() -> usize {\n    missing()\n}\n")
    obs = cargo_diagnostics(root, "check")
    assert obs.facts["errors"] == 1 and obs.ok is False
    assert (obs.items[0].rule, obs.items[0].line, obs.items[0].severity) == ("E0425", 2, "error")
    assert "src/lib.rs:2:5: error [E0425]" in obs.feedback


def test_cargo_that_never_ran_a_test_is_an_unusable_observation(tmp_path: Path):
    out = tmp_path / "out.txt"
    out.write_text("error: could not find `Cargo.toml` in `/x` or any parent directory\n")
    obs = CargoTestParser().parse(ParseInput(workdir=tmp_path, file=out, exit_code=101))
    assert obs.ok is False
    assert obs.error and "could not find `Cargo.toml`" in obs.error
    assert obs.facts["passed"] == 0 and obs.facts["consistent"] is True


def test_bad_input_never_raises(tmp_path: Path):
    parser = CargoTestParser()
    assert parser.parse(ParseInput(workdir=tmp_path)).ok is False
    missing = parser.parse(ParseInput(workdir=tmp_path, file=tmp_path / "none", exit_code=0))
    assert missing.ok is False and "not found" in (missing.error or "")
    binary = tmp_path / "bin"
    binary.write_bytes(
        b"\xff\x00\xfe" * 100 + b"\n     Running tests/x.rs (t/x-0123456789abcdef)\n"
    )
    obs = parser.parse(ParseInput(workdir=tmp_path, file=binary, exit_code=0))
    assert obs.ok is False  # a binary with no summary, and cargo exited 0
    assert obs.facts["consistent"] is False


def test_exit_101_without_a_failure_is_tampering(tmp_path: Path):
    text = (
        "     Running unittests src/lib.rs (target/debug/deps/x-0123456789abcdef)\n\n"
        "running 1 test\ntest a ... ok\n\n"
        "test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n"
    )
    obs = CargoTestParser().parse(ParseInput(workdir=tmp_path, output=text, exit_code=101))
    assert obs.facts["consistent"] is False and "exited 101" in obs.facts["tampering"]
    assert obs.ok is False


def test_registered_with_the_junit_facts():
    assert parser_facts("cargo_test") == frozenset(declared_empty_facts("junit") or {})
    assert declared_empty_facts("cargo_test") == declared_empty_facts("junit")
    assert get_parser("cargo_test").name == "cargo_test"
    assert get_parser("cargo_diagnostics").name == "cargo_diagnostics"


@pytest.mark.e2e
def test_output_file_is_read_as_cargo_wrote_it(tmp_path: Path):
    """stdout and stderr in one file: compile warnings before the run do not count."""
    root = crate(
        tmp_path / "warn",
        "warn",
        {"src/lib.rs": "fn unused() {}\n#[test]\nfn a() {}\n"},
    )
    out_file, code = run_cargo(root, "test", "--no-fail-fast")
    assert "warning" in out_file.read_text()
    obs = CargoTestParser().parse(ParseInput(workdir=root, file=out_file, exit_code=code))
    assert obs.ok is True and obs.counts["errors"] == 0


@pytest.mark.e2e
def test_workspace_crates_with_the_same_paths_get_distinct_ids(tmp_path: Path):
    """Two members each with src/lib.rs: the crate goes in front of a unit test's id;
    locations and doctest names are the workspace's paths; two doctests on one item are
    told apart by their order in the file, not by their line."""
    doc = "/// ```\n/// assert!(true);\n/// ```\n///\n/// ```\n/// assert!(false);\n/// ```\n"
    root = tmp_path / "ws"
    for name, right in (("alpha", 1), ("beta", 2)):
        test = f"#[test]\nfn t() {{\n    assert_eq!(1, {right});\n}}\n"
        crate(root / name, name, {"src/lib.rs": f"{doc}pub fn f() {{}}\n{test}"})
    (root / "Cargo.toml").write_text('[workspace]\nmembers = ["alpha", "beta"]\nresolver = "2"\n')
    obs, _ = cargo_test(root)
    facts = obs.to_facts()
    # doctest names carry the workspace path since Rust 1.7x, the package path before
    new = "alpha/src/lib.rs - f" in (tmp_path / "ws-test.txt").read_text()
    doc = {
        name: f"{name}@doc::{name + '/' if new else ''}src/lib.rs - f" for name in ("alpha", "beta")
    }
    assert sorted(facts["passing"]) == sorted(["alpha@src/lib.rs::t", doc["alpha"], doc["beta"]])
    assert sorted(facts["failing"]) == sorted(
        ["beta@src/lib.rs::t", doc["alpha"] + "#2", doc["beta"] + "#2"]
    )
    (item,) = [i for i in obs.items if i.id == "beta@src/lib.rs::t"]
    assert (item.file, item.line) == ("beta/src/lib.rs", 11)
    assert facts["consistent"] is True


def test_thousands_of_failures_give_bounded_feedback(tmp_path: Path):
    """Memory and feedback stay bounded: every failure counted, a few KB of feedback."""
    n = 3000
    lines = ["     Running unittests src/lib.rs (t/x-0123456789abcdef)", f"running {n} tests"]
    lines += [f"test t{i} ... FAILED" for i in range(n)] + ["", "failures:", ""]
    for i in range(n):
        lines += [f"---- t{i} stdout ----", f"thread 't{i}' panicked at src/lib.rs:{i + 1}:5:"]
        lines += [f"boom {i}", ""]
    lines += ["failures:", *(f"    t{i}" for i in range(n)), ""]
    lines.append(
        f"test result: FAILED. 0 passed; {n} failed; 0 ignored; 0 measured; 0 filtered out"
    )
    obs = CargoTestParser().parse(
        ParseInput(workdir=tmp_path, output="\n".join(lines), exit_code=101)
    )
    assert obs.counts["failed"] == n and obs.facts["consistent"] is True
    assert len(obs.feedback.encode()) <= 4096
    assert "src/lib.rs::t0 (src/lib.rs:1): boom 0" in obs.feedback
