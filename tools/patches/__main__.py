"""Command line: ``python -m tools.patches {apply,check,build,export,matrix}`` (see __init__)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import build, check, export, matrix
from .diff import ApplyError
from .series import SeriesError, load_series
from .tree import apply_to, copy_installed_python


def _apply(args) -> int:
    try:
        patches = load_series()
        if args.copy_installed:
            root = copy_installed_python(Path(args.target))
            print(f"apply: copied the installed torch's Python files and headers to {root}")
        else:
            root = Path(args.target)
        changed = apply_to(patches, root, include_cpp=args.include_cpp)
    except (SeriesError, ApplyError) as e:
        print(f"apply: {e}")
        return 1
    for path in changed:
        print(f"apply: patched {root / path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.patches", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("apply", help="apply the series to a PyTorch checkout or a copy of the wheel's files")
    p.add_argument("target", help="PyTorch source checkout, or a directory with the wheel's torch/ tree")
    p.add_argument("--copy-installed", action="store_true",
                   help="first copy the installed torch's Python files and headers into TARGET")
    p.add_argument("--include-cpp", action="store_true",
                   help="in a wheel copy, also patch the shipped C++ headers (always done in a checkout)")
    sub.add_parser("check", help="lint each patch and apply the series to the installed wheel")
    p = sub.add_parser("build", help="repack torch with the series into .venv-patched (when out of date)")
    p.add_argument("--force", action="store_true", help="rebuild even when the stamp is current")
    sub.add_parser("export", help="write pull-request descriptions to build/patches/pr/")
    p = sub.add_parser("matrix", help="run tests/patches on vanilla and patched torch")
    p.add_argument("--strict", action="store_true", help="also fail when a proof test was skipped")
    p.add_argument("--no-build", action="store_true", help="use .venv-patched as it is")
    p.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)
    if args.cmd == "apply":
        return _apply(args)
    if args.cmd == "check":
        return check.run()
    if args.cmd == "build":
        return build.run(force=args.force)
    if args.cmd == "export":
        return export.run()
    return matrix.run(args.pytest_args, strict=args.strict, skip_build=args.no_build)


if __name__ == "__main__":
    sys.exit(main())
