"""Traces through the real CLI: a scripted run exports its spans over OTLP/HTTP to a
receiver on 127.0.0.1 that decodes the real protobuf; names, parent links, attributes,
the caller's TRACEPARENT, one trace across sub-loops, and no canary secret in any byte."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from otlp_receiver import attrs, otlp_receiver
from tests.subloops.subloop_templates import INNER, OUTER
from tests.support.cli import cli_env, looprun, scripted_run
from tests.support.fake_agent_cli import install
from tests.support.git_repos import git_repo

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
ENV_SECRET = "sk-live-canary-7c1e94d2a05b4f6e"
FILE_SECRET = "file-canary-3b8d1f0a9e7c"
INTENT_WORDS = "quantity-zero-lines-canary"
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_SPAN = "b7ad6b7169203331"


def _invoice(tmp: Path) -> tuple[Path, Path]:
    """The invoice sample as a repository with a secret file, and a script that reads it
    and then plays the sample's own fix."""
    sys.path.insert(0, str(SAMPLES))
    try:
        import demo
    finally:
        sys.path.remove(str(SAMPLES))
    work = demo.scratch_copy("invoice", tmp)
    (work / "notes.txt").write_text(f"deploy token: {FILE_SECRET}\n")
    turns = yaml.safe_load((SAMPLES / "invoice" / "script.yaml").read_text())
    turns[0]["tool_calls"].insert(0, {"name": "read_file", "arguments": {"path": "notes.txt"}})
    script = tmp / "script.yaml"
    script.write_text(yaml.safe_dump(turns))
    return work, script


def _run_invoice(tmp: Path, endpoint: str, **env: str) -> subprocess.CompletedProcess[str]:
    work, script = _invoice(tmp)
    return looprun(
        *scripted_run(
            "bugfix",
            intent=f"{INTENT_WORDS}: division by zero in invoice totals",
            workdir=work,
            script=script,
        ),
        cwd=work,
        env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            "TRACEPARENT": f"00-{TRACE_ID}-{PARENT_SPAN}-01",
            "PAYMENTS_API_KEY": ENV_SECRET,
            **env,
        },
    )


def test_a_run_is_one_trace_under_the_callers_span(tmp_path: Path) -> None:
    with otlp_receiver() as got:
        proc = _run_invoice(tmp_path, got.url)
    assert proc.returncode == 0, proc.stderr
    assert set(got.paths) == {"/v1/traces"}
    assert {s.trace_id.hex() for s in got.spans} == {TRACE_ID}
    ids = got.by_id()

    def parent(span: object) -> object:
        return ids.get(span.parent_span_id)  # type: ignore[attr-defined]

    (root,) = got.named("invoke_workflow")
    assert root.name == "invoke_workflow bugfix"
    assert root.parent_span_id.hex() == PARENT_SPAN  # the caller's span, not exported here
    a = attrs(root)
    assert a["gen_ai.operation.name"] == "invoke_workflow"
    assert (a["looprun.outcome"], a["looprun.exit_code"], a["looprun.iterations"]) == ("done", 0, 3)
    assert a["looprun.reason"] == "exit conditions hold for all 2 tasks"
    assert "error.type" not in a

    tasks = got.named("task ")
    assert sorted(t.name for t in tasks) == ["task fix", "task reproduce"]
    assert all(parent(t) is root for t in tasks)
    iterations = got.named("iteration ")
    assert sorted(i.name for i in iterations) == ["iteration 1", "iteration 2", "iteration 3"]
    by_task = {i.name: parent(i).name for i in iterations}
    assert by_task == {
        "iteration 1": "task reproduce",
        "iteration 2": "task fix",
        "iteration 3": "task fix",
    }

    chats = got.named("chat ")
    # the held-out variants' call is a chat of its own role, after the reproduction
    roles = [(parent(c).name, attrs(c)["looprun.role"]) for c in chats]
    assert ("iteration 1", "holdout") in roles
    chats = [c for c in chats if attrs(c)["looprun.role"] == "act"]
    assert len(chats) == 6 and all(parent(c).name.startswith("iteration ") for c in chats)
    c = attrs(chats[0])
    assert c["gen_ai.operation.name"] == "chat"
    assert c["gen_ai.provider.name"] == "script"
    assert c["gen_ai.request.model"] == "script.yaml"
    assert c["gen_ai.usage.input_tokens"] > 0 and c["gen_ai.usage.output_tokens"] > 0
    assert "looprun.cost_usd" in c

    tools = [s for s in got.named("execute_tool ") if attrs(s)["gen_ai.tool.type"] == "function"]
    assert [
        attrs(t)["gen_ai.tool.name"] for t in sorted(tools, key=lambda s: s.start_time_unix_nano)
    ] == ["read_file", "write_file", "edit_file", "read_file", "edit_file"]
    assert all(parent(t).name.startswith("iteration ") for t in tools)
    observers = [
        s for s in got.named("execute_tool ") if attrs(s)["gen_ai.tool.type"] != "function"
    ]
    # the observers at the baseline (under the run) and each of them in every iteration
    # (`plain` and `fresh` too, where the reproduction passes or newly fails); a staged
    # observer adds its narrow run, and a narrow result that would end a task reruns every
    # check whole, so an iteration may hold more than one span of an observer
    every = ["cov", "diff", "holdout", "lint", "suite_mutants", "tests", "variants"]
    for n in (1, 2, 3):
        ran = {
            attrs(o)["gen_ai.tool.name"] for o in observers if parent(o).name == f"iteration {n}"
        } - {"plain", "fresh"}
        assert sorted(ran) == every
    assert len(observers) > 20
    baseline = [o for o in observers if parent(o) is root]
    assert sorted(attrs(o)["gen_ai.tool.name"] for o in baseline) == [
        "cov",
        "diff",
        "fresh",
        "holdout",
        "lint",
        "plain",
        "suite_mutants",
        "tests",
        "variants",
    ]
    tests_1 = next(
        o
        for o in observers
        if parent(o).name == "iteration 1" and attrs(o)["gen_ai.tool.name"] == "tests"
    )
    assert attrs(tests_1)["looprun.observer.ok"] is False  # the reproducing test fails
    # every span ends after it starts and inside its parent
    for s in got.spans:
        assert s.end_time_unix_nano >= s.start_time_unix_nano
        p = parent(s)
        if p is not None:
            assert p.start_time_unix_nano <= s.start_time_unix_nano
            assert s.end_time_unix_nano <= p.end_time_unix_nano


def test_no_secret_prompt_or_file_content_is_exported(tmp_path: Path) -> None:
    with otlp_receiver() as got:
        proc = _run_invoice(tmp_path, got.url)
    assert proc.returncode == 0, proc.stderr
    body = b"".join(got.bodies)
    assert len(got.spans) > 30
    for canary in (ENV_SECRET, FILE_SECRET, INTENT_WORDS, "ZeroDivisionError", "def test_"):
        assert canary.encode() not in body, canary


def test_content_is_exported_when_asked_and_redacted_like_the_journal(tmp_path: Path) -> None:
    with otlp_receiver() as got:
        proc = _run_invoice(tmp_path, got.url, LOOPRUN_OTEL_CONTENT="1")
    assert proc.returncode == 0, proc.stderr
    chat = attrs(got.named("chat ")[0])
    assert INTENT_WORDS in chat["gen_ai.input.messages"]
    read = next(s for s in got.named("execute_tool read_file"))
    assert FILE_SECRET in attrs(read)["gen_ai.tool.call.result"]  # the user asked for content
    assert ENV_SECRET.encode() not in b"".join(got.bodies)  # never an environment secret


def test_an_untraced_run_never_imports_opentelemetry(tmp_path: Path) -> None:
    work, script = _invoice(tmp_path)
    args = scripted_run("bugfix", intent="x", workdir=work, script=script)
    code = (
        "import sys, runpy, json\n"
        f"sys.argv = ['looprun', *{args!r}]\n"
        "try:\n"
        "    runpy.run_module('looprun', run_name='__main__')\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "print()\n"
        "print(json.dumps([code, sorted(m for m in sys.modules if 'opentelemetry' in m)]))\n"
    )
    env = cli_env()
    for name in list(env):
        if name.startswith("OTEL_") or name == "TRACEPARENT":
            del env[name]
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=work, env=env, timeout=120
    )
    code_, loaded = json.loads(out.stdout.splitlines()[-1])
    assert code_ == 0, out.stderr
    assert loaded == []


def test_sub_loops_are_child_spans_of_the_outer_iteration_in_one_trace(tmp_path: Path) -> None:
    work = tmp_path / "proj"
    work.mkdir()
    (work / "readme.txt").write_text("hi\n")
    git_repo(work)
    (tmp_path / "edit.yaml").write_text(INNER)
    (tmp_path / "pair.yaml").write_text(OUTER)
    script = tmp_path / "script.yaml"
    turns = {
        t: [
            {
                "tool_calls": [
                    {"name": "write_file", "arguments": {"path": f"{t}.txt", "content": f"{t}\n"}}
                ]
            },
            {"text": "done"},
        ]
        for t in ("left", "right")
    }
    script.write_text(yaml.safe_dump({"tasks": turns}))
    with otlp_receiver() as got:
        proc = looprun(
            *scripted_run(str(tmp_path / "pair.yaml"), intent="x", workdir=work, script=script),
            "--otel",
            cwd=work,
            env={"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": got.url + "/v1/traces"},
        )
    assert proc.returncode == 0, proc.stderr
    assert len({s.trace_id for s in got.spans}) == 1
    ids = got.by_id()
    roots = got.named("invoke_workflow ")
    (outer,) = [r for r in roots if r.name == "invoke_workflow pair"]
    assert outer.parent_span_id == b""  # no TRACEPARENT: a new trace
    inner = [r for r in roots if r.name == "invoke_workflow edit"]
    assert len(inner) == 2
    for r in inner:
        iteration = ids[r.parent_span_id]
        assert iteration.name == "iteration 1"
        assert ids[ids[iteration.parent_span_id].parent_span_id] is outer
        assert attrs(r)["looprun.outcome"] == "done"
    writes = got.named("execute_tool write_file")
    assert len(writes) == 2

    def workflow_of(span: object) -> object:
        while not span.name.startswith("invoke_workflow "):  # type: ignore[attr-defined]
            span = ids[span.parent_span_id]  # type: ignore[attr-defined]
        return span

    # each sub-loop's tool call sits in its own run's span tree, not in the outer one's
    assert {workflow_of(w).span_id for w in writes} == {r.span_id for r in inner}


def test_a_run_that_stops_short_is_an_error_span_with_its_reason(tmp_path: Path) -> None:
    work, script = _invoice(tmp_path)
    with otlp_receiver() as got:
        proc = looprun(
            *scripted_run("bugfix", intent="x", workdir=work, script=script),
            "--max-iterations",
            "1",
            cwd=work,
            env={"OTEL_EXPORTER_OTLP_ENDPOINT": got.url},
        )
    assert proc.returncode == 3, proc.stderr
    (root,) = got.named("invoke_workflow ")
    a = attrs(root)
    assert (a["looprun.outcome"], a["looprun.exit_code"]) == ("exhausted", 3)
    assert a["error.type"] == "max_iterations"
    assert root.status.code == root.status.STATUS_CODE_ERROR
    assert "max_iterations" in a["looprun.reason"]
    # the open task ended with the run
    assert [s.name for s in got.named("task ")] == ["task reproduce"]


def test_a_collector_that_is_down_changes_nothing_but_a_warning(tmp_path: Path) -> None:
    work, script = _invoice(tmp_path)
    proc = looprun(
        *scripted_run("bugfix", intent="x", workdir=work, script=script),
        cwd=work,
        env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"},  # the discard port
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr


HIDE_OTEL = """\
import importlib.abc, runpy, sys
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(name)
        return None
sys.meta_path.insert(0, Hide())
sys.argv = ["looprun", *sys.argv[1:]]
runpy.run_module("looprun", run_name="__main__")
"""


def _without_the_extra(
    tmp: Path, *args: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """The real CLI in an interpreter where the otel extra cannot be imported."""
    work, script = _invoice(tmp)
    run = scripted_run("bugfix", intent="x", workdir=work, script=script)
    return subprocess.run(
        [sys.executable, "-c", HIDE_OTEL, *run, *args],
        capture_output=True,
        text=True,
        cwd=work,
        env=cli_env(env),
        timeout=120,
    )


def test_otel_without_the_extra_is_a_usage_error(tmp_path: Path) -> None:
    proc = _without_the_extra(tmp_path, "--otel", env={})
    assert proc.returncode == 2, proc.stderr
    assert "looprun[otel]" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "invoice" / ".looprun" / "runs").exists()  # nothing started


def test_an_endpoint_without_the_extra_warns_and_runs(tmp_path: Path) -> None:
    proc = _without_the_extra(tmp_path, env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert proc.returncode == 0, proc.stderr
    assert "not traced" in proc.stderr


def test_an_agent_cli_turn_is_an_invoke_agent_span(tmp_path: Path) -> None:
    work, _script = _invoice(tmp_path)
    bindir = tmp_path / "bin"
    install(bindir, "claude")
    template = SAMPLES / "agents" / "bugfix-claude-code.yaml"
    with otlp_receiver() as got:
        proc = looprun(
            str(template),
            "--intent",
            "division by zero",
            "--max-iterations",
            "1",
            cwd=work,
            env={
                "PATH": os.pathsep.join(
                    (str(bindir), str(Path(sys.executable).parent), os.environ["PATH"])
                ),
                "FAKE_AGENT_MODE": "usage:4000/1500",
                "ANTHROPIC_API_KEY": ENV_SECRET,
                "LOOPRUN_SANDBOX_BACKENDS": "",
                "OTEL_EXPORTER_OTLP_ENDPOINT": got.url,
            },
        )
    assert proc.returncode == 3, proc.stderr
    (turn,) = got.named("invoke_agent ")
    assert turn.name == "invoke_agent claude-code"
    a = attrs(turn)
    assert a["gen_ai.operation.name"] == "invoke_agent"
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (4000, 1500)
    assert got.by_id()[turn.parent_span_id].name == "iteration 1"
    assert ENV_SECRET.encode() not in b"".join(got.bodies)


def test_a_resumed_run_is_traced_with_otel(tmp_path: Path) -> None:
    work, script = _invoice(tmp_path)
    args = scripted_run("bugfix", intent="x", workdir=work, script=script)
    killed = subprocess.run(
        [sys.executable, "-m", "looprun", *args],
        cwd=work,
        env=cli_env({"LOOPRUN_CRASH_AT": "before:event:iteration@2"}),
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,  # the crash point kills its process group, not the tests'
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    (run_dir,) = (work / ".looprun" / "runs").iterdir()
    with otlp_receiver() as got:
        proc = looprun(
            "resume",
            run_dir.name,
            "--otel",
            cwd=work,
            env={"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": got.url + "/v1/traces"},
        )
    assert proc.returncode == 0, proc.stderr
    (root,) = got.named("invoke_workflow ")
    a = attrs(root)
    assert root.name == "invoke_workflow bugfix"
    assert a["looprun.resumed"] is True and a["looprun.outcome"] == "done"
    assert [s.name for s in got.named("iteration ")] == ["iteration 2", "iteration 3"]


def test_an_interrupted_run_still_exports_its_spans_as_not_finished(tmp_path: Path) -> None:
    work, script = _invoice(tmp_path)
    turns = yaml.safe_load(script.read_text())
    turns[0]["delay_s"] = 60  # the first model call waits: the run is stopped during it
    script.write_text(yaml.safe_dump(turns))
    with otlp_receiver() as got:
        proc = subprocess.Popen(
            [sys.executable, "-m", "looprun",
             *scripted_run("bugfix", intent="x", workdir=work, script=script)],
            cwd=work,
            env=cli_env({"OTEL_EXPORTER_OTLP_ENDPOINT": got.url}),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )  # fmt: skip
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.startswith("plan:"):
                break
        proc.send_signal(signal.SIGTERM)
        rest = proc.stderr.read()
        assert proc.wait(timeout=60) == 130, rest
    (root,) = got.named("invoke_workflow ")
    assert attrs(root)["error.type"] == "not_finished"
    assert root.status.code == root.status.STATUS_CODE_ERROR
    assert len(got.named("execute_tool ")) == 9  # the baseline's observers


def test_two_levels_of_sub_loops_keep_one_trace(tmp_path: Path) -> None:
    work = tmp_path / "proj"
    work.mkdir()
    (work / "readme.txt").write_text("hi\n")
    git_repo(work)
    (tmp_path / "edit.yaml").write_text(INNER)
    (tmp_path / "mid.yaml").write_text(OUTER.replace("name: pair", "name: mid"))
    top = OUTER.replace("name: pair", "name: top").replace("./edit.yaml", "./mid.yaml")
    (tmp_path / "top.yaml").write_text(top)
    script = tmp_path / "script.yaml"
    script.write_text(
        yaml.safe_dump(
            {
                "tasks": {
                    m: {"tasks": {t: [
                        {"tool_calls": [{"name": "write_file", "arguments": {
                            "path": f"{m}_{t}.txt", "content": f"{m} {t}\n"}}]},
                        {"text": "done"}] for t in ("left", "right")}}
                    for m in ("left", "right")
                }
            }
        )
    )  # fmt: skip
    with otlp_receiver() as got:
        proc = looprun(
            *scripted_run(str(tmp_path / "top.yaml"), intent="x", workdir=work, script=script),
            cwd=work,
            env={"OTEL_EXPORTER_OTLP_ENDPOINT": got.url},
        )
    assert proc.returncode == 0, proc.stderr
    assert len({s.trace_id for s in got.spans}) == 1
    ids = got.by_id()
    (top_span,) = got.named("invoke_workflow top")
    mids = got.named("invoke_workflow mid")
    edits = got.named("invoke_workflow edit")
    assert (len(mids), len(edits)) == (2, 4)

    def workflow_above(span: object) -> object:
        span = ids[span.parent_span_id]  # type: ignore[attr-defined]
        while not span.name.startswith("invoke_workflow "):  # type: ignore[attr-defined]
            span = ids[span.parent_span_id]  # type: ignore[attr-defined]
        return span

    assert all(workflow_above(m) is top_span for m in mids)
    assert {workflow_above(e).span_id for e in edits} == {m.span_id for m in mids}
