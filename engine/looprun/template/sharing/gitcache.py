"""The per-user cache of remote template repositories: one bare repository per URL,
fetched by real git, read with ``git cat-file`` (never checked out, so nothing a run can
write holds a template)."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path

from looprun.errors import one_line
from looprun.system.cache_home import cache_home
from looprun.template.sharing.refs import shown_url

_TIMEOUT_S = 120
_SHA = re.compile(r"^[0-9a-f]{40}$")


class GitError(Exception):
    """git could not do what was asked; the message is one line, without credentials."""


def default_root(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CACHE_HOME/looprun/templates`` (``~/.cache/looprun/templates`` by default)."""
    return cache_home(env) / "templates"


class Cache:
    """Bare repositories under ``root``, keyed by the URL's digest."""

    def __init__(self, root: Path | None = None):
        self.root = root or default_root()
        self._fetched: set[str] = set()

    def repo(self, url: str) -> Path:
        return self.root / (hashlib.sha256(url.encode()).hexdigest()[:32] + ".git")

    def _git(
        self, repo: Path, *args: str, check: bool = True
    ) -> subprocess.CompletedProcess[bytes]:
        env = dict(os.environ)
        env.update(
            GIT_TERMINAL_PROMPT="0",
            GIT_ALLOW_PROTOCOL="file:http:https:ssh",
            LC_ALL="C",
            GIT_NO_REPLACE_OBJECTS="1",
        )
        env.pop("GIT_DIR", None)
        try:
            done = subprocess.run(
                ["git", "--git-dir", str(repo), *args],
                capture_output=True,
                env=env,
                timeout=_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise GitError(f"git {args[0]}: {exc}") from None
        if check and done.returncode != 0:
            raise GitError(one_line(done.stderr.decode("utf-8", "replace")) or "git failed")
        return done

    def fetch(self, url: str) -> None:
        """Fetch every branch and tag of ``url`` (once per process), tags forced: a tag
        that moved upstream moves here, and the lock check sees it."""
        if url in self._fetched:
            return
        repo = self.repo(url)
        if not (repo / "HEAD").exists():
            repo.parent.mkdir(parents=True, exist_ok=True)
            self._git(repo, "init", "--bare", "--quiet")
        try:
            self._git(
                repo,
                "fetch",
                "--quiet",
                "--force",
                "--prune",
                "--no-write-fetch-head",
                url,
                "+refs/heads/*:refs/heads/*",
                "+refs/tags/*:refs/tags/*",
            )
        except GitError as exc:
            raise GitError(
                f"cannot fetch {shown_url(url)}: {str(exc).replace(url, shown_url(url))}"
            ) from None
        self._fetched.add(url)

    def cached(self, url: str) -> bool:
        return (self.repo(url) / "HEAD").exists()

    def resolve(self, url: str, ref: str) -> tuple[str, str] | None:
        """(kind, commit) of ``ref`` in the cached repository: a tag, a branch or a
        full commit id; None if it has none of that name."""
        repo = self.repo(url)
        if not self.cached(url):
            return None
        for kind, full in (("tag", f"refs/tags/{ref}"), ("branch", f"refs/heads/{ref}")):
            done = self._git(
                repo, "rev-parse", "--verify", "--quiet", f"{full}^{{commit}}", check=False
            )
            if done.returncode == 0:
                return kind, done.stdout.decode().strip()
        if _SHA.match(ref) and self.has_commit(url, ref):
            return "commit", ref
        return None

    def has_commit(self, url: str, commit: str) -> bool:
        if not self.cached(url):
            return False
        done = self._git(self.repo(url), "cat-file", "-e", f"{commit}^{{commit}}", check=False)
        return done.returncode == 0

    def kind_of(self, url: str, commit: str, path: str) -> str | None:
        """'blob', 'tree', 'link', 'submodule' for ``path`` at ``commit``, None if absent."""
        done = self._git(self.repo(url), "ls-tree", "-z", commit, "--", path, check=False)
        entry = done.stdout.split(b"\0", 1)[0].decode("utf-8", "replace")
        if done.returncode != 0 or not entry:
            return None
        mode, kind = entry.split(" ", 2)[:2]
        if mode == "120000":
            return "link"
        return "submodule" if kind == "commit" else kind

    def read(self, url: str, commit: str, path: str) -> bytes:
        return self._git(self.repo(url), "cat-file", "blob", f"{commit}:{path}").stdout

    def tags(self, url: str) -> list[str]:
        """The tags, newest version first (git's version sort)."""
        done = self._git(
            self.repo(url),
            "for-each-ref",
            "--sort=-v:refname",
            "--format=%(refname:short)",
            "refs/tags",
        )
        return [t for t in done.stdout.decode().splitlines() if t]
