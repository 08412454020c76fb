"""``sandbox``: the mode, the network, and the paths outside the workdir to hide."""

from __future__ import annotations

from looprun.template.build.reader import Reader
from looprun.template.model import SandboxSpec


def build_sandbox(r: Reader) -> SandboxSpec:
    """``sandbox: auto`` is short for ``sandbox: {mode: auto}``; YAML reads a bare
    ``off`` as false, which means the same. The schema checks the values."""
    short = r.get(("sandbox",), (str, bool))
    if short is False or short in ("auto", "required", "off"):
        return SandboxSpec(mode="off" if short is False else short)
    mode = r.get(("sandbox", "mode"), (str, bool), SandboxSpec.mode)
    mode = "off" if mode is False else mode
    network = r.get(("sandbox", "network"), bool, SandboxSpec.network)
    hide: list[str] = []
    for i, path in enumerate(r.get(("sandbox", "hide"), list, [])):
        if not isinstance(path, str):
            continue  # the schema reports it
        if path == "~" or path.startswith(("/", "~/")):
            hide.append(path)
        else:
            r.problem(
                ("sandbox", "hide", i),
                f"{path!r} is neither absolute nor under ~/ (the workdir is the "
                "model's to read; name paths outside it)",
            )
    return SandboxSpec(
        mode=mode if mode in ("auto", "required", "off") else "auto",
        network=network,
        hide=tuple(hide),
    )
