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
