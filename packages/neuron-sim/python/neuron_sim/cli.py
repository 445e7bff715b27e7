"""neuron-ls: list the simulated Neuron devices, as the Neuron SDK's neuron-ls lists real ones.

One row per chip with visible logical cores: the chip (NEURON DEVICE), its
visible logical cores (count and global ids, the NEURON_RT_VISIBLE_CORES
numbers), the LNC, the chip's HBM, the memory this process uses on it, and
the profile. ``--json`` prints the same as JSON; ``--profile`` the properties
of every visible core; ``--env`` the environment-variable registry with the
current values. Run as ``neuron-ls`` or ``python -m neuron_sim.cli``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from . import device as _device
from .env import env_registry, env_values
from .errors import NeuronSimError
from .profile_table import instance_type

GIB = 1 << 30


def _size(nbytes: int) -> str:
    for unit, scale in (("GiB", GIB), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.4g} {unit}"
    return f"{nbytes} B"


def _id_ranges(ids: list[int]) -> str:
    """'0-3' for consecutive ids, '1, 3' otherwise (neuron-ls style)."""
    parts, start = [], None
    for i, core in enumerate(ids):
        if start is None:
            start = core
        if i + 1 == len(ids) or ids[i + 1] != core + 1:
            parts.append(str(start) if start == core else f"{start}-{core}")
            start = None
    return ", ".join(parts)


def _num_chips() -> int:
    """Chips of the configuration (the runtime validated the variable at init)."""
    default = next(v.default for v in env_registry() if v.name == "NEURON_SIM_NUM_CHIPS")
    return int(env_values()["NEURON_SIM_NUM_CHIPS"] or default)


def chips() -> list[dict]:
    """One entry per chip with visible logical cores, in chip order."""
    out: dict[int, dict] = {}
    for dev in range(_device.device_count()):
        p = _device.get_device_properties(dev)
        chip = out.setdefault(p.chip, {
            "neuron_device": p.chip,
            "nc_count": 0,
            "neuroncore_ids": [],
            "devices": [],
            "lnc": p.lnc,
            "physical_cores_per_chip": p.physical_cores_per_chip,
            "memory_size": p.hbm_capacity * p.logical_cores_per_chip,
            "memory_used": 0,
            "profile": p.profile,
            "name": p.name,
        })
        chip["nc_count"] += 1
        chip["neuroncore_ids"].append(p.logical_core)
        chip["devices"].append(dev)
        chip["memory_used"] += _device.counters(dev)["bytes_in_use"]
    return [out[c] for c in sorted(out)]


def listing() -> dict:
    rows = chips()
    profile = rows[0]["profile"] if rows else ""
    return {"instance_type": instance_type(profile, _num_chips()) if rows else "",
            "simulated": True, "devices": rows}


def format_table(info: dict) -> str:
    headers = [("NEURON", "DEVICE"), ("NEURON", "CORES"), ("NEURON", "CORE IDS"), ("LNC", ""),
               ("NEURON", "MEMORY"), ("MEMORY", "USED"), ("PROFILE", "")]
    rows = [[str(c["neuron_device"]), str(c["nc_count"]), _id_ranges(c["neuroncore_ids"]), str(c["lnc"]),
             _size(c["memory_size"]), _size(c["memory_used"]), c["profile"]] for c in info["devices"]]
    widths = [max(len(h[0]), len(h[1]), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(cells, center=False):
        return "|" + "|".join(f" {c.center(w) if center else c.ljust(w)} " for c, w in zip(cells, widths)) + "|"

    out = [f"instance-type: {info['instance_type']} (simulated)", rule,
           line([h[0] for h in headers], True), line([h[1] for h in headers], True), rule]
    out += [line(r) for r in rows]
    out.append(rule)
    return "\n".join(out) + "\n"


def format_profile() -> str:
    info = listing()
    cores = [c for chip in info["devices"] for c in chip["neuroncore_ids"]]
    first = info["devices"][0] if info["devices"] else {}
    lines = [f"instance-type: {info['instance_type']} (simulated)",
             f"profile {first.get('profile', '')}, {_num_chips()} chip(s), LNC={first.get('lnc', '')}, "
             f"visible logical cores {_id_ranges(cores)}"]
    for dev in range(_device.device_count()):
        p = _device.get_device_properties(dev)
        lines.append(f"device {dev}:")
        lines += [f"  {f.name:<26} {getattr(p, f.name)}" for f in dataclasses.fields(p)]
    return "\n".join(lines) + "\n"


def format_env() -> str:
    values = env_values()
    lines = []
    for var in env_registry():
        value = values[var.name]
        shown = value if value is not None else f"(unset; default: {var.default})"
        lines.append(f"{var.name} = {shown}  [{var.type}]")
        lines.append(f"    {var.meaning}")
    return "\n".join(lines) + "\n"


def neuron_ls_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="neuron-ls", description=__doc__.splitlines()[0])
    parser.add_argument("-j", "--json", "--json-output", dest="json", action="store_true",
                        help="print the listing as JSON")
    parser.add_argument("--profile", action="store_true",
                        help="print every property of each visible logical core")
    parser.add_argument("--env", action="store_true",
                        help="print the environment variables the runtime reads, with current values")
    args = parser.parse_args(argv)
    if args.env:
        sys.stdout.write(format_env())
    try:
        if args.json:
            print(json.dumps(listing(), indent=2))
        elif args.profile:
            sys.stdout.write(format_profile())
        elif not args.env:
            sys.stdout.write(format_table(listing()))
    except NeuronSimError as exc:
        print(f"neuron-ls: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(neuron_ls_main())
