"""The patch series as data: ``patches/series`` plus ``git format-patch`` files."""

from __future__ import annotations

import email
import email.policy
import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PATCHES_DIR = REPO / "patches"
SERIES_FILE = PATCHES_DIR / "series"
TORCH_VERSION = "2.13.0"

# Commit-message sections a reviewer needs, in this order.
SECTIONS = ("What breaks", "Fix", "Test plan", "Related")
_SECTION_RE = re.compile(r"^({}):\s*$".format("|".join(re.escape(s) for s in SECTIONS)), re.MULTILINE)
_TRAILER_RE = re.compile(r"^([A-Z][A-Za-z-]+): (.+)$")


class SeriesError(Exception):
    """The series or one of its patch files is malformed."""


@dataclass(frozen=True)
class FilePatch:
    path: str  # path in the PyTorch source tree, e.g. torch/_tensor.py or c10/core/TensorImpl.h
    diff: str  # the unified diff for this file, from its "--- " line on

    @property
    def is_cpp(self) -> bool:
        return not self.path.endswith(".py")


@dataclass(frozen=True)
class Patch:
    file: Path
    number: str  # "0001"
    name: str  # "checkpoint-device-rng-state"
    headers: dict[str, str]  # From / Date / Subject of the format-patch mail
    subject: str
    body: str  # commit message body (without subject, trailers kept)
    sections: dict[str, str]
    trailers: dict[str, str]
    files: tuple[FilePatch, ...]

    @property
    def id(self) -> str:
        return self.number

    @property
    def finding(self) -> str:
        return self.trailers.get("Finding", "")

    @property
    def needs_rebuild(self) -> bool:
        """C++ changes cannot be carried by a repacked wheel."""
        return any(f.is_cpp for f in self.files)


def _split_message(message: str) -> tuple[dict[str, str], dict[str, str]]:
    trailers: dict[str, str] = {}
    lines = message.rstrip().splitlines()
    while lines and _TRAILER_RE.match(lines[-1]):
        key, value = _TRAILER_RE.match(lines.pop()).groups()
        trailers[key] = value
    body = "\n".join(lines)
    sections: dict[str, str] = {}
    marks = list(_SECTION_RE.finditer(body))
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(body)
        sections[m.group(1)] = body[m.end() : end].strip()
    return sections, trailers


def _split_files(diff: str, source: Path) -> tuple[FilePatch, ...]:
    chunks = re.split(r"^(?=diff --git )", diff, flags=re.MULTILINE)
    files = []
    for chunk in chunks:
        if not chunk.startswith("diff --git "):
            continue
        m = re.search(r"^--- (?:a/(\S+)|/dev/null)\n\+\+\+ (?:b/(\S+)|/dev/null)$", chunk, re.MULTILINE)
        if not m:
            raise SeriesError(f"{source.name}: no ---/+++ header in {chunk.splitlines()[0]!r}")
        path = m.group(2) or m.group(1)
        files.append(FilePatch(path=path, diff=chunk[m.start() :]))
    if not files:
        raise SeriesError(f"{source.name}: contains no file diffs")
    return tuple(files)


def parse_patch(path: Path) -> Patch:
    text = path.read_text()
    m = re.match(r"(\d{4})-([a-z0-9][a-z0-9-]*)\.patch$", path.name)
    if not m:
        raise SeriesError(f"{path.name}: patch files are named NNNN-short-name.patch")
    head, sep, rest = text.partition("\n---\n")
    if not sep:
        raise SeriesError(f"{path.name}: no '---' line between the commit message and the diff")
    msg = email.message_from_string(head.split("\n", 1)[1] if head.startswith("From ") else head,
                                    policy=email.policy.compat32)
    headers = {k: " ".join(str(msg[k]).split()) for k in ("From", "Date", "Subject") if msg[k] is not None}
    subject = re.sub(r"^\[PATCH[^\]]*\]\s*", "", headers.get("Subject", ""))
    body = msg.get_payload()
    sections, trailers = _split_message(body)
    diff_start = rest.find("diff --git ")
    if diff_start < 0:
        raise SeriesError(f"{path.name}: no 'diff --git' after the commit message")
    diff = rest[diff_start:]
    diff = re.split(r"^-- \n", diff, flags=re.MULTILINE)[0]  # drop the format-patch signature
    return Patch(
        file=path,
        number=m.group(1),
        name=m.group(2),
        headers=headers,
        subject=subject,
        body=body.strip(),
        sections=sections,
        trailers=trailers,
        files=_split_files(diff, path),
    )


def load_series(patches_dir: Path = PATCHES_DIR) -> list[Patch]:
    series = patches_dir / "series"
    if not series.is_file():
        raise SeriesError(f"{series} does not exist")
    patches = []
    for lineno, line in enumerate(series.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        path = patches_dir / line
        if not path.is_file():
            raise SeriesError(f"{series}:{lineno}: {line} does not exist")
        patches.append(parse_patch(path))
    numbers = [p.number for p in patches]
    if numbers != sorted(numbers) or len(set(numbers)) != len(numbers):
        raise SeriesError(f"{series}: patch numbers must be unique and ascending, got {numbers}")
    return patches
