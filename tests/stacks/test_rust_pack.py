"""The Rust pack's forbidden patterns, read from the pack itself: each refuses the trick it
names, in the files it names, and lets the everyday code next to it through. (The e2e test
shows the engine enforcing them on a real run; this one covers every pattern quickly.)"""

from __future__ import annotations

import re
from pathlib import Path

import pathspec
import pytest
import yaml

PACK = Path(__file__).resolve().parents[2] / "templates" / "observers" / "rust.yaml"
TESTS_GLOB = "tests/**"  # the pack's default, what `{{ inputs.tests_glob }}` renders to


def _rules() -> list[dict[str, object]]:
    pack = yaml.safe_load(PACK.read_text())
    assert pack["inputs"]["tests_glob"]["default"] == TESTS_GLOB
    return pack["act"]["constraints"]["forbidden_patterns"]


def _refused(text: str, path: str) -> list[str]:
    """The messages of the rules that refuse ``text`` written to ``path``."""
    out = []
    for rule in _rules():
        assert isinstance(rule, dict)
        pattern = str(rule["pattern"])
        found = re.compile(pattern[3:] if pattern.startswith("re:") else re.escape(pattern))
        globs = [str(g).replace("{{ inputs.tests_glob }}", TESTS_GLOB) for g in rule["paths"]]
        exclude = [
            str(g).replace("{{ inputs.tests_glob }}", TESTS_GLOB) for g in rule.get("exclude", [])
        ]
        where = pathspec.GitIgnoreSpec.from_lines(globs)
        skip = pathspec.GitIgnoreSpec.from_lines(exclude)
        if where.match_file(path) and not skip.match_file(path) and found.search(text):
            out.append(str(rule["message"]))
    return out


@pytest.mark.parametrize(
    ("text", "path", "why"),
    [
        ("#[test]\n#[ignore]\nfn slow() {}", "tests/it.rs", "may not be ignored"),
        ('#[ignore = "flaky"]', "src/lib.rs", "may not be ignored"),
        ("#[cfg_attr(all(), ignore)]", "tests/it.rs", "may not be ignored"),
        ("#[test]\n#[should_panic]\nfn t() {}", "src/lib.rs", "expect a panic"),
        ("std::process::exit(0);", "tests/it.rs", "behind libtest"),
        ("process::exit(0)", "src/lib.rs", "behind libtest"),
        ('extern "C" { fn _exit(code: i32) -> !; }', "src/lib.rs", "behind libtest"),
        ('println!("test it_works ... ok");', "src/lib.rs", "verdict line"),
        ('print!("test result: ok. 3 passed");', "tests/it.rs", "verdict line"),
        ("if cfg!(test) { return 0; }", "src/lib.rs", "test build"),
        ("#[cfg(not(test))]\nfn real() {}", "src/lib.rs", "test build"),
        ("if cfg!(debug_assertions) && n == 0 { return 0; }", "src/lib.rs", "test build"),
        ("let name = std::thread::current().name();", "src/lib.rs", "a test is running"),
        ('std::env::var("RUST_TEST_THREADS")', "src/lib.rs", "a test is running"),
        ('env::var_os("CARGO_MANIFEST_DIR")', "src/lib.rs", "a test is running"),
    ],
)
def test_a_trick_is_refused(text: str, path: str, why: str):
    assert any(why in message for message in _refused(text, path)), _refused(text, path)


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() {}\n}", "src/lib.rs"),
        ("#[test]\n#[should_panic]\nfn rejects_zero() {}", "tests/it.rs"),
        ('println!("Loading... ok");', "src/main.rs"),
        ("std::process::exit(2);", "src/main.rs"),
        ("fn on_exit() {}", "src/lib.rs"),
        ("debug_assert!(n > 0);", "src/lib.rs"),
        ('if cfg!(debug_assertions) { eprintln!("debug"); }', "tests/it.rs"),
        ("let t = std::thread::current();", "tests/it.rs"),
        ('std::env::var("HOME")', "src/lib.rs"),
    ],
)
def test_everyday_code_is_not(text: str, path: str):
    assert _refused(text, path) == []
