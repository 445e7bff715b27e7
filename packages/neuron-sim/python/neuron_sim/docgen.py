"""Generated Markdown tables kept between markers in committed documents.

A document holds ``<!-- NAME:begin -->`` and ``<!-- NAME:end -->`` lines; the
text between them is owned by a generator (the env-var registry, the profile
table) and rewritten with ``--write`` or compared with ``--check``.
"""

from __future__ import annotations

import argparse
import pathlib
from typing import Callable


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def extract(text: str, name: str, path: str = "<document>") -> str:
    """The generated block ``name`` of ``text``."""
    begin, end = _markers(name)
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        raise ValueError(f"{path}: no '{begin}' ... '{end}' block")
    return text[start + len(begin):stop].strip("\n") + "\n"


def splice(text: str, name: str, block: str, path: str = "<document>") -> str:
    """``text`` with its generated block ``name`` replaced by ``block``."""
    extract(text, name, path)
    begin, end = _markers(name)
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{block.rstrip()}\n{end}{tail}"


def run_doc_command(parser: argparse.ArgumentParser, argv: list[str] | None, name: str,
                    make: Callable[[], str]) -> int:
    parser.add_argument("--markdown", action="store_true", help="print the generated table (default)")
    parser.add_argument("--check", nargs="+", metavar="FILE",
                        help=f"exit 1 when a FILE's '{name}' block differs from the generated table")
    parser.add_argument("--write", nargs="+", metavar="FILE", help=f"rewrite the '{name}' block of each FILE")
    args = parser.parse_args(argv)
    block = make()
    status = 0
    for path in args.check or ():
        if extract(pathlib.Path(path).read_text(), name, path) != block:
            print(f"{path}: the '{name}' block is out of date; run {parser.prog} --write {path}")
            status = 1
    for path in args.write or ():
        p = pathlib.Path(path)
        p.write_text(splice(p.read_text(), name, block, path))
    if args.markdown or not (args.check or args.write):
        print(block, end="")
    return status
