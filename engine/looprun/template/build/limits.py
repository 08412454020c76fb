"""``limits``: iterations, tokens, time, cost, tool calls and repeated failures."""

from __future__ import annotations

from looprun.data.freeze import freeze
from looprun.template.build.mcp import check_tool_name
from looprun.template.build.reader import Reader
from looprun.template.model import BUILTIN_TOOLS, Limits, mcp_name
from looprun.template.suggest import did_you_mean


def build_limits(r: Reader) -> Limits:
    per_tool_raw = r.get(("limits", "per_tool"), dict) or {}
    per_tool = {}
    for tool, n in per_tool_raw.items():
        if isinstance(tool, str) and check_tool_name(
            r, ("limits", "per_tool", tool), tool, glob=False
        ):
            if mcp_name(tool) and isinstance(n, int) and not isinstance(n, bool):
                per_tool[tool] = n
        elif tool not in BUILTIN_TOOLS:
            hint = did_you_mean(tool, BUILTIN_TOOLS) or f" (tools: {', '.join(BUILTIN_TOOLS)})"
            r.problem(("limits", "per_tool", tool), f"unknown tool '{tool}'{hint}", key=True)
        elif isinstance(n, int) and not isinstance(n, bool):
            per_tool[tool] = n
    cost = r.get(("limits", "max_cost_usd"), (int, float))
    return Limits(
        max_iterations=r.get(("limits", "max_iterations"), int, Limits.max_iterations),
        max_tokens=r.get(("limits", "max_tokens"), int),
        timeout_s=r.duration(("limits", "timeout")),
        max_cost_usd=float(cost) if cost is not None and not isinstance(cost, bool) else None,
        per_tool=freeze(per_tool),
        max_repeats=(
            None
            if r.get(("limits", "max_repeats"), bool) is False
            else r.get(("limits", "max_repeats"), int, Limits.max_repeats)
        ),
    )
