"""Node (JavaScript/TypeScript): the project's ``npm test`` on node's built-in test runner,
vitest or jest.

The pack (templates/observers/node.yaml) hands the runner looprun's reporter (its path
fixed here, outside the tree) beside the runner's own report; the node_test parser
compares them with the exit code. Which runner the test script runs, and whether the
TypeScript check and ESLint are on, is read from the run's base by ``node_setup``.
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import looprun.observe
from looprun.checks.stacks.base import Stack, Tool
from looprun.checks.stacks.node_select import select
from looprun.checks.stacks.node_setup import SETUP_READS, settings

# the reporter ships in the engine package, never in the repository a check runs on
_REPORTERS = Path(looprun.observe.__file__).resolve().parent / "node_reporter"
REPORTER = _REPORTERS / "looprun_outcome.mjs"
VITEST_REPORTER = _REPORTERS / "looprun_vitest.mjs"
JEST_REPORTER = _REPORTERS / "looprun_jest.cjs"
# the `lint` check: tsc and ESLint run in turn, their findings merged into one SARIF log
LINT_RUNNER = _REPORTERS / "looprun_lint.mjs"

STACK = Stack(
    name="node",
    markers=("package.json",),
    sources=(".js", ".mjs", ".cjs", ".ts", ".mts", ".cts"),
    tools=(
        Tool("node", "install Node.js 20 or later (apt-get install nodejs npm)"),
        Tool("npm", "install npm (apt-get install npm)"),
    ),
    # what decides which tests run and how: the scripts (package.json at any depth, for
    # workspaces), npm's own settings (`node-options`, `script-shell`), the lock files a
    # script's tools come from, and the configuration of the runners and compilers
    pinned=(
        "**/package.json",
        "**/package-lock.json",
        "**/npm-shrinkwrap.json",
        "**/.npmrc",
        "**/tsconfig*.json",
        "**/jest.config.*",
        "**/vitest.config.*",
        "**/vite.config.*",
        "**/.mocharc*",
        "**/babel.config.*",
        "**/.babelrc*",
        # the runners' setup files by their usual names: they run before every test file
        # and could replace expect() or the assertions
        "**/jest.setup.*",
        "**/jest-setup.*",
        "**/setupTests.*",
        "**/vitest.setup.*",
        # ESLint's configuration (flat and legacy) and its ignore file: what the lint
        # check reports, and which files it reads
        "**/eslint.config.*",
        "**/.eslintrc*",
        "**/.eslintignore",
    ),
    # build output, caches and compiler state a tool would trust: `*.tsbuildinfo` would
    # let an incremental `tsc` skip the files it names. dist/ is not here: some projects
    # track their built files, and the diff can only bring what the run changed
    untrusted=(
        "coverage/",
        ".nyc_output/",
        "*.tsbuildinfo",
        ".eslintcache",
        "node_modules/.cache/",
    ),
    shared=("node_modules",),
    caches=MappingProxyType({"npm_config_cache": "npm"}),
    env=MappingProxyType(
        {
            "LOOPRUN_NODE_REPORTER": str(REPORTER),
            "LOOPRUN_VITEST_REPORTER": str(VITEST_REPORTER),
            "LOOPRUN_JEST_REPORTER": str(JEST_REPORTER),
            "LOOPRUN_NODE_LINT": str(LINT_RUNNER),
            # npm asks the registry whether it is current: never from a check
            "npm_config_update_notifier": "false",
            "npm_config_fund": "false",
            "npm_config_audit": "false",
            "NO_COLOR": "1",
        }
    ),
    setup=settings,
    setup_reads=SETUP_READS,
    # the files and an anchored name pattern, which node's runner, vitest and jest all read
    # (the pack's held-out variants)
    select=select,
)
