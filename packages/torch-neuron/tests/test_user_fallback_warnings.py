"""The host-fallback policy as a new user meets it: one warning at their line, none from
tensor printing, one per op on request, errors in strict mode.

Each case runs a script in a fresh interpreter: the once-per-process warning can only be
observed in a process where no fallback ran before. float64 ops are host-only (the op
table lists no float64 kernel), so they are certain fallbacks.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

PRELUDE = """\
import json, sys, warnings
import torch
import torch_neuron
caught = []
def _record(message, category, filename, lineno, file=None, line=None):
    caught.append(dict(category=category.__name__, message=str(message), filename=filename,
                       lineno=lineno))
warnings.showwarning = _record
warnings.simplefilter("always")  # Python's own deduplication must not hide a second warning
def report(**extra):
    print("RESULT " + json.dumps(dict(warnings=caught, fallbacks=torch_neuron.get_fallback_ops(), **extra)))
"""


def run_script(tmp_path, body: str, **env) -> tuple[dict, str]:
    """Runs PRELUDE + body as a file; returns the script's report and the file's path."""
    script = tmp_path / "user_script.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_NEURON_")}
    full_env.update(env)
    full_env.pop("PYTHONWARNINGS", None)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=full_env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, proc.stdout + proc.stderr
    return json.loads(lines[0][len("RESULT "):]), str(script)


def line_of(path: str, marker: str) -> int:
    """1-based line of the only line of `path` that contains `marker`."""
    hits = [i + 1 for i, line in enumerate(open(path).read().splitlines()) if marker in line]
    assert len(hits) == 1, (marker, hits)
    return hits[0]


def neuron_warnings(result: dict) -> list[dict]:
    return [w for w in result["warnings"] if w["category"] == "FallbackWarning" or "neuron" in w["message"]]


def test_first_fallback_warns_once_at_the_users_line(tmp_path):
    result, path = run_script(tmp_path, """
        x = torch.arange(16, dtype=torch.float64).reshape(4, 4).to("neuron")
        before = dict(torch_neuron.get_fallback_ops())
        d = torch.cdist(x, x)  # FIRST FALLBACK (inside torch/functional.py)
        y = torch.special.zeta(x + 2, x + 1)
        z = y.cumprod(0).sum() + torch.linalg.det(x + torch.eye(4, dtype=torch.float64, device="neuron"))
        w = x.clone().requires_grad_()
        (w.sin() * 3).sum().backward()
        print(d, z)
        report(before=before)
    """)
    assert result["before"] == {}, "copies to the device are not fallbacks"
    assert len(result["fallbacks"]) >= 5, result["fallbacks"]  # many fallbacks, one warning
    warned = neuron_warnings(result)
    assert len(warned) == 1, warned
    w = warned[0]
    assert w["category"] == "FallbackWarning"
    assert (w["filename"], w["lineno"]) == (path, line_of(path, "# FIRST FALLBACK"))
    msg = w["message"]
    assert "aten::_cdist_forward (Double)" in msg
    assert "first host fallback" in msg and "more may follow" in msg
    assert "torch_neuron.get_fallback_ops()" in msg       # how to list them
    assert "TORCH_NEURON_FALLBACK_WARN=op" in msg         # how to see each as it happens
    assert "TORCH_NEURON_FALLBACK_WARN=0" in msg          # how to silence it
    assert "TORCH_NEURON_STRICT=1" in msg                 # how to make fallbacks errors
    assert "Triggered internally" not in msg and ".cpp" not in msg


def test_first_fallback_in_a_module_forward_points_at_the_model_code(tmp_path):
    result, path = run_script(tmp_path, """
        class Net(torch.nn.Module):
            def forward(self, x):
                return torch.nn.functional.softplus(x).cumsum(0)  # USER FORWARD
        x = torch.ones(8, dtype=torch.float64).to("neuron")
        Net()(x)
        report()
    """)
    (w,) = neuron_warnings(result)
    assert (w["filename"], w["lineno"]) == (path, line_of(path, "# USER FORWARD"))
    assert "aten::softplus (Double)" in w["message"]


ALL_DTYPES = ["float32", "float64", "float16", "bfloat16", "complex64", "complex128", "int8",
              "int16", "int32", "int64", "uint8", "bool", "float8_e4m3fn", "float8_e5m2"]


def test_printing_tensors_of_every_dtype_warns_nothing(tmp_path):
    result, path = run_script(tmp_path, f"""
        import io, contextlib
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            for name in {ALL_DTYPES!r}:
                dtype = getattr(torch, name)
                base = torch.tensor([[0.0, 1.5, -2.25], [1e-5, 3e6, -7.0]])
                if dtype.is_complex:
                    base = torch.complex(base, -base)
                cpu = base.to(dtype) if dtype != torch.bool else base > 0
                t = cpu.to("neuron")
                print(t)
                print(repr(t[0]), str(t[1, 1]), "{{}}".format(t))
                print(t.T, t[:, ::2])                     # non-contiguous views
                print(torch.empty(0, 3, dtype=dtype).to("neuron"))
                if dtype.is_floating_point and dtype.itemsize > 1:
                    special = torch.tensor([float("nan"), float("inf"), -float("inf"), 1.0]).to(dtype)
                    print(special.to("neuron"))
                    print(f"{{t[0, 1]:.3f}}")              # Tensor.__format__ of a 0-dim tensor
            print(torch.arange(2000, dtype=torch.float32).to("neuron"))  # summarised ("...")
        printed = dict(torch_neuron.get_fallback_ops())
        x = torch.ones(3, dtype=torch.float64).to("neuron")
        x.cumprod(0)  # AFTER PRINTING
        report(printed=printed, text=out.getvalue())
    """)
    assert result["printed"], "printing ran no host op: the exemption was not exercised"
    assert "..." in result["text"] and "float8_e5m2" in result["text"]
    warned = neuron_warnings(result)
    # Printing does not warn, and does not use up the process's one warning either.
    assert len(warned) == 1, warned
    assert (warned[0]["filename"], warned[0]["lineno"]) == (path, line_of(path, "# AFTER PRINTING"))
    assert "aten::cumprod (Double)" in warned[0]["message"]


def test_per_op_mode_warns_once_per_op_at_each_users_line(tmp_path):
    result, path = run_script(tmp_path, """
        x = torch.ones(4, dtype=torch.float64).to("neuron")
        print(x, x[1:])  # printing stays silent in this mode too
        for _ in range(3):
            x.cumprod(0)  # OP A
        x.cumsum(0)  # OP B
        x.cumprod(0)
        report()
    """, TORCH_NEURON_FALLBACK_WARN="op")
    warned = neuron_warnings(result)
    ops = [w["message"].split(" ")[1] for w in warned]
    assert ops == ["aten::cumprod", "aten::cumsum"], warned
    assert [w["lineno"] for w in warned] == [line_of(path, "# OP A"), line_of(path, "# OP B")]
    assert all(w["filename"] == path and "once per op" in w["message"] for w in warned)
    assert result["fallbacks"]["aten::cumprod"] == 4


def test_silent_mode_counts_without_warning_and_the_mode_can_change_at_run_time(tmp_path):
    result, path = run_script(tmp_path, """
        x = torch.ones(4, dtype=torch.float64).to("neuron")
        x.cumprod(0)
        silent = list(caught)
        mode = torch_neuron.fallback_warnings()
        torch_neuron.set_fallback_warnings("once")
        x.cumsum(0)  # ARMED
        x.cumprod(0)
        report(silent=silent, mode=mode)
    """, TORCH_NEURON_FALLBACK_WARN="0")
    assert result["silent"] == [] and result["mode"] == "0"
    (w,) = neuron_warnings(result)
    assert w["lineno"] == line_of(path, "# ARMED") and "aten::cumsum" in w["message"]
    assert result["fallbacks"]["aten::cumprod"] == 2


def test_strict_mode_raises_and_names_the_op(tmp_path):
    result, _ = run_script(tmp_path, """
        x = torch.ones(4, dtype=torch.float64).to("neuron")
        try:
            x.cumprod(0)
        except NotImplementedError as e:
            report(error=str(e))
        else:
            report(error=None)
    """, TORCH_NEURON_STRICT="1")
    assert result["error"] and "aten::cumprod" in result["error"] and "TORCH_NEURON_STRICT" in result["error"]
    assert neuron_warnings(result) == []


def test_warnings_turned_into_errors_raise_the_fallback_warning(tmp_path):
    result, _ = run_script(tmp_path, """
        warnings.simplefilter("error", torch_neuron.FallbackWarning)
        x = torch.ones(4, dtype=torch.float64).to("neuron")
        try:
            x.cumprod(0)
        except torch_neuron.FallbackWarning as e:
            first = str(e)
        y = x.cumsum(0)  # the one warning was issued (as an error): later fallbacks run
        report(first=first, y=y.cpu().tolist())
    """)
    assert "aten::cumprod" in result["first"]
    assert result["y"] == [1.0, 2.0, 3.0, 4.0]


def test_fallback_on_another_python_thread_points_at_that_threads_line(tmp_path):
    result, path = run_script(tmp_path, """
        import threading
        x = torch.ones(4, dtype=torch.float64).to("neuron")
        def work():
            x.cumprod(0)  # WORKER LINE
        t = threading.Thread(target=work)
        t.start(); t.join(timeout=60)
        report()
    """)
    (w,) = neuron_warnings(result)
    assert (w["filename"], w["lineno"]) == (path, line_of(path, "# WORKER LINE"))


def test_fallback_on_autograds_device_thread_points_at_the_backward_call(tmp_path):
    # With autograd's device worker threads, backward's ops run on a thread with no Python
    # frames; the user's line is the backward() call the main thread waits in.
    result, path = run_script(tmp_path, """
        torch_neuron.set_fallback_warnings(False)
        x = torch.ones(4, dtype=torch.float64).to("neuron").requires_grad_()
        loss = x.cumprod(0).sum()
        torch_neuron.set_fallback_warnings(True)
        loss.backward()  # BACKWARD CALL
        report(off_main=torch_neuron._C.ops_ran_off_main_thread())
    """, TORCH_NEURON_BACKWARD_ON_CALLER="0")
    assert result["off_main"], "backward did not run on a device worker thread"
    (w,) = neuron_warnings(result)
    assert (w["filename"], w["lineno"]) == (path, line_of(path, "# BACKWARD CALL"))


def test_invalid_mode_names_the_variable_and_the_values(monkeypatch):
    import torch_neuron
    from torch_neuron import env

    with pytest.raises(ValueError, match="'once', 'op', '0'"):
        torch_neuron.set_fallback_warnings("sometimes")
    monkeypatch.setenv("TORCH_NEURON_FALLBACK_WARN", "sometimes")
    with pytest.raises(ValueError, match="TORCH_NEURON_FALLBACK_WARN.*once, op, 0"):
        env.get_choice("TORCH_NEURON_FALLBACK_WARN")
    monkeypatch.setenv("TORCH_NEURON_FALLBACK_WARN", "1")  # the former boolean spelling
    assert env.get_choice("TORCH_NEURON_FALLBACK_WARN", {"1": "once"}) == "once"


def test_code_run_with_python_c_gets_the_warning_at_its_line():
    code = "import torch\nx = torch.ones(2, dtype=torch.float64).to('neuron')\nx.cumprod(0)\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_NEURON_")}
    env.pop("PYTHONWARNINGS", None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "FallbackWarning" in line]
    assert len(lines) == 1 and lines[0].startswith("<string>:3: FallbackWarning: neuron: aten::cumprod"), proc.stderr
