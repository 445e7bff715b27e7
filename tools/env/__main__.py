"""``python -m tools.env``: every environment variable of every package, from each package's
registry (neuron_sim.env, neuron_ccl.env_vars, torch_neuron.env), with its value here.

``--markdown`` prints one table; the default lists ``NAME=value`` lines per package.
Packages that are not installed are named and skipped.
"""

from __future__ import annotations

import argparse
import os
import sys


def _neuron_sim():
    from neuron_sim import env
    return [(v.name, v.type, v.default, v.meaning) for v in env.env_registry()]


def _neuron_ccl():
    import neuron_ccl
    return [tuple(v) for v in neuron_ccl.env_vars()]


def _torch_neuron():
    from torch_neuron import env
    return [(v.name, v.type, v.default, v.meaning) for v in env.REGISTRY]


REGISTRIES = (("neuron-sim", _neuron_sim), ("neuron-ccl", _neuron_ccl), ("torch-neuron", _torch_neuron))


def collect() -> tuple[list[tuple[str, str, str, str, str]], list[str]]:
    """(package, name, type, default, meaning) rows and the packages that could not be imported."""
    rows, missing = [], []
    for package, read in REGISTRIES:
        try:
            rows += [(package, *var) for var in read()]
        except ImportError as e:
            missing.append(f"{package} ({e})")
    return rows, missing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.env", description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="one Markdown table of every variable")
    args = parser.parse_args(argv)
    rows, missing = collect()
    if args.markdown:
        print("| Package | Variable | Type | Default | Meaning |\n|---|---|---|---|---|")
        for package, name, type_, default, meaning in rows:
            cell = meaning.replace("|", "\\|").replace("\n", " ")
            print(f"| {package} | `{name}` | {type_} | {default or '–'} | {cell} |")
    else:
        current = None
        for package, name, type_, default, meaning in rows:
            if package != current:
                print(f"# {package}")
                current = package
            value = os.environ.get(name)
            shown = value if value is not None else f"(unset; default {default or '–'})"
            print(f"{name}={shown}  [{type_}] {meaning}")
    for m in missing:
        print(f"# not installed: {m}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
