"""The invoice sample's bug as the real-agent tests script it: the intent, the test that
reproduces it, and the lines of the fix."""

from __future__ import annotations

from pathlib import Path

INTENT = (Path(__file__).resolve().parents[2] / "samples" / "invoice" / "intent.txt").read_text()
INTENT = INTENT.strip()

REPRO_TEST = """from invoice.totals import Line, summary


def test_summary_of_an_invoice_with_only_cancelled_lines():
    result = summary([Line("cancelled widget", 0, 1250)])
    assert result["total"] == 0
    assert result["average_unit_price"] == 0
"""
OLD = "    units = sum(line.quantity for line in lines)\n"
NEW = OLD + "    if units == 0:\n        return 0\n"
