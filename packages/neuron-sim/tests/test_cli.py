"""neuron-ls: the table and --json agree with the device properties of the same configuration."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import neuron_sim as ns
from neuron_sim import cli
from nsim_child import child_env, run_json

GIB = 1 << 30
PROPS = """
    import dataclasses, json, neuron_sim as ns
    print(json.dumps([dataclasses.asdict(ns.get_device_properties(i)) for i in range(ns.device_count())]))
"""


def _neuron_ls(*args: str, **env: str) -> subprocess.CompletedProcess:
    exe = os.path.join(os.path.dirname(sys.executable), "neuron-ls")
    return subprocess.run([exe, *args], env=child_env(**env), capture_output=True, text=True, timeout=60)


def _table_rows(text: str) -> list[list[str]]:
    rows = [line for line in text.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


@pytest.mark.parametrize("env, instance", [
    ({}, "trn2.3xlarge"),
    ({"NEURON_SIM_PROFILE": "trn1"}, "trn1.2xlarge"),
    ({"NEURON_SIM_NUM_CHIPS": "2", "NEURON_RT_VISIBLE_CORES": "1,3-5"}, None),
    ({"NEURON_SIM_NUM_CHIPS": "16", "NEURON_LOGICAL_NC_CONFIG": "1"}, "trn2.48xlarge"),
])
def test_table_and_json_match_properties(env, instance):
    props = run_json(PROPS, **env)
    table = _neuron_ls(**env)
    listing = json.loads(_neuron_ls("--json", **env).stdout)
    assert table.returncode == 0, table.stderr

    chips = sorted({p["chip"] for p in props})
    rows = _table_rows(table.stdout)
    assert [int(r[0]) for r in rows] == chips
    assert [c["neuron_device"] for c in listing["devices"]] == chips
    for row, entry, chip in zip(rows, listing["devices"], chips):
        mine = [p for p in props if p["chip"] == chip]
        ids = [p["logical_core"] for p in mine]
        chip_bytes = mine[0]["hbm_capacity"] * mine[0]["logical_cores_per_chip"]
        assert entry["neuroncore_ids"] == ids and entry["nc_count"] == len(ids) == int(row[1])
        assert entry["devices"] == [p["device"] for p in mine]
        assert entry["lnc"] == mine[0]["lnc"] == int(row[3])
        assert entry["memory_size"] == chip_bytes
        assert row[4] == f"{chip_bytes / GIB:.4g} GiB"
        assert entry["memory_used"] == 0 and row[5] == "0 B"
        assert row[6] == entry["profile"] == mine[0]["profile"]
        expanded = []
        for part in row[2].split(", "):
            lo, _, hi = part.partition("-")
            expanded += list(range(int(lo), int(hi or lo) + 1))
        assert expanded == ids
    first_line = table.stdout.splitlines()[0]
    if instance:
        assert listing["instance_type"] == instance and instance in first_line
    else:
        assert "no instance type" in listing["instance_type"]


def test_visible_cores_table_text():
    out = _neuron_ls(NEURON_RT_VISIBLE_CORES="1,3").stdout
    assert _table_rows(out) == [["0", "2", "1, 3", "2", "96 GiB", "0 B", "trn2"]]
    header = [line for line in out.splitlines() if line.startswith("|")][:2]
    assert "NEURON" in header[0] and "DEVICE" in header[1] and "CORE IDS" in header[1]


def test_used_memory_is_reported_in_process():
    ptr = ns.malloc(3 * GIB, device=1)
    try:
        entry = cli.listing()["devices"][0]
        assert entry["memory_used"] == ns.counters(0)["bytes_in_use"] + ns.counters(1)["bytes_in_use"] \
            + ns.counters(2)["bytes_in_use"] + ns.counters(3)["bytes_in_use"]
        assert entry["memory_used"] >= 3 * GIB
        row = _table_rows(cli.format_table(cli.listing()))[0]
        assert row[5].endswith("GiB") and float(row[5].split()[0]) >= 3
    finally:
        ns.free(ptr)


def test_module_entry_point_and_env_listing():
    proc = subprocess.run([sys.executable, "-m", "neuron_sim.cli", "--env"],
                          env=child_env(NEURON_SIM_NUM_CHIPS="2"), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for var in ns.env_registry():
        assert var.name in proc.stdout and var.meaning in proc.stdout
    assert "NEURON_SIM_NUM_CHIPS = 2" in proc.stdout
    assert "NEURON_SIM_PROFILE = (unset; default: trn2)" in proc.stdout


def test_profile_listing_prints_every_property():
    out = _neuron_ls("--profile", NEURON_SIM_PROFILE="trn3").stdout
    p = ns.profile_properties("trn3")
    assert "profile trn3, 1 chip(s), LNC=2, visible logical cores 0-3" in out
    assert out.count("device ") >= 4
    assert f"hbm_capacity               {p.hbm_capacity}" in out
    assert f"peak_flops_bf16            {p.peak_flops_bf16}" in out


def test_invalid_configuration_is_an_error_exit():
    proc = _neuron_ls(NEURON_RT_VISIBLE_CORES="0,99")
    assert proc.returncode == 2
    assert "NEURON_RT_VISIBLE_CORES" in proc.stderr and "99" in proc.stderr
    assert proc.stdout == ""
