"""A traced outer run whose sub-loop runs on a real local Ray cluster keeps one trace: the
worker's spans reach the same OTLP receiver, under the outer loop's iteration."""

from __future__ import annotations

from pathlib import Path

import pytest
from ray_helpers import one_task_project
from tests.support.cli import looprun, scripted_run
from tests.tracing.otlp_receiver import attrs, otlp_receiver

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


def test_a_ray_sub_loop_is_a_child_span_in_the_callers_trace(
    tmp_path: Path, ray_address: str
) -> None:
    work, script = one_task_project(tmp_path)
    with otlp_receiver() as got:
        proc = looprun(
            *scripted_run("one.yaml", intent="x", workdir=work, script=script),
            "--executor",
            f"ray:{ray_address}",
            cwd=work,
            env={
                "OTEL_EXPORTER_OTLP_ENDPOINT": got.url,
                "TRACEPARENT": f"00-{TRACE_ID}-00f067aa0ba902b7-01",
            },
            timeout=600,
        )
    assert proc.returncode == 0, proc.stderr
    assert {s.trace_id.hex() for s in got.spans} == {TRACE_ID}
    ids = got.by_id()
    (outer,) = got.named("invoke_workflow one")
    (inner,) = got.named("invoke_workflow steps")
    iteration = ids[inner.parent_span_id]
    assert iteration.name == "iteration 1"
    assert ids[ids[iteration.parent_span_id].parent_span_id] is outer
    assert attrs(inner)["looprun.outcome"] == "done"
    # the worker's model calls and tool calls, in the sub-loop's own tree
    chats = got.named("chat ")
    assert chats and all(ids[c.parent_span_id].name.startswith("iteration ") for c in chats)
    assert len(got.named("execute_tool write_file")) == 3
