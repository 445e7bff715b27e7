"""Command line: ``python -m tools.packaging build`` (see __init__)."""

from __future__ import annotations

import argparse
import sys

from . import build
from .workspace import DIST, by_directory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.packaging", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("build", help="a package's wheel and sdist into dist/, then the wheel into this environment")
    p.add_argument("package", help="directory under packages/, e.g. neuron-ccl")
    p.add_argument("--jobs", type=int, default=2, help="parallel compile jobs")
    args = parser.parse_args(argv)

    pkg = by_directory(args.package)
    wheel, sdist = build.build(pkg, DIST, args.jobs)
    build.install(wheel)
    print(f"   dist/{wheel.name} ({build.size(wheel)}), dist/{sdist.name} ({build.size(sdist)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
