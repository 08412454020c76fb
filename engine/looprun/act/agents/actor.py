"""The actor that runs an agent CLI for one act turn.

Working directory: the run's tree. Standard input: /dev/null (a CLI that waits on it
would hang). Home and config: a directory under the run, so nothing of the user's own
setup (credentials, settings, permissions granted before) leaks in and nothing the CLI
writes lands in the repository. Environment: looprun's own, without anything that looks
like a secret, plus only the CLI's own key and server. Confinement: the run's sandbox
(``confine.py``), its model server the one way out. The whole process group is killed
at the timeout. The raw output is kept per iteration, with every secret redacted.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from looprun.act.agents.aider import Aider
from looprun.act.agents.base import Adapter, Parsed, Turn
from looprun.act.agents.claude import ClaudeCode
from looprun.act.agents.codex import Codex
from looprun.act.agents.confine import confined
from looprun.act.agents.gemini import Gemini
from looprun.act.agents.opencode import OpenCode
from looprun.errors import LooprunError
from looprun.loop.ports import AgentReport, AgentRequest
from looprun.models.base import Usage
from looprun.models.pricing import PriceTable
from looprun.sandbox import Sandbox
from looprun.system.atomic import write_atomic
from looprun.system.proc import NO_BYTECODE, run_process, scrubbed_env, secret_values
from looprun.system.redact import Redactor
from looprun.template.model import AgentSpec, Constraints

ADAPTERS: Mapping[str, Adapter] = {
    a.cli: a for a in (ClaudeCode(), Codex(), Aider(), OpenCode(), Gemini())
}
RAW_CAP = 32 * 1024 * 1024  # the raw output kept and parsed; a turn printing more is cut


def adapter_for(cli: str) -> Adapter:
    adapter = ADAPTERS.get(cli)
    if adapter is None:  # the schema refuses these; a hand-built template may still try
        raise LooprunError(f"act.agent.cli: '{cli}' is not an agent CLI looprun runs")
    return adapter


def find_program(cli: str, env: Mapping[str, str] | None = None) -> str:
    """The CLI's executable: the one its setting names (``LOOPRUN_AIDER``, for a CLI
    installed in a virtualenv of its own), else on PATH; a missing one stops the run
    before any turn."""
    adapter = adapter_for(cli)
    source = env if env is not None else os.environ
    setting = getattr(adapter, "program_env", "")
    named = source.get(setting, "") if setting else ""
    if named:
        found = shutil.which(os.path.expanduser(named))
        if found is None:
            raise LooprunError(f"act.agent.cli {cli}: {setting}={named} is not an executable")
        return found
    found = shutil.which(adapter.program, path=source.get("PATH"))
    if found is None:
        install = getattr(adapter, "install", "") or f"npm install -g {adapter.package}"
        where = f", or name it in {setting}" if setting else ""
        raise LooprunError(
            f"act.agent.cli {cli}: the `{adapter.program}` program is not on PATH{where} "
            f"(install it with `{install}`)"
        )
    return found


class AgentActor:
    """Runs ``spec.cli`` headless in ``workdir`` for each act turn."""

    def __init__(
        self,
        spec: AgentSpec,
        constraints: Constraints,
        *,
        workdir: Path,
        run_dir: Path,
        artifacts: Path,
        model: str = "",
        env: Mapping[str, str] | None = None,
        prices: PriceTable | None = None,
        on_change: Callable[[None], None] | None = None,
        sandbox: Sandbox | None = None,
    ):
        self.spec, self.constraints = spec, constraints
        self.sandbox = sandbox
        self.adapter = adapter_for(spec.cli)
        self.workdir, self.artifacts = workdir, artifacts
        self.home = run_dir / "agent-home"
        self.model = model
        source = dict(os.environ if env is None else env)
        self.program = find_program(spec.cli, source)
        # the CLI's own key and server, and nothing else that looks like a secret
        own = {k: source[k] for k in self.adapter.key_env if source.get(k)}
        drop = tuple(getattr(self.adapter, "drop_env", ()))  # the user's own CLI settings
        kept = {k: v for k, v in scrubbed_env(source).items() if not (drop and k.startswith(drop))}
        self.env_base = {**kept, **NO_BYTECODE, **own}
        self.source_env = source
        self.redact = Redactor(secret_values(source, min_len=4) + list(own.values()))
        self.prices = prices or PriceTable()
        # told after every turn that anything in the tree may have changed (the
        # workspace's cached snapshot must be taken again)
        self.on_change = on_change

    def act(self, request: AgentRequest) -> AgentReport:
        self.home.mkdir(parents=True, exist_ok=True)
        turn = Turn(
            spec=self.spec,
            constraints=self.constraints,
            prompt=request.prompt,
            system=request.system,
            model=self.model,
            session_id=request.session_id,
            new_session_id=str(uuid.uuid4()),
            home=self.home,
            workdir=self.workdir,
            sandboxed=self.sandbox is not None,
        )
        refusal = getattr(self.adapter, "refusal", None)
        why = refusal(self.workdir) if refusal is not None else ""
        if why:
            raise LooprunError(f"act.agent.cli {self.spec.cli}: {why}")
        # what the CLI leaves in the tree about itself (a cache), if this turn made it
        scratch = getattr(self.adapter, "scratch", ())
        scratch = [p for p in scratch if not (self.workdir / p).exists()]
        raw = bytearray()

        def keep(chunk: bytes) -> None:
            if len(raw) < RAW_CAP:
                raw.extend(chunk[: RAW_CAP - len(raw)])

        with confined(
            self.sandbox,
            workdir=self.workdir,
            home=self.home,
            names=self.adapter.base_url_env,
            defaults=self.adapter.servers,
            env=self.source_env,
        ) as (sandbox, way):
            source = {**self.source_env, **way}
            env = {**self.env_base, **way, **self.adapter.environment(turn, source)}
            env["PWD"] = str(self.workdir)  # a CLI that trusts $PWD (opencode) over its cwd
            result = run_process(
                self.adapter.command(self.program, turn),
                cwd=self.workdir,
                timeout_s=max(1.0, request.timeout_s),
                env=env,
                max_output_bytes=4096,
                on_output=keep,
                sandbox=sandbox,
            )
        for rel in scratch:
            shutil.rmtree(self.workdir / rel, ignore_errors=True)
        if self.on_change is not None:
            self.on_change(None)
        text = raw.decode("utf-8", "replace")
        collect = getattr(self.adapter, "collect", None)
        if collect is not None:  # reports the CLI writes to files, not to its output
            text += collect(turn)
        output = self.redact(text)
        artifact = self.artifacts / f"agent-{request.iteration:03d}.{self.spec.cli}.log"
        write_atomic(artifact, output, nofollow=True)  # commands write artifacts: no link
        parsed = self.adapter.parse(output)
        return self._report(parsed, result.exit_code, result.timed_out, request, artifact)

    def _report(
        self,
        parsed: Parsed,
        exit_code: int | None,
        timed_out: bool,
        request: AgentRequest,
        artifact: Path,
    ) -> AgentReport:
        prompt, completion = parsed.prompt_tokens, parsed.completion_tokens
        total = {"prompt_tokens": prompt, "completion_tokens": completion}
        if parsed.cumulative:  # a running total across resumed turns: this call's share
            before = request.session_usage if request.session_id else {}
            prompt = max(0, prompt - int(before.get("prompt_tokens", 0)))
            completion = max(0, completion - int(before.get("completion_tokens", 0)))
        else:
            before = request.session_usage if request.session_id else {}
            total = {
                "prompt_tokens": prompt + int(before.get("prompt_tokens", 0)),
                "completion_tokens": completion + int(before.get("completion_tokens", 0)),
            }
        cost = parsed.cost_usd
        if cost is None:
            share = Usage(prompt, completion)
            cost, _known = self.prices.cost(parsed.model or self.model, share)
        error, detail = parsed.error, parsed.error_detail
        if timed_out:
            error = "timeout"
            detail = f"killed after {request.timeout_s:g} s (the whole process group)"
        elif exit_code not in (0, None) and not error:
            error = "exit_code"
            detail = f"exited with {exit_code}"
        return AgentReport(
            exit_code=exit_code,
            error=error,
            error_detail=self.redact(detail),
            turns=parsed.turns,
            tool_calls=tuple(parsed.tool_calls),
            denials=tuple(self.redact(d) for d in parsed.denials),
            final_message=self.redact(parsed.final_message)[:4000],
            session_id=parsed.session_id,
            prompt_tokens=prompt,
            completion_tokens=completion,
            cost_usd=float(cost),
            session_usage=total,
            artifact=artifact.name,
        )
