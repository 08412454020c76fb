"""Did-you-mean hints for misspelt keys, names and values."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def edit_distance(a: str, b: str) -> int:
    """Optimal string alignment distance: insertions, deletions, substitutions, swaps."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[len(b)]


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The most similar choice, if any is similar enough to be a likely typo."""
    options = sorted({c for c in choices if c != word})
    if not options:
        return None
    folded = {c.casefold(): c for c in options}
    if word.casefold() in folded:
        return folded[word.casefold()]
    limit = max(1, min(3, len(word) // 3))
    scored = sorted((edit_distance(word, c), c) for c in options)
    if scored[0][0] <= limit:
        return scored[0][1]
    found = difflib.get_close_matches(word, options, n=1, cutoff=0.75)
    return found[0] if found else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` or an empty string."""
    match = closest(word, choices)
    return f" (did you mean '{match}'?)" if match else ""
