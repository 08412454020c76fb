"""Rust: cargo test (libtest's text output), clippy (cargo's JSON messages).

What configures a check is pinned: every Cargo.toml (``[[test]] test = false``,
``harness = false``, ``[lib] doctest = false``, profiles), the lock file, cargo's own
configuration (``.cargo/config.toml`` can set rustflags, runners and aliases), the toolchain
file (rustup picks the compiler from it) and build scripts (``build.rs`` runs at build time
and can set ``cfg`` flags and environment variables the tests compile with). The build
output (``target/``) is never trusted: the checks build into a run-private
``CARGO_TARGET_DIR`` outside the tree, kept between checks so rebuilds are incremental,
and started as a copy of the one the repository's last baseline built (cargo judges
freshness by dates: see checks/seeded_cache.py), so a run does not build the dependencies
and the unchanged crates cold.
``CARGO_HOME`` stays the user's and is read-only in the sandbox: with ``--offline`` and
the registry already unpacked, cargo only reads it.
"""

from __future__ import annotations

from types import MappingProxyType

from looprun.checks.stacks.base import Stack, Tool
from looprun.checks.stacks.rust_select import select, test_ids

STACK = Stack(
    name="rust",
    markers=("Cargo.toml",),
    sources=(".rs",),
    tools=(Tool("cargo", "install Rust: apt-get install cargo, or rustup (https://rustup.rs)"),),
    pinned=(
        "**/Cargo.toml",
        "**/Cargo.lock",
        "**/.cargo/config.toml",
        "**/.cargo/config",
        "rust-toolchain",
        "rust-toolchain.toml",
        "**/build.rs",
        "clippy.toml",
        ".clippy.toml",
    ),
    untrusted=("target/",),
    caches=MappingProxyType({"CARGO_TARGET_DIR": "cargo-target"}),
    seeded=("CARGO_TARGET_DIR",),
    fresh_by="dates",
    env=MappingProxyType(
        {
            "CARGO_NET_OFFLINE": "true",
            "CARGO_TERM_COLOR": "never",
            # a panic's backtrace names the project frames it ran through: the files a
            # failure is in (`failure_files`), not only the line that panicked
            "RUST_BACKTRACE": "1",
        }
    ),
    select=select,
    tests_in=test_ids,
)
