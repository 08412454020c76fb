"""Mermaid labels keep what the template says: no character is read as Mermaid syntax."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from looprun.template.explain import explain_mermaid
from looprun.template.loader import load_template


def test_hash_quotes_and_brackets_are_escaped_in_labels(tmp_path: Path) -> None:
    source = tmp_path / "t.yaml"
    source.write_text(
        textwrap.dedent(
            """
            looprun: 1
            name: labels
            observe:
              t: {parser: exit_code, run: "true"}
            act: {prompt: go}
            exit: [t.ok]
            refine:
              - if: 't.output_tail == "#quot;" or t.output_tail == "[x] | {y}"'
                then: {abort: "see issue #12; then stop"}
              - else: retry
            """
        )
    )
    chart = explain_mermaid(load_template(str(source)))
    decision = next(line for line in chart.splitlines() if "output_tail" in line)
    # the literal text `#quot;` must not become a quote mark when Mermaid decodes it
    assert "#35;quot;" in decision
    abort = next(line for line in chart.splitlines() if "abort:" in line)
    assert "issue #35;12; then stop" in abort
    for line in chart.splitlines():
        label = re.search(r'"(.*)"', line)
        if label:
            body = label.group(1)
            assert '"' not in body
            # every `#` left in a label starts one of the entities we wrote
            assert re.fullmatch(r"([^#]|#(35|quot|amp|lt|gt);)*", body), line


def test_rule_descriptions_appear_in_the_text_explanation(tmp_path: Path) -> None:
    from looprun.template.explain import explain_text

    source = tmp_path / "t.yaml"
    source.write_text(
        textwrap.dedent(
            """
            looprun: 1
            name: described
            observe:
              t: {parser: exit_code, run: "true"}
            act: {prompt: go}
            exit: [t.ok]
            refine:
              - if: iteration > 3
                description: Give up after three tries; a person should look.
                then: abort
              - else: retry
            """
        )
    )
    text = explain_text(load_template(str(source)))
    described = "  # Give up after three tries; a person should look.\n"
    assert described + "  1. [t.yaml:9] if iteration > 3" in text


def test_goals_are_whole_and_mermaid_shows_each_tasks_done_when(tmp_path: Path) -> None:
    """One rule name in every rendering; text keeps each goal whole; the chart draws
    every task's own goal condition."""
    import json as _json

    from looprun.template.explain import explain_json, explain_text

    goal = "Fix the rounding of every total. " * 6  # far wider than a line
    source = tmp_path / "t.yaml"
    source.write_text(
        textwrap.dedent(
            f"""
            looprun: 1
            name: tasks
            observe:
              t: {{parser: exit_code, run: "true"}}
            plan:
              mode: static
              tasks:
                - id: first
                  goal: "{goal.strip()}"
                  done_when: t.ok and iteration > 1 and t.output_tail == "a text to be cut"
                - id: second
                  goal: go
                  done_when: t.ok
            act: {{prompt: go}}
            exit: [t.ok]
            refine:
              - id: give_up
                if: iteration > 3
                then: abort
              - else: retry
            """
        )
    )
    template = load_template(str(source))
    text = explain_text(template)
    assert f"1. first: {goal.strip()}" in text
    chart = explain_mermaid(template)
    assert (
        "first done when: t.ok and iteration #gt; 1 and t.output_tail == "
        '#quot;a text to be cut#quot;"' in chart
    )
    assert '"second done when: t.ok"' in chart
    # the same names everywhere: explain text, Mermaid and JSON
    assert "1. [give_up] if iteration > 3 -> abort" in text
    assert "2. [t.yaml:21] else -> retry" in text
    assert '"give_up: iteration #gt; 3"' in chart and '"t.yaml:21: retry"' in chart
    rules = _json.loads(explain_json(template))["refine"]
    assert [r["id"] for r in rules] == ["give_up", "t.yaml:21"]


def test_explain_shows_the_honest_exit_and_where_each_pattern_is_forbidden() -> None:
    from looprun.template.explain import explain_text

    text = explain_text(load_template("bugfix"))
    assert "flag_for_human (flag_for_human ends the run escalated" in text
    scoped = "  forbidden in every file except {{ inputs.tests_glob }}, **/test_*.py"
    assert scoped in text and text.count(scoped) == 3
    assert next(line for line in text.splitlines() if "PYTEST_CURRENT_TEST" in line).startswith(
        scoped
    )
