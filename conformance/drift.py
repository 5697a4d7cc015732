"""Snapshot drift: what changed in a token snapshot, told in terms a maintainer can act on.

Every token snapshot of the suite writes its token ids on lines of the form ``ids: [1, 2, 3]``
(see ``snapshots.py``); the ids of a snapshot are those lines concatenated. Comparing the ids
of the committed file with the ids a run produced gives the drift: token counts before and
after and the first position where they differ.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_IDS_LINE = re.compile(r"^\s*(?:-\s*)?ids:\s*\[([^\]]*)\]\s*$")


def parse_ids(text: str) -> list[int]:
    """The token ids of a snapshot text: every ``ids: [...]`` line, in file order."""
    ids: list[int] = []
    for line in text.splitlines():
        match = _IDS_LINE.match(line)
        if match and match.group(1).strip():
            ids.extend(int(part) for part in match.group(1).split(","))
    return ids


def first_difference(old: Sequence[int], new: Sequence[int]) -> int | None:
    """The first position where the sequences differ (a length change counts), or None."""
    for position, (a, b) in enumerate(zip(old, new, strict=False)):
        if a != b:
            return position
    if len(old) != len(new):
        return min(len(old), len(new))
    return None


@dataclass(frozen=True)
class DriftEntry:
    """One snapshot case as committed (``old_text``; None when there was none) and as run."""

    case: str
    old_text: str | None
    new_text: str

    @property
    def changed(self) -> bool:
        return self.old_text != self.new_text

    def describe(self) -> str:
        if self.old_text is None:
            return f"{self.case}: new snapshot, {len(parse_ids(self.new_text))} tokens"
        old, new = parse_ids(self.old_text), parse_ids(self.new_text)
        position = first_difference(old, new)
        if position is None:
            return f"{self.case}: same {len(new)} tokens; text around them changed (spans or decoded text)"
        before = old[position] if position < len(old) else "end"
        after = new[position] if position < len(new) else "end"
        return (
            f"{self.case}: tokens {len(old)} -> {len(new)}, first difference at position "
            f"{position} (id {before} -> {after})"
        )


def drift_lines(entries: Iterable[DriftEntry]) -> list[str]:
    """One line per changed case, in the order the cases ran."""
    return [entry.describe() for entry in entries if entry.changed]
