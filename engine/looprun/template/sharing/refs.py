"""A remote template reference, ``git+URL@REF#PATH``, and the file it names at a commit.

Pure values: parsing checks the shape only (scheme, a ref, a path inside the repository);
git is asked nothing here.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from looprun.data.value import valueclass

PREFIX = "git+"
SCHEMES = ("https", "http", "file", "ssh")
_BAD_REF = re.compile(r"(^-)|\.\.|[\s~^:?*\[\\]|@\{|^/|/$|\.lock$")


class RefError(Exception):
    """A reference cannot be used; the message says why (the caller adds the location)."""


def is_remote(ref: str) -> bool:
    return ref.startswith(PREFIX)


def shown_url(url: str) -> str:
    """The URL without a password (it may reach a terminal or a log)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}@{host}" if parts.username else host
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


@valueclass
class Reference:
    """``git+URL@REF#PATH`` split; ``key`` (without the path) is what the lock pins."""

    url: str
    ref: str
    path: str

    @property
    def key(self) -> str:
        return f"{PREFIX}{shown_url(self.url)}@{self.ref}"

    def __str__(self) -> str:
        return f"{self.key}#{self.path}"


def parse(text: str) -> Reference:
    """Split a reference; raise ValueError saying what is wrong with it."""
    body = text[len(PREFIX) :]
    left, hash_, path = body.rpartition("#")
    if not hash_ or not path:
        raise ValueError(f"'{text}': expected git+URL@REF#PATH (the file after '#')")
    url, at, ref = left.rpartition("@")
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if not at or not ref or scheme not in SCHEMES or "/" not in url.split("://", 1)[1].strip("/"):
        raise ValueError(
            f"'{text}': expected git+URL@REF#PATH with a tag, branch or commit after '@' "
            f"and a {', '.join(SCHEMES)} URL"
        )
    if _BAD_REF.search(ref):
        raise ValueError(f"'{text}': '{ref}' is not a valid git ref")
    return Reference(url, ref, inside(path, text))


def inside(path: str, text: str) -> str:
    """A path normalised inside the repository, or ValueError if it leaves it."""
    norm = posixpath.normpath(path)
    if path.startswith("/") or norm == ".." or norm.startswith("../") or norm == ".":
        raise ValueError(f"'{text}': the path must be a file inside the repository")
    return norm


@valueclass
class RemoteFile:
    """A template file at a commit of a remote repository: what a Document's path is for
    remote content. Shown as ``git+URL@REF#PATH``, so errors inside it name it."""

    reference: Reference
    commit: str
    # the resolver that pinned it (reads the content, checks it against the lock)
    resolver: Any = field(compare=False, repr=False, hash=False)

    @property
    def path(self) -> str:
        return self.reference.path

    def sibling(self, ref: str) -> RemoteFile:
        """``ref`` relative to this file, in the same repository at the same commit."""
        joined = posixpath.join(posixpath.dirname(self.path), ref)
        where = Reference(self.reference.url, self.reference.ref, inside(joined, ref))
        return RemoteFile(where, self.commit, self.resolver)

    def resolve(self) -> RemoteFile:
        return self

    def __str__(self) -> str:
        return str(self.reference)


_READ: dict[str, RemoteFile] = {}


def remember(f: RemoteFile) -> None:
    """Note a remote file read in this process, so a location naming it finds it again."""
    _READ[str(f)] = f


def source_of(file: str) -> Path | RemoteFile:
    """The file a location names: a remote file read in this process, else a local path
    (references are resolved relative to the file that wrote them)."""
    return _READ.get(file) or Path(file)
