"""The Rust adapter on the tree a check runs on: what configures cargo is the base's, build
output is never copied, the build cache lives outside the tree - and `cargo test` run there
for real still runs the test a changed Cargo.toml or cargo config would have dropped."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pathspec
import pytest
import yaml
from tests.stacks.rust_support import cargo_bin, crate
from tests.support.git_repos import git, git_repo

from looprun.checks import stacks
from looprun.checks.clean_tree import CheckTrees
from looprun.checks.stacks.detect import detect
from looprun.observe.base import ParseInput
from looprun.observe.cargo_test import CargoTestParser

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
FAILING = "#[test]\nfn fails() {\n    assert_eq!(pinned::answer(), 42);\n}\n"


def _repo(tmp_path: Path) -> Path:
    repo = crate(
        tmp_path / "repo",
        "pinned",
        {
            "src/lib.rs": "pub fn answer() -> i32 {\n    41\n}\n",
            "tests/answer.rs": FAILING,
            ".gitignore": "/target\n",
        },
    )
    return git_repo(repo)


def test_the_adapter_is_registered_and_detected_by_its_marker():
    stack = stacks.get("rust")
    assert "rust" in stacks.names()
    assert stack.markers == ("Cargo.toml",)
    assert [t.program for t in stack.tools] == ["cargo"]
    assert dict(stack.caches) == {"CARGO_TARGET_DIR": "cargo-target"}
    assert stack.env["CARGO_NET_OFFLINE"] == "true"


@pytest.mark.e2e
def test_cargo_configuration_is_the_base_s_and_target_is_never_copied(tmp_path: Path):
    repo = _repo(tmp_path)
    base = git("rev-parse", "HEAD^{tree}", cwd=repo)
    manifest = (repo / "Cargo.toml").read_text()
    # the model's changes: the failing test dropped from the build, a runner that runs
    # `true` instead of each test binary, a build script, and build output in target/
    (repo / "Cargo.toml").write_text(
        manifest + '\n[[test]]\nname = "answer"\npath = "tests/answer.rs"\ntest = false\n'
    )
    (repo / ".cargo").mkdir()
    (repo / ".cargo/config.toml").write_text('[target.x86_64-unknown-linux-gnu]\nrunner = "true"\n')
    (repo / "build.rs").write_text('fn main() { println!("cargo:rustc-cfg=cheat"); }\n')
    (repo / "target/debug").mkdir(parents=True)
    (repo / "target/debug/planted").write_text("not built here")
    (repo / "src/lib.rs").write_text("pub fn answer() -> i32 {\n    40 + 1\n}\n")  # in the diff
    root, env, tampered = CheckTrees(tmp_path / "checks").prepare(
        "rust", workdir=repo, git_dir=None, base=base
    )
    assert tampered == ""
    assert (root / "Cargo.toml").read_text() == manifest
    assert not (root / ".cargo").exists() and not (root / "build.rs").exists()
    assert not (root / "target").exists()
    assert (root / "src/lib.rs").read_text().endswith("40 + 1\n}\n")
    target = Path(env["CARGO_TARGET_DIR"])
    assert root not in target.parents and repo not in target.parents

    # the real toolchain on that tree: the test Cargo.toml would have dropped still runs
    out = tmp_path / "cargo-test.txt"
    path = f"{cargo_bin()}{os.pathsep}{os.environ.get('PATH', os.defpath)}"
    with out.open("wb") as fh:
        done = subprocess.run(
            ["cargo", "test", "--offline", "--no-fail-fast"],
            cwd=root,
            env={**os.environ, **env, "PATH": path},
            stdout=fh,
            stderr=subprocess.STDOUT,
            check=False,
            timeout=300,
        )
    obs = CargoTestParser().parse(ParseInput(workdir=root, file=out, exit_code=done.returncode))
    assert obs.to_facts()["failing"] == ["tests/answer.rs::fails"]
    assert obs.ok is False and obs.facts["consistent"] is True
    assert any(target.iterdir())  # the build went to the run's cache, not the tree


@pytest.mark.parametrize(
    "path", ["Cargo.toml", "crates/a/Cargo.toml", "Cargo.lock", ".cargo/config.toml", "build.rs"]
)
def test_pinned_globs_cover_the_files_that_configure_cargo(path: str):
    spec = pathspec.GitIgnoreSpec.from_lines(stacks.get("rust").pinned)
    assert spec.match_file(path)
    assert not spec.match_file("src/lib.rs") and not spec.match_file("tests/it.rs")


def test_a_cargo_repository_is_detected_as_rust(tmp_path: Path):
    repo = _repo(tmp_path)
    found = detect(repo)
    assert (found.name, found.why) == ("rust", "Cargo.toml at the repository's root")


def test_the_pack_protects_and_declares_what_the_adapter_pins():
    """One list in three places: the adapter's `pinned`, the pack's `check_config` input and
    the files its act constraints protect; a file missing from one is a hole."""
    pack = yaml.safe_load((TEMPLATES / "observers" / "rust.yaml").read_text())
    pinned = list(stacks.get("rust").pinned)
    assert pack["inputs"]["check_config"]["default"] == pinned
    assert pack["act"]["constraints"]["protect"]["paths"] == pinned
    assert pack["observe"]["tests"]["stack"] == "rust"
    assert pack["observe"]["tests"]["parser"] == "cargo_test"
