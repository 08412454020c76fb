"""Aider (PyPI ``aider-chat``) headless: ``aider --message PROMPT`` in the run's tree.

Aider prints no machine-readable report, and a rejected key still exits 0. What it did is
read from three sources the actor keeps together in the turn's artifact: its console
output (``Applied edit to PATH``, ``Skipping edits to PATH``, ``litellm.<Name>Error``), its
analytics log (``--analytics-log``: one ``message_send`` event per model call with the
tokens and cost, an ``exit`` event when it finished), and its chat transcript
(``--chat-history-file``: the model's last reply). Every file aider keeps about itself
(histories, analytics, caches) goes under the run directory; it makes no commits, runs no
commands (no shell suggestions, lint or test runs) and fetches nothing at start.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

from looprun.act.agents.base import Parsed, Turn, json_lines
from looprun.errors import LooprunError
from looprun.workspace.git import Git

# The sections the actor appends to aider's console output (see ``collect``).
ANALYTICS_MARK = "--- looprun: aider analytics log ---"
CHAT_MARK = "--- looprun: aider chat history ---"

# Files in the repository aider would read its settings from: options (commands to run
# on launch, lint or test commands), variables (another server for the key), model
# settings. looprun does not run aider on a tree that has them.
REPO_SETTINGS = (
    ".aider.conf.yml",
    ".env",
    ".aider.model.settings.yml",
    ".aider.model.metadata.json",
)

# litellm's exception names, as aider prints them, to normalised ``agent.error`` values
_ERRORS = {
    "AuthenticationError": "auth",
    "PermissionDeniedError": "auth",
    "RateLimitError": "rate_limit",
    "InternalServerError": "server",
    "ServiceUnavailableError": "server",
    "APIConnectionError": "server",
    "Timeout": "timeout",
    "ContextWindowExceededError": "context_window",
    "BadRequestError": "api_error",
    "NotFoundError": "api_error",
    "APIError": "api_error",
}
_LITELLM_ERROR = re.compile(r"litellm\.(\w+):\s*(.*)")
_APPLIED = re.compile(r"^Applied edit to (.+)$", re.M)
_SKIPPED = re.compile(r"^Skipping edits to (.+?)(?: that matches \w+ spec)?\.?$", re.M)
_MAIN_MODEL = re.compile(r"^Main model: (\S+)", re.M)


def _files(turn: Turn) -> dict[str, Path]:
    base = turn.home / "aider"
    return {
        "analytics": base / "analytics.jsonl",
        "chat": base / "chat.history.md",
        "input": base / "input.history",
        "index": base / "index",
        "env": base / "no.env",
    }


class Aider:
    cli = "aider"
    program = "aider"
    package = "aider-chat"
    install = "python3 -m venv ~/.aider-venv && ~/.aider-venv/bin/pip install aider-chat"
    program_env = "LOOPRUN_AIDER"  # the aider executable, where it is not on PATH
    key_env = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
    base_url_env = ("LOOPRUN_AIDER_BASE_URL", "OPENAI_BASE_URL")
    servers = ("https://api.openai.com/v1", "https://api.anthropic.com")
    drop_env = ("AIDER_",)  # the user's own aider settings (commands on launch, ...)
    # what aider leaves in the working tree whatever its options: its repo-map cache
    scratch = (".aider.tags.cache.v4",)

    def command(self, program: str, turn: Turn) -> list[str]:
        files = _files(turn)
        cmd = [
            program,
            "--yes-always",
            "--no-auto-commits",
            "--no-dirty-commits",
            "--no-gitignore",
            "--no-stream",
            "--no-pretty",
            "--no-fancy-input",
            "--no-suggest-shell-commands",
            "--no-auto-lint",
            "--no-auto-test",
            "--no-detect-urls",
            "--no-check-update",
            "--no-show-release-notes",
            "--no-show-model-warnings",
            "--no-analytics",
            "--disable-playwright",
            "--no-restore-chat-history",
            "--analytics-log",
            str(files["analytics"]),
            "--chat-history-file",
            str(files["chat"]),
            "--input-history-file",
            str(files["input"]),
            "--env-file",
            str(files["env"]),
            "--encoding",
            "utf-8",
        ]
        if turn.model:
            cmd += ["--model", turn.model]
        message = f"{turn.system}\n\n{turn.prompt}" if turn.system else turn.prompt
        return [*cmd, "--message", message]

    def environment(self, turn: Turn, env: Mapping[str, str]) -> dict[str, str]:
        files = _files(turn)
        files["analytics"].parent.mkdir(parents=True, exist_ok=True)
        for name in ("analytics", "chat"):  # this turn's, not an earlier one's
            files[name].unlink(missing_ok=True)
        _offline_model_cache(turn.home)
        # an identity where aider looks first: without one it writes one into the
        # repository's .git/config, which the run's sandbox keeps read-only (and which is
        # not aider's to change); it commits nothing, so the name is never used
        (turn.home / ".gitconfig").write_text(
            "[user]\n\tname = looprun\n\temail = looprun@localhost\n", encoding="utf-8"
        )
        out = {
            "HOME": str(turn.home),
            # litellm's bundled model prices and context windows, not a download
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            # files aider adds to git are staged in a copy of the index, not the user's
            "GIT_INDEX_FILE": str(files["index"]),
        }
        _copy_index(turn.workdir, files["index"])
        out.update(_private_objects(turn))
        # an OpenAI-compatible server for openai/<model> (what --openai-api-base sets)
        base_url = env.get("LOOPRUN_AIDER_BASE_URL") or env.get("OPENAI_BASE_URL")
        if base_url:
            out["AIDER_OPENAI_API_BASE"] = base_url
        return out

    def refusal(self, workdir: Path) -> str:
        """Why aider must not run on this tree ("" when it may)."""
        found = [name for name in REPO_SETTINGS if (workdir / name).exists()]
        if not found:
            return ""
        return (
            f"the working tree has {', '.join(found)}: aider reads its settings from there "
            "(commands to run, another server for the key); looprun does not run aider on "
            "a tree that has them - remove them, or use another act.agent.cli"
        )

    def collect(self, turn: Turn) -> str:
        """Aider's analytics log and chat transcript of this turn, to append to its
        console output: together they are the turn's artifact and what ``parse`` reads."""
        files = _files(turn)
        parts = []
        for mark, path in ((ANALYTICS_MARK, files["analytics"]), (CHAT_MARK, files["chat"])):
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                text = ""
            parts.append(f"\n{mark}\n{text}")
        # kept only in the artifact, where secrets are redacted (a server's error may
        # quote the key back, and aider writes it to its transcript as it is)
        for name in ("analytics", "chat", "input"):
            files[name].unlink(missing_ok=True)
        return "".join(parts)

    def parse(self, output: str) -> Parsed:
        console, _, rest = output.partition(f"\n{ANALYTICS_MARK}\n")
        analytics, _, chat = rest.partition(f"\n{CHAT_MARK}\n")
        out = Parsed()
        finished = False
        cost = 0.0
        for event in json_lines(analytics):
            props = event.get("properties") or {}
            kind = event.get("event")
            if kind == "message_send":
                out.turns += 1
                out.prompt_tokens += _number(props.get("prompt_tokens"))
                out.completion_tokens += _number(props.get("completion_tokens"))
                cost += float(_number(props.get("cost"), float))
            elif kind == "message_send_exception" and not out.error:
                out.error, out.error_detail = "failed", str(props.get("exception") or "")[:500]
            elif kind == "exit":
                finished = True
        out.cost_usd = cost if cost > 0 else None  # 0: aider knows no price for the model
        out.tool_calls = [f"edit({p.strip()})" for p in _APPLIED.findall(console)]
        out.denials = [f"edit({p.strip()})" for p in _SKIPPED.findall(console)]
        if m := _MAIN_MODEL.search(console):
            out.model = m.group(1).split("/", 1)[-1]
        out.final_message = _last_reply(chat)
        # a failed call still exits 0; the transcript has the message unwrapped
        if m := _LITELLM_ERROR.search(chat) or _LITELLM_ERROR.search(console):
            out.error = _ERRORS.get(m.group(1), "api_error")
            out.error_detail = f"litellm.{m.group(1)}: {m.group(2).strip()}"[:500]
        elif not finished and not out.error:
            out.error = "crashed"
            out.error_detail = "no exit event in aider's analytics log"
        out.ok = not out.error
        return out


def _number(value: object, kind: type = int) -> int | float:
    return kind(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _last_reply(chat: str) -> str:
    """The model's last reply in aider's transcript: after the last user message
    (``#### `` lines), the last run of lines between aider's own notes (``> `` lines:
    token counts, files added, edits applied)."""
    lines = chat.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("#### ")]
    if not starts:
        return ""
    replies: list[list[str]] = [[]]
    for line in lines[starts[-1] + 1 :]:
        if line.startswith("> ") or line.rstrip() == ">":
            replies.append([])
        else:
            replies[-1].append(line)
    texts = ["\n".join(r).strip() for r in replies]
    return next((t for t in reversed(texts) if t), "")


def _offline_model_cache(home: Path) -> None:
    """Aider downloads litellm's model list at start unless its cache (under its home)
    is fresh and not empty; a fresh stub makes it use litellm's bundled copy instead."""
    cache = home / ".aider" / "caches" / "model_prices_and_context_window.json"
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({"looprun": {"note": "offline: litellm's bundled map"}}))


def _private_objects(turn: Turn) -> dict[str, str]:
    """Git variables that send the objects aider stages (``git add`` of a file it
    creates) to a store of its own, reading the repository's through it: the run's
    sandbox keeps ``.git`` read-only, and nothing aider stages belongs there anyway."""
    try:
        git = Git(turn.workdir).pinned()
    except LooprunError:
        return {}  # not a repository: aider stages nothing
    common = git.common_dir or git.git_dir
    if common is None:
        return {}
    store = turn.home / "aider" / "objects"
    store.mkdir(parents=True, exist_ok=True)
    return {
        "GIT_OBJECT_DIRECTORY": str(store),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(common / "objects"),
    }


def _copy_index(workdir: Path, dest: Path) -> None:
    """A copy of the tree's git index for aider to stage into (none: it starts empty).
    ``.git`` is the repository, or in a worktree a file naming its git directory."""
    dest.unlink(missing_ok=True)
    dot_git = workdir / ".git"
    git_dir = dot_git
    if dot_git.is_file():
        text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
        if not text.startswith("gitdir:"):
            return
        git_dir = (workdir / text.removeprefix("gitdir:").strip()).resolve()
    index = git_dir / "index"
    if index.is_file():
        shutil.copyfile(index, dest)
