"""Command line: ``python -m tools.packaging {build,versions,alone,sdists}`` (see __init__)."""

from __future__ import annotations

import argparse
import sys

from . import alone, build, sdists, versions
from .workspace import DIST, by_directory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.packaging", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("build", help="a package's wheel and sdist into dist/, then the wheel into this environment")
    p.add_argument("package", help="directory under packages/, e.g. neuron-ccl")
    p.add_argument("--jobs", type=int, default=2, help="parallel compile jobs")
    p = sub.add_parser("versions", help="each package's version, CHANGELOG top entry and wheel")
    p.add_argument("--check", action="store_true", help="also run the version checks (exit 1 on a problem)")
    p = sub.add_parser("alone", help="each package installed alone from dist/ and smoke-tested")
    p.add_argument("packages", nargs="*", help="directories under packages/ (default: all)")
    p.add_argument("--jobs", type=int, default=2, help="packages checked at once")
    p = sub.add_parser("sdists", help="(long) every sdist in dist/ built into a wheel with pip's build isolation")
    p.add_argument("--jobs", type=int, default=2, help="parallel compile jobs")
    args = parser.parse_args(argv)

    if args.cmd == "build":
        pkg = by_directory(args.package)
        wheel, sdist = build.build(pkg, DIST, args.jobs)
        build.install(wheel)
        print(f"   dist/{wheel.name} ({build.size(wheel)}), dist/{sdist.name} ({build.size(sdist)})")
        return 0
    if args.cmd == "versions":
        return versions.report(args.check)
    if args.cmd == "alone":
        return alone.main(args.packages, args.jobs)
    return sdists.main(args.jobs)


if __name__ == "__main__":
    sys.exit(main())
