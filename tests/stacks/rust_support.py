"""Shared by the Rust stack's tests: the real toolchain (a skip locally, a failure in CI) and
small crates written to a directory, their tests run the way the Rust pack runs them."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.support.files import write_tree
from tests.support.tools import missing, require

from looprun.checks.stacks import rust
from looprun.observe.base import Observation, ParseInput
from looprun.observe.cargo_diagnostics import CargoDiagnosticsParser
from looprun.observe.cargo_test import CargoTestParser


def cargo_bin() -> Path:
    """The directory holding cargo (on PATH, or rustup's default); the test is skipped
    without it, except in CI where it must exist."""
    found = shutil.which("cargo") or require(
        "cargo", "apt-get install cargo, or rustup", path=str(Path.home() / ".cargo/bin")
    )
    return Path(found).parent


def cargo_env(target: Path) -> dict[str, str]:
    """The environment the adapter gives checks: cargo on PATH, the build cache outside the
    crate, offline, no colour, backtraces on."""
    path = f"{cargo_bin()}{os.pathsep}{os.environ.get('PATH', os.defpath)}"
    return {**os.environ, **rust.STACK.env, "PATH": path, "CARGO_TARGET_DIR": str(target)}


def crate(root: Path, name: str, files: dict[str, str]) -> Path:
    """A library crate named ``name`` with ``files`` (src/lib.rs, tests/*.rs ...)."""
    manifest = f'[package]\nname = "{name}"\nversion = "0.1.0"\nedition = "2021"\n'
    return write_tree(root, {"Cargo.toml": manifest, **files})


def run_cargo(root: Path, *args: str) -> tuple[Path, int]:
    """``cargo ARGS --offline`` with stdout and stderr into one file beside the crate, as
    the pack runs it; (the output file, cargo's exit code)."""
    out_file = root.parent / f"{root.name}-{args[0]}.txt"
    with out_file.open("wb") as out:
        done = subprocess.run(
            ["cargo", *args, "--offline"],
            cwd=root,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=cargo_env(root.parent / f"{root.name}-target"),
            check=False,
            timeout=300,
        )
    return out_file, done.returncode


def cargo_test(root: Path) -> tuple[Observation, int]:
    out_file, code = run_cargo(root, "test", "--no-fail-fast")
    obs = CargoTestParser().parse(ParseInput(workdir=root, file=out_file, exit_code=code))
    return obs, code


def require_clippy(root: Path) -> None:
    """clippy is a separate install (Debian: rust-clippy): skipped without it, except in CI."""
    probe = subprocess.run(
        ["cargo", "clippy", "--version"], env=cargo_env(root), capture_output=True, check=False
    )
    if probe.returncode != 0:
        missing("cargo clippy", "apt-get install rust-clippy, or rustup")


def cargo_diagnostics(root: Path, command: str = "clippy") -> Observation:
    """``cargo COMMAND --all-targets --message-format=json`` (clippy or check): the JSON
    lines to a file, read by the cargo_diagnostics parser."""
    report = root.parent / f"{root.name}-{command}.json"
    with report.open("wb") as out:
        done = subprocess.run(
            ["cargo", command, "--offline", "--all-targets", "--message-format=json"],
            cwd=root,
            stdout=out,
            stderr=subprocess.PIPE,
            env=cargo_env(root.parent / f"{root.name}-target"),
            check=False,
            timeout=300,
        )
    return CargoDiagnosticsParser().parse(
        ParseInput(workdir=root, file=report, exit_code=done.returncode)
    )
