"""The stream-race sanitizer (TORCH_NEURON_SANITIZE, torch_neuron.sanitizer): programs with
known races across neuron streams are reported with both ops, both streams, the tensor and
both stacks; the same programs ordered by wait_stream, events, synchronize or record_stream
stay clean and compute what CPU computes."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import torch_neuron
from torch_neuron import sanitizer
from torch_neuron.sanitizer import StreamRaceError, StreamRaceWarning

pytestmark = pytest.mark.timeout(120)
DEV = "neuron"


@pytest.fixture
def sanitized():
    torch.neuron.synchronize()
    sanitizer.enable(raise_errors=True)
    try:
        yield
    finally:
        sanitizer.disable()
        torch.neuron.synchronize()


def _side() -> torch.neuron.Stream:
    return torch.neuron.Stream()


def write_on_default_read_on_side(side):
    x = torch.full((64, 32), 3.0, device=DEV)
    with torch.neuron.stream(side):
        return x * 2


def test_read_on_another_stream_without_wait_is_a_race(sanitized):
    side = _side()
    with pytest.raises(StreamRaceError) as e:
        write_on_default_read_on_side(side)
    msg = str(e.value)
    assert "aten::mul.Tensor reads" in msg and "which aten::full last wrote" in msg, msg
    assert f"stream {side.stream_id} of neuron:0" in msg and "stream 0 (default) of neuron:0" in msg, msg
    assert "shape [64, 32], float32" in msg, msg
    # Both launches' Python stacks name this test's function and line.
    assert msg.count("write_on_default_read_on_side") >= 2, msg
    assert "wait_stream" in msg and "TORCH_NEURON_SANITIZE=warn" in msg


def test_write_after_read_on_another_stream_is_a_race(sanitized):
    side = _side()
    x = torch.ones(128, device=DEV)
    side.wait_stream(torch.neuron.current_stream())
    with torch.neuron.stream(side):
        y = x + 1  # reads x on side
    with pytest.raises(StreamRaceError) as e:
        x.mul_(5)  # writes x on the default stream, unordered after side's read
    assert "aten::mul_.Tensor writes" in str(e.value) and "aten::add.Tensor last read" in str(e.value)
    del y


def test_read_of_side_stream_result_without_wait_is_a_race(sanitized):
    side = _side()
    x = torch.ones(16, device=DEV)
    side.wait_stream(torch.neuron.current_stream())
    with torch.neuron.stream(side):
        y = x * 3  # y written on side
    with pytest.raises(StreamRaceError, match="last wrote on stream"):
        y.sum()


@pytest.mark.parametrize("order", ["wait_stream", "event", "synchronize", "stream_synchronize",
                                   "event_synchronize", "torch_event"])
def test_ordered_programs_stay_clean(sanitized, order):
    side = _side()
    main = torch.neuron.current_stream()
    x = torch.full((64, 32), 3.0, device=DEV)
    if order == "wait_stream":
        side.wait_stream(main)
    elif order == "event":
        ev = torch.neuron.Event()
        ev.record(main)
        side.wait_event(ev)
    elif order == "torch_event":
        ev = torch.Event(device=DEV)
        ev.record(main)
        ev.wait(side)
    elif order == "synchronize":
        torch.neuron.synchronize()
    elif order == "stream_synchronize":
        main.synchronize()
    elif order == "event_synchronize":
        ev = main.record_event()
        ev.synchronize()
    with torch.neuron.stream(side):
        y = x * 2
        y.add_(1)
    main.wait_stream(side)
    out = y.cpu()
    torch.testing.assert_close(out, torch.full((64, 32), 7.0))
    assert sanitizer.reports() == []


def test_free_then_reuse_across_streams_without_record_stream_is_a_race(sanitized):
    side = _side()
    main = torch.neuron.current_stream()
    x = torch.ones(4096, device=DEV)
    side.wait_stream(main)
    with torch.neuron.stream(side):
        y = x * 2  # x still in use on side
    ptr = x.untyped_storage().data_ptr()
    del x  # freed into the default stream's pool, side's read not waited for
    with pytest.raises(StreamRaceError) as e:
        z = torch.zeros(4096, device=DEV)  # same size on the default stream: the same block
    msg = str(e.value)
    assert "previous allocation of this memory" in msg and "record_stream" in msg, msg
    assert f"block 0x{ptr:x}" in msg, msg
    assert "aten::mul.Tensor last read" in msg, msg
    del y


@pytest.mark.parametrize("order", ["record_stream", "wait_before_free"])
def test_free_then_reuse_ordered_stays_clean(sanitized, order):
    side = _side()
    main = torch.neuron.current_stream()
    x = torch.ones(4096, device=DEV)
    side.wait_stream(main)
    with torch.neuron.stream(side):
        y = x * 2
    if order == "record_stream":
        x.record_stream(side)
    else:
        main.wait_stream(side)
    del x
    z = torch.zeros(4096, device=DEV)
    main.wait_stream(side)
    torch.testing.assert_close((y + z).cpu(), torch.full((4096,), 2.0))
    assert sanitizer.reports() == []


def test_same_stream_programs_and_autograd_stay_clean(sanitized):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = torch.randn(8, 16, device=DEV)
    for _ in range(2):
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    assert torch.isfinite(loss).item()
    assert sanitizer.reports() == []


def test_warn_mode_reports_and_continues(sanitized):
    sanitizer.enable(raise_errors=False)
    side = _side()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = write_on_default_read_on_side(side)
    assert any(issubclass(w.category, StreamRaceWarning) for w in caught)
    assert len(sanitizer.reports()) == 1
    torch.neuron.current_stream().wait_stream(side)
    torch.testing.assert_close(y.cpu(), torch.full((64, 32), 6.0))


def test_off_reports_nothing():
    assert not sanitizer.enabled()
    side = _side()
    y = write_on_default_read_on_side(side)  # the same race, unchecked
    torch.neuron.current_stream().wait_stream(side)
    assert y.sum().item() == 64 * 32 * 6.0


def test_environment_variable_enables_it_for_the_process():
    prog = textwrap.dedent("""
        import torch
        from torch_neuron.sanitizer import StreamRaceError
        side = torch.neuron.Stream()
        x = torch.arange(10., device="neuron")
        try:
            with torch.neuron.stream(side):
                x.add_(1)
        except StreamRaceError as e:
            print("RACE", "aten::add_.Tensor writes" in str(e) or "aten::add_.Scalar writes" in str(e))
        else:
            print("CLEAN")
    """)
    env = dict(os.environ)
    for value, expected in (("1", "RACE True"), ("0", "CLEAN")):
        env["TORCH_NEURON_SANITIZE"] = value
        out = subprocess.run([sys.executable, "-c", prog], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == expected, (value, out.stdout, out.stderr)
    env["TORCH_NEURON_SANITIZE"] = "sometimes"
    out = subprocess.run([sys.executable, "-c", "import torch"], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "TORCH_NEURON_SANITIZE" in out.stderr
