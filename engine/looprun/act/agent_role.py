"""The act role of a template whose turns an agent CLI takes, and the model name each
CLI is handed: apart from the actor (``agents/actor.py``) and its adapters, so resolving a
run's models loads no agent CLI's code unless the template names one."""

from __future__ import annotations

from looprun.errors import LooprunError, UsageError
from looprun.models.base import Unscripted

# Which model references fit each CLI: a CLI talks to its own provider's models
# (opencode to several, named provider/model in its own terms).
_SCHEMES = {
    "claude-code": ("anthropic",),
    "codex": ("openai",),
    "opencode": ("openai", "anthropic"),
    "gemini": ("gemini",),
}


def agent_model(cli: str, ref: str | None, source: str = "") -> str:
    """The model name to hand the CLI from a reference (``anthropic:NAME`` for Claude
    Code, ``openai:NAME`` for Codex, ``openai:``/``anthropic:`` for opencode, which names
    it ``provider/NAME``, ``gemini:NAME`` for Gemini CLI, or a bare name in the CLI's own
    terms); "" leaves the CLI's own default."""
    if not ref or ref.strip() in ("", "default"):
        return ""
    ref = ref.strip()
    scheme, sep, name = ref.partition(":")
    if not sep:
        return ref
    if cli == "aider":  # aider takes litellm's names: provider/model
        if scheme in ("openai", "anthropic"):
            return f"{scheme}/{name.strip()}"
        raise UsageError(
            f"{source or 'model'}: {ref!r} does not fit act.agent.cli aider: give "
            "openai:<model>, anthropic:<model> or a name in aider's own terms (openai/<model>)"
        )
    schemes = _SCHEMES.get(cli, ())
    if scheme not in schemes:
        fits = " or ".join(f"{s}:<model>" for s in schemes) or "?"
        raise UsageError(
            f"{source or 'model'}: {ref!r} does not fit act.agent.cli {cli}, which runs "
            f"{'/'.join(schemes) or '?'} models: give {fits} or a bare model name"
        )
    return f"{scheme}/{name.strip()}" if cli == "opencode" else name.strip()


class AgentActRole(Unscripted):
    """The act role of a template whose turns an agent CLI takes: it names the CLI and
    its model, and refuses to be called as an HTTP model (nothing should call it)."""

    def __init__(self, cli: str, model: str):
        self.cli, self.agent_model = cli, model
        self.ref = f"{cli}:{model or 'default'}"

    def complete(self, *args: object, **kwargs: object) -> object:
        raise LooprunError(
            f"the act turns of this template run {self.cli}; no act model is called over HTTP"
        )
