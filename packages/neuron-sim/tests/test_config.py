"""Configuration from the environment: profiles, chips, LNC, visible cores, capacity, timeline."""

from __future__ import annotations

import pytest

from nsim_child import child_env, run_json, run_python

LIST_DEVICES = """
    import json, neuron_sim as ns
    props = [ns.get_device_properties(i) for i in range(ns.device_count())]
    print(json.dumps([dict(profile=p.profile, chip=p.chip, core=p.logical_core, lnc=p.lnc,
                           hbm=p.hbm_capacity, name=p.name) for p in props]))
"""
GIB = 1 << 30


def test_default_is_one_trn2_chip_with_four_logical_cores():
    devices = run_json(LIST_DEVICES)
    # F §5.4: trn2 default LNC=2 -> 4 logical cores per chip; F §5.1: 96 GiB per chip.
    assert [d["core"] for d in devices] == [0, 1, 2, 3]
    assert {(d["profile"], d["lnc"], d["chip"], d["hbm"]) for d in devices} == {("trn2", 2, 0, 24 * GIB)}


def test_trn1_profile_has_two_cores():
    devices = run_json(LIST_DEVICES, NEURON_SIM_PROFILE="trn1")
    # F §5.1: 2 x NC-v2, 32 GiB per chip; F §5.4: no LNC grouping on trn1.
    assert [(d["core"], d["lnc"], d["hbm"]) for d in devices] == [(0, 1, 16 * GIB), (1, 1, 16 * GIB)]
    assert devices[0]["profile"] == "trn1"


def test_lnc1_on_trn2_gives_eight_devices():
    devices = run_json(LIST_DEVICES, NEURON_LOGICAL_NC_CONFIG="1")
    assert [d["core"] for d in devices] == list(range(8))
    assert {(d["lnc"], d["hbm"]) for d in devices} == {(1, 12 * GIB)}


def test_trn3_profile():
    devices = run_json(LIST_DEVICES, NEURON_SIM_PROFILE="trn3")
    # F §5.1: 144 GiB per trn3 chip over 4 logical cores at LNC=2.
    assert len(devices) == 4 and devices[0]["hbm"] == 36 * GIB and devices[0]["profile"] == "trn3"


def test_visible_cores_select_and_renumber():
    devices = run_json(LIST_DEVICES, NEURON_RT_VISIBLE_CORES="1,3")
    assert [d["core"] for d in devices] == [1, 3]


def test_visible_core_range_across_chips():
    devices = run_json(LIST_DEVICES, NEURON_SIM_NUM_CHIPS="2", NEURON_RT_VISIBLE_CORES="2-5")
    assert [(d["core"], d["chip"]) for d in devices] == [(2, 0), (3, 0), (4, 1), (5, 1)]


def test_num_chips_multiplies_devices():
    devices = run_json(LIST_DEVICES, NEURON_SIM_NUM_CHIPS="3")
    assert [d["chip"] for d in devices] == [0] * 4 + [1] * 4 + [2] * 4
    assert [d["core"] for d in devices] == list(range(12))


@pytest.mark.parametrize("value, expected", [("1M", 1 << 20), ("3G", 3 * GIB), ("65536", 65536), ("2GiB", 2 * GIB)])
def test_hbm_capacity_override(value, expected):
    info = run_json("""
        import json, neuron_sim as ns
        print(json.dumps([ns.get_device_properties(0).hbm_capacity, ns.mem_get_info(0)]))
    """, NEURON_SIM_HBM_CAPACITY=value)
    assert info == [expected, [expected, expected]]


@pytest.mark.parametrize("var, value", [
    ("NEURON_SIM_PROFILE", "trn9"),
    ("NEURON_SIM_NUM_CHIPS", "0"),
    ("NEURON_SIM_NUM_CHIPS", "two"),
    ("NEURON_LOGICAL_NC_CONFIG", "3"),
    ("NEURON_RT_VISIBLE_CORES", "4"),
    ("NEURON_RT_VISIBLE_CORES", "1,1"),
    ("NEURON_RT_VISIBLE_CORES", "3-1"),
    ("NEURON_SIM_HBM_CAPACITY", "12Q"),
    ("NEURON_SIM_TIMELINE", "maybe"),
    ("NEURON_SIM_TIMELINE_CAPACITY", "-5"),
    ("NEURON_SIM_FAULT_ALLOC", "0"),
    ("NEURON_SIM_FAULT_ALLOC", "2:0"),
    ("NEURON_SIM_FAULT_KERNEL", "k=0"),
    ("NEURON_SIM_FAULT_KERNEL", "=3"),
    ("NEURON_SIM_FAULT_DEVICE_LOST", "9"),
    ("NEURON_SIM_FAULT_DEVICE_LOST", "1@0"),
])
def test_invalid_value_raises_config_error_naming_the_variable(var, value):
    proc = run_python("""
        import neuron_sim as ns
        try:
            ns.device_count()
        except ns.ConfigError as exc:
            print(exc.code.name, "|", exc.message)
        else:
            print("no error")
    """, child_env(**{var: value}))
    assert proc.returncode == 0, proc.stderr
    code, _, message = proc.stdout.partition(" | ")
    assert code == "CONFIG"
    assert var in message and value in message


def test_lnc2_is_rejected_on_trn1():
    proc = run_python("""
        import neuron_sim as ns
        try:
            ns.init()
        except ns.ConfigError as exc:
            print(exc.message)
    """, child_env(NEURON_SIM_PROFILE="trn1", NEURON_LOGICAL_NC_CONFIG="2"))
    assert "NEURON_LOGICAL_NC_CONFIG" in proc.stdout and "trn1" in proc.stdout


def test_shutdown_then_init_rereads_the_environment():
    counts = run_json("""
        import json, os, neuron_sim as ns
        first = ns.device_count()
        os.environ["NEURON_SIM_PROFILE"] = "trn1"
        unchanged = ns.device_count()
        ns.shutdown()
        assert not ns.is_initialized()
        second = ns.device_count()
        print(json.dumps([first, unchanged, second, ns.is_initialized()]))
    """)
    assert counts == [4, 4, 2, True]


def test_failed_init_is_remembered_until_shutdown():
    result = run_json("""
        import json, os, neuron_sim as ns
        seen = []
        for _ in range(2):
            try:
                ns.device_count()
            except ns.ConfigError as exc:
                seen.append(exc.message)
        os.environ["NEURON_SIM_NUM_CHIPS"] = "2"
        try:
            ns.device_count()
        except ns.ConfigError:
            seen.append("still failing")
        ns.shutdown()
        print(json.dumps([seen, ns.device_count()]))
    """, NEURON_SIM_NUM_CHIPS="65")
    messages, count = result
    assert len(messages) == 3 and messages[0] == messages[1] and messages[2] == "still failing"
    assert "NEURON_SIM_NUM_CHIPS='65'" in messages[0]
    assert count == 8


def test_timeline_disabled_by_environment():
    counts = run_json("""
        import json, neuron_sim as ns
        q = ns.Queue(0)
        q.launch("k", 100.0)
        before = len(ns.timeline(0))
        ns.set_timeline_enabled(True)
        q.launch("k", 100.0)
        print(json.dumps([before, [r.name for r in ns.timeline(0)]]))
    """, NEURON_SIM_TIMELINE="0")
    assert counts == [0, ["k"]]


def test_timeline_capacity_keeps_newest_records():
    names = run_json("""
        import json, neuron_sim as ns
        q = ns.Queue(0)
        for i in range(5):
            q.launch(f"k{i}", 10.0)
        print(json.dumps([r.name for r in ns.timeline(0)]))
    """, NEURON_SIM_TIMELINE_CAPACITY="3")
    assert names == ["k2", "k3", "k4"]
