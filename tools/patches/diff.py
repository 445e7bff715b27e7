"""Strict unified-diff application: every hunk must match at its stated line.

No fuzz and no offset: the series is written against exact torch 2.13.0 sources, so
any drift means the patch no longer describes the file it is applied to.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class ApplyError(Exception):
    """A hunk does not match the target file exactly."""


@dataclass(frozen=True)
class Hunk:
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    lines: tuple[str, ...]  # each starts with " ", "-" or "+"

    @property
    def old_lines(self) -> list[str]:
        return [ln[1:] for ln in self.lines if ln[0] in " -"]

    @property
    def new_lines(self) -> list[str]:
        return [ln[1:] for ln in self.lines if ln[0] in " +"]


def parse_hunks(diff: str) -> list[Hunk]:
    lines = diff.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    hunks: list[Hunk] = []
    i = 0
    while i < len(lines):
        m = _HUNK_RE.match(lines[i])
        if not m:
            i += 1
            continue
        old_start, old_len = int(m.group(1)), int(m.group(2) or 1)
        new_start, new_len = int(m.group(3)), int(m.group(4) or 1)
        body: list[str] = []
        i += 1
        seen_old = seen_new = 0
        while i < len(lines) and (seen_old < old_len or seen_new < new_len):
            ln = lines[i]
            if ln.startswith("\\"):  # "\ No newline at end of file"
                i += 1
                continue
            if ln == "":
                ln = " "  # a blank context line whose leading space was stripped
            if ln[0] not in " -+":
                raise ApplyError(f"malformed hunk line {ln!r} in hunk @@ -{old_start} +{new_start} @@")
            seen_old += ln[0] in " -"
            seen_new += ln[0] in " +"
            body.append(ln)
            i += 1
        if seen_old != old_len or seen_new != new_len:
            raise ApplyError(f"truncated hunk @@ -{old_start},{old_len} +{new_start},{new_len} @@")
        hunks.append(Hunk(old_start, old_len, new_start, new_len, tuple(body)))
    return hunks


def apply_hunks(text: str, hunks: list[Hunk], where: str) -> str:
    """Return ``text`` with ``hunks`` applied; ``where`` names the file in errors."""
    src = text.split("\n")
    out: list[str] = []
    pos = 0  # next unconsumed index in src
    for n, h in enumerate(hunks, 1):
        start = h.old_start - 1 if h.old_len else h.old_start
        old = h.old_lines
        found = src[start : start + len(old)]
        if start < pos or found != old:
            first_diff = next((k for k, (a, b) in enumerate(zip(old, found)) if a != b), min(len(old), len(found)))
            expected = old[first_diff] if first_diff < len(old) else "<end of hunk>"
            actual = found[first_diff] if first_diff < len(found) else "<end of file>"
            raise ApplyError(
                f"{where}: hunk #{n} (@@ -{h.old_start},{h.old_len} @@) does not match at line "
                f"{start + first_diff + 1}: expected {expected!r}, found {actual!r}"
            )
        out.extend(src[pos:start])
        out.extend(h.new_lines)
        pos = start + len(old)
    out.extend(src[pos:])
    return "\n".join(out)


def is_applied(text: str, hunks: list[Hunk]) -> bool:
    """Whether ``text`` already holds every hunk's new side at its stated line."""
    src = text.split("\n")
    for h in hunks:
        start = h.new_start - 1 if h.new_len else h.new_start
        if src[start : start + len(h.new_lines)] != h.new_lines:
            return False
    return True
