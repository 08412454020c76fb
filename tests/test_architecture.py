"""The layer contract, held statically over every import in the engine, function-local and
``TYPE_CHECKING`` ones included, plus the run-time checks that only importing can show.

Layers go bottom to top; a module may import its own package and anything in a layer below
it, never above. A total order makes package cycles impossible, and the test that looks
for cycles says so in words when a new edge closes one. Function-local imports hide edges
from a reader and from this test's first half, so they are allowed only where a heavy
optional dependency is loaded on demand, and each such place is listed here with why.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.module_map import cycles, imports_of, is_own, layer, modules, package_graph

PACKAGE = Path(__file__).resolve().parents[1] / "engine" / "looprun"

# bottom to top: what each holds is in docs/engine.md ("Layout")
LAYERS = (
    "errors",  # the one error tree
    "data",  # plain values: freeze, globs, task graph, changes, patch text
    "system",  # OS edges: processes, redaction, atomic and no-follow files, crash points
    "sandbox",  # bubblewrap and Landlock
    "observe",  # parsers: pure functions of output, and their catalog
    "models",  # model clients, prices, the user's config file
    "template",  # the language
    "loop",  # the interpreter, over the ports in loop/ports.py
    "workspace",  # adapter: git, snapshots, patches, commits
    "checks",  # adapter: running observers' commands (pinned configs, held-out copies)
    "act",  # adapter: tools, policy, agent CLIs
    "journal",  # adapter: the run record, bundles, sealed refs
    "report",  # md / html / json from a run's record
    "tracing",  # adapter: OpenTelemetry spans from what the ports record (opt-in)
    "run",  # the composition root
    "remote",  # Ray, on top of run/
    "cli",  # argv, environment, terminal, one module per subcommand
)
# The interpreter does no I/O: beyond the layers below it, it may use only these of
# system/ (pure text functions).
LOOP_MAY_USE_OF_SYSTEM = {"looprun.system.redact"}

# (importing module, imported module) -> why it is imported inside a function
LOCAL_IMPORTS: dict[tuple[str, str], str] = {
    # loop/
    ("looprun.loop.plan", "jsonschema"): "a model's plan is validated only when a model "
    "plans; the interpreter does not load the validator otherwise (see FORBIDDEN below)",
    # models/
    ("looprun.models.registry", "looprun.models.hosted"): (
        "the HTTP client (httpx, with http.client, idna and pygments: some 0.1 s) loads only "
        "when a model is reached over HTTP: a run of scripted models or of an agent CLI "
        "starts without it (tests/cli/test_plain_run_imports.py)"
    ),
    # cli/
    ("looprun.cli.validation.validate", "looprun.cli.validation.check"): (
        "the template language (PyYAML, Jinja2; some 0.4 s) loads only when a file is "
        "checked in full: `looprun validate` over files the valid-cache knows (a pre-commit "
        "hook) starts without it (tests/template/test_valid_cache.py)"
    ),
    ("looprun.cli.executors", "looprun.remote.ray_executor"): (
        "the Ray executor's modules load only when a run asks for --executor ray: a plain "
        "`looprun run` starts without them (tests/cli/test_plain_run_imports.py)"
    ),
    ("looprun.run.drive", "looprun.report"): (
        "the report (its HTML template, Jinja2's environment) loads only when a run in "
        "GitHub Actions appends it to GITHUB_STEP_SUMMARY: a plain run starts without it "
        "(tests/cli/test_plain_run_imports.py)"
    ),
    ("looprun.run.session", "looprun.act.agents.actor"): (
        "the agent CLIs' adapters (five command lines and output parsers) load only when "
        "the template's act names an agent CLI: a plain run starts without them "
        "(tests/cli/test_plain_run_imports.py)"
    ),
    # data/
    ("looprun.data.globs", "pathspec"): (
        "globs are matched only when a run or a parser filters paths: loading or validating "
        "a template (which imports the expression language, and so this module) never does"
    ),
    # template/, observe/, checks/
    ("looprun.observe.registry", "importlib.metadata"): (
        "plugin parsers are looked up only for a name that is not built in: a template "
        "naming built-in parsers validates and runs without importing importlib.metadata "
        "(and the email package it loads)"
    ),
    ("looprun.checks.pytest_pin", "tomllib"): (
        "a pyproject.toml or pytest.toml is parsed only when an observer's command runs "
        "pytest: a run whose checks do not starts without the TOML parser "
        "(tests/cli/test_plain_run_imports.py)"
    ),
    ("looprun.template.compose", "looprun.template.sharing.resolver"): (
        "the lock file and the git cache of remote templates load only when a template "
        "names a git+ reference: every other run and validation starts without them "
        "(tests/cli/test_plain_run_imports.py)"
    ),
    ("looprun.template.schema_check", "jsonschema"): (
        "the validator loads only when a template is validated: `looprun --help`, `runs` "
        "and `schema` never import it"
    ),
    # adapters
    ("looprun.run.session", "looprun.run.subloops"): (
        "the sub-loop machinery (jobs, records, the journal hand-off and tarfile) loads only "
        "for an outer loop (each_task): a plain run starts without it "
        "(tests/cli/test_plain_run_imports.py)"
    ),
    ("looprun.run.session", "looprun.act.mcp.client"): (
        "the MCP SDK (anyio, pydantic, starlette) is the optional `mcp` extra: loaded only "
        "when a template declares act.mcp, so every other run starts without it"
    ),
    ("looprun.tracing.config", "looprun.tracing.otel"): (
        "OpenTelemetry is an optional extra: loaded only when a run is traced (--otel or "
        "OTEL_EXPORTER_OTLP_ENDPOINT); tests/tracing checks an untraced run never imports it"
    ),
    ("looprun.remote.ray_cluster", "ray"): (
        "Ray is optional and slow to import: loaded when a Ray executor connects, so "
        "--executor ray can be parsed, and the executor module imported, without it"
    ),
}


MODULES = modules(PACKAGE)
IMPORTS = [imp for module, path in MODULES.items() for imp in imports_of(module, path, MODULES)]


def test_every_package_and_top_level_module_has_a_layer() -> None:
    unplaced = sorted({layer(m) for m in MODULES} - set(LAYERS) - {"", "__main__"})
    assert not unplaced, f"modules outside the layer table: {unplaced}"


def test_imports_go_one_way_bottom_to_top() -> None:
    rank = {name: i for i, name in enumerate(LAYERS)}
    upward = []
    for imp in filter(is_own, IMPORTS):
        src, dst = layer(imp.module), layer(imp.target)
        if src == dst or src not in rank or dst not in rank:
            continue  # the package root, __main__, and unplaced modules (the test above)
        if rank[dst] > rank[src]:
            upward.append(f"{imp.where()}: {src}/ imports {imp.target} ({dst}/ is above it)")
    assert not upward, "\n".join(sorted(set(upward)))


def test_the_interpreter_uses_no_os_edge() -> None:
    found = [
        f"{imp.where()}: {imp.target}"
        for imp in filter(is_own, IMPORTS)
        if layer(imp.module) == "loop"
        and layer(imp.target) in {"system", "sandbox"}
        and imp.target not in LOOP_MAY_USE_OF_SYSTEM
    ]
    assert not found, "\n".join(found)


def test_no_cycles_between_packages() -> None:
    found = cycles(package_graph(IMPORTS))
    assert not found, f"package cycles: {found}"


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_function_local_imports_are_only_the_listed_ones() -> None:
    found = {(imp.module, imp.target): imp for imp in IMPORTS if imp.local}
    unlisted = [
        f"{imp.where()}: import {imp.target}"
        for key, imp in sorted(found.items())
        if key not in LOCAL_IMPORTS
    ]
    assert not unlisted, "function-local imports not in LOCAL_IMPORTS:\n" + "\n".join(unlisted)
    stale = sorted(set(LOCAL_IMPORTS) - set(found))
    assert not stale, f"listed local imports that no longer exist: {stale}"


def test_the_import_reader_sees_local_and_relative_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "looprun" / "loop"
    pkg.mkdir(parents=True)
    src = pkg / "engine.py"
    src.write_text("from . import ports\ndef f():\n    from looprun.run import runner\n")
    seen = list(imports_of("looprun.loop.engine", src, MODULES))
    assert [(i.target, i.local) for i in seen] == [
        ("looprun.loop.ports", False),
        ("looprun.run.runner", True),
    ]


# -- what only importing shows: the heavy libraries each layer loads ---------------------

CORE = sorted(m.removeprefix("looprun.loop.") for m in MODULES if m.startswith("looprun.loop."))
# HTTP, git, YAML, the schema validator and the terminal stay behind the ports.
FORBIDDEN = (
    "httpx",
    "yaml",
    "jsonschema",
    "click",
    "looprun.workspace",
    "looprun.workspace.git",
    "looprun.workspace.tree",
    "looprun.models.http",
    "looprun.models.openai",
    "looprun.models.anthropic",
    "looprun.sandbox",
    "looprun.sandbox.bwrap",
    "looprun.sandbox.landlock",
)


def _loaded_after(code: str) -> set[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_the_core_module_list_is_not_empty() -> None:
    assert {"engine", "core", "act.tool_turn", "act.agent_turn", "refine"} <= set(CORE)


@pytest.mark.parametrize("module", CORE)
def test_loop_core_imports_nothing_of_http_git_yaml_or_the_terminal(module: str) -> None:
    loaded = _loaded_after(f"import looprun.loop.{module}")
    assert not loaded & set(FORBIDDEN), f"looprun.loop.{module} pulls in {loaded & set(FORBIDDEN)}"


def test_importing_the_package_has_no_side_effects_beyond_loading() -> None:
    loaded = _loaded_after("import looprun, looprun.cli.main")
    assert "jsonschema" not in loaded and "httpx" not in loaded


@pytest.mark.parametrize("args", [["--help"], ["runs", "--json"], ["schema", "--help"]])
def test_commands_that_do_not_validate_do_not_import_jsonschema(
    args: list[str], tmp_path: Path
) -> None:
    code = (
        "import sys, runpy\n"
        f"sys.argv = ['looprun', *{args!r}]\n"
        "try:\n"
        "    runpy.run_module('looprun', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "import json\n"
        "print()\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('jsonschema', 'httpx')))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert json.loads(out.stdout.splitlines()[-1]) == [], out.stderr
