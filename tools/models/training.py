"""One architecture on CPU and on neuron from the same weights: forward with loss, backward, one
AdamW step, second forward; loss, every gradient and every updated parameter compared."""
from __future__ import annotations

import copy
import math
import time
import traceback

import torch

from . import case as case_mod
from . import reproduce
from . import tiny_config

# The tolerances of the end-to-end tests (tests/e2e, tests/ecosystem/test_t5_sdpa.py).
RTOL, ATOL = 1e-4, 1e-5
# bf16 autocast against the CPU fp32 run.
BF16_LOSS_RTOL, BF16_MIN_COSINE = 2e-2, 0.99
# AdamW's first step is lr * g / (|g| + eps), whose slope in g is at most lr / eps: with eps = lr a
# gradient within the gradient tolerance moves the parameter within the same tolerance (a smaller
# eps turns rounding noise on gradients that are zero up to rounding into whole lr steps).
LR, EPS = 1e-3, 1e-3
# A gradient below the fp32 comparison's atol everywhere is zero at that tolerance.
ZERO_GRAD = 1e-6

STATUSES = ("pass", "mismatch", "neuron_error", "cpu_fail", "no_tiny_config", "input_unsupported")
CPU_OK = ("pass", "mismatch", "neuron_error")


def first_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]


def _where(exc: BaseException) -> str:
    """The innermost frame inside transformers or torch_neuron, to tell whose code raised."""
    frames = traceback.extract_tb(exc.__traceback__)
    for f in reversed(frames):
        if "site-packages" in f.filename or "torch_neuron" in f.filename:
            tail = f.filename.split("site-packages/")[-1]
            return f"{tail}:{f.lineno}"
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else ""


def train_step(model, inputs, head, device, autocast=False):
    x = case_mod.to_device(inputs, device)
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
        loss = case_mod.loss_of(head, model(**x))
    loss.backward()
    grads = {n: (p.grad.detach().float().cpu().clone() if p.grad is not None else None)
             for n, p in model.named_parameters()}
    result = {"loss": float(loss.detach().float().cpu()), "grads": grads}
    if autocast:
        return result
    opt = torch.optim.AdamW(model.parameters(), lr=LR, eps=EPS, weight_decay=0.01)
    opt.step()
    opt.zero_grad(set_to_none=True)
    result["params"] = {n: p.detach().cpu().clone() for n, p in model.named_parameters()}
    # With autograd on, so the projection loss sees the same outputs as in the first forward.
    result["loss2"] = float(case_mod.loss_of(head, model(**x)).detach().float().cpu())
    return result


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= ATOL + RTOL * abs(b)


def compare(cpu: dict, dev: dict) -> list[str]:
    """Every disagreement between the two runs, worst first (empty when they match)."""
    problems = []
    for key in ("loss", "loss2"):
        if not _close(dev[key], cpu[key]) and not (math.isnan(dev[key]) and math.isnan(cpu[key])):
            problems.append((math.inf, f"{key}: neuron {dev[key]:.8g} vs cpu {cpu[key]:.8g}"))
    for what in ("grads", "params"):
        if cpu[what].keys() != dev[what].keys():
            only = sorted(set(cpu[what]) ^ set(dev[what]))[:3]
            problems.append((math.inf, f"{what}: parameter names differ ({', '.join(only)})"))
            continue
        for name, want in cpu[what].items():
            got = dev[what][name]
            if (want is None) != (got is None):
                problems.append((math.inf, f"{what[:-1]} {name}: {'missing' if got is None else 'unexpected'} on neuron"))
                continue
            if want is None:
                continue
            if got.shape != want.shape:
                problems.append((math.inf, f"{what[:-1]} {name}: shape {tuple(got.shape)} vs {tuple(want.shape)}"))
                continue
            diff = (got.double() - want.double()).abs()
            allowed = ATOL + RTOL * want.double().abs()
            bad = (diff > allowed) | (torch.isnan(got) != torch.isnan(want))
            if bad.any():
                ratio = float((diff / allowed).nan_to_num(nan=math.inf).max())
                problems.append((ratio, f"{what[:-1]} {name}: {int(bad.sum())}/{want.numel()} elements off, "
                                        f"max abs diff {float(diff.nan_to_num(nan=math.inf).max()):.3g}"))
    problems.sort(key=lambda p: -p[0])
    return [p[1] for p in problems]


def compare_bf16(cpu: dict, dev: dict) -> list[str]:
    problems = []
    rel = abs(dev["loss"] - cpu["loss"]) / max(abs(cpu["loss"]), 1e-6)
    if not rel <= BF16_LOSS_RTOL:
        problems.append(f"loss: bf16 neuron {dev['loss']:.6g} vs cpu fp32 {cpu['loss']:.6g} (rel {rel:.3g})")
    for name, want in cpu["grads"].items():
        got = dev["grads"].get(name)
        if want is None or got is None:
            if (want is None) != (got is None):
                problems.append(f"grad {name}: present on one side only")
            continue
        a, b = got.double().flatten(), want.double().flatten()
        na, nb = float(a.norm()), float(b.norm())
        if float(b.abs().max()) < ZERO_GRAD:
            continue  # zero up to rounding in fp32 (a key bias under softmax): no direction to compare
        cos = float(a @ b) / max(na * nb, 1e-30)
        if not cos >= BF16_MIN_COSINE:
            problems.append(f"grad {name}: cosine {cos:.4f}")
    return problems


def prepare(model_type: str, report):
    """The first (case, model, CPU result) that builds and trains on CPU, else a status record.

    Tries each tiny-config rung and, within it, each head in order of preference.
    """
    levels = {"input_unsupported": 1, "no_tiny_config": 2, "cpu_fail": 3}
    best = []  # (level, -rung, -index, status, message): the furthest any attempt got, earliest rung first
    failures = {}  # index -> (exception, head, class, layout) of a CPU-run failure

    def note(status, rung, message, failure=None):
        if failure is not None:
            failures[len(best)] = failure
        best.append((levels[status], -rung, -len(best), status, message))

    cands = case_mod.candidates(model_type)
    if not cands:
        return None, {"status": "no_tiny_config", "error": "no model class importable from transformers"}
    for rung in tiny_config.RUNGS:
        if best and max(best)[0] == 1:
            break  # a gentler config does not change which inputs a model takes
        try:
            cfg = tiny_config.tiny_config(model_type, rung)
        except Exception as e:  # noqa: BLE001 - recorded as the architecture's status
            note("no_tiny_config", rung, f"config: {first_line(e)}")
            continue
        for head, cls, layout in [(h, k, lay) for h, k in cands for lay in (0, 1)]:
            try:
                if layout and not case_mod.has_second_layout(cls):
                    continue
                inputs = case_mod.make_inputs(model_type, head, cls, cfg, torch.Generator().manual_seed(0), layout)
            except case_mod.CaseUnsupported as e:
                note("input_unsupported", rung, str(e))
                continue
            except ImportError as e:  # the class itself needs a library that is not installed
                note("cpu_fail", rung, f"{cls.__name__}: {first_line(e)}")
                continue
            except Exception as e:  # noqa: BLE001
                note("input_unsupported", rung, f"{cls.__name__}: {first_line(e)}")
                continue
            c = case_mod.Case(model_type, head, cls.__name__, cfg, rung, inputs)
            report("build")
            try:
                n = c.parameter_count()
                if n > tiny_config.MAX_PARAMS:
                    note("no_tiny_config", rung, f"{cls.__name__}: {n} parameters at rung {rung} "
                                                 f"(limit {tiny_config.MAX_PARAMS})")
                    continue
                model = c.build()
            except ImportError as e:
                # A third-party library the model needs (timm, natten, ...) is not installed: the
                # model cannot run on CPU here either.
                note("cpu_fail", rung, f"{cls.__name__}: {first_line(e)}")
                break
            except Exception as e:  # noqa: BLE001
                note("no_tiny_config", rung, f"{cls.__name__}: {first_line(e)} [{_where(e)}]", (e, head, cls, None))
                continue
            pristine = copy.deepcopy(model)
            report("cpu")
            t0 = time.perf_counter()
            try:
                cpu = train_step(model, inputs, head, torch.device("cpu"))
                if not math.isfinite(cpu["loss"]):
                    raise FloatingPointError(f"CPU loss is {cpu['loss']}")
            except case_mod.CaseUnsupported as e:
                note("input_unsupported", rung, f"{cls.__name__}: {e}")
                continue
            except Exception as e:  # noqa: BLE001
                note("cpu_fail", rung, f"{cls.__name__}: {first_line(e)} [{_where(e)}]", (e, head, cls, layout))
                continue
            cpu_s = time.perf_counter() - t0
            return (c, pristine, cpu, cpu_s, n), None
    if not best:
        return None, {"status": "no_tiny_config", "error": "no rung produced a model"}
    _, _, index, status, message = max(best)
    record = {"status": status, "error": message}
    if -index in failures:
        # The model's own failure only if the default config fails the same way (reproduce.py);
        # a layout of None marks a failure at construction, checked by building the default model.
        exc, head, cls, layout = failures[-index]
        report("default")
        built = layout is None
        if built:
            record["failed_at"] = "construction"
        other = reproduce.default_build(cls, model_type) if built else reproduce.default_step(model_type, head, cls, layout)
        if reproduce.same_failure(exc, other, _where):
            record["status"] = "cpu_fail"
            record["default_config"] = "same failure at construction" if built else "same failure"
        else:
            record["status"] = "no_tiny_config"
            ok = "builds on meta" if built else "trains on meta"
            record["default_config"] = ok if other is None else f"{first_line(other)} [{_where(other)}]"
    return None, record


def run_architecture(model_type: str, bf16: bool = False, report=lambda phase: None) -> dict:
    import torch_neuron

    dev = torch.device("neuron", 0)
    t_start = time.perf_counter()
    record = {"arch": model_type}
    prepared, failed = prepare(model_type, report)
    if failed:
        record.update(failed)
        record["wall_s"] = round(time.perf_counter() - t_start, 2)
        return record
    c, pristine, cpu, cpu_s, n_params = prepared
    record.update(head=c.head, model_class=c.cls_name, rung=c.rung, params=n_params,
                  config=tiny_config.describe(c.config), cpu_s=round(cpu_s, 2))
    report("neuron")
    torch_neuron.clear_op_tracking()
    t0 = time.perf_counter()
    model = None
    try:
        model = copy.deepcopy(pristine).to(dev)
        got = train_step(model, c.inputs, c.head, dev)
        torch.neuron.synchronize()
        problems = compare(cpu, got)
        record["status"] = "mismatch" if problems else "pass"
        if problems:
            record["error"] = problems[0]
            record["mismatches"] = problems[:10]
    except Exception as e:  # noqa: BLE001
        record["status"] = "neuron_error"
        record["error"] = f"{first_line(e)} [{_where(e)}]"
    record["neuron_s"] = round(time.perf_counter() - t0, 2)
    executed = torch_neuron.get_executed_ops()
    record["ops_native"] = sum(v["native"] for v in executed.values())
    record["ops_fallback"] = sum(v["fallback"] for v in executed.values())
    record["fallback_ops"] = {op: v["fallback"] for op, v in sorted(executed.items()) if v["fallback"]}
    record["native_ops"] = {op: v["native"] for op, v in sorted(executed.items()) if v["native"]}
    dtypes: dict = {}
    for row in torch_neuron.get_op_stats():
        if row["fallback"]:
            dtypes.setdefault(row["op"], set()).add(str(row["dtype"]))
    record["fallback_dtypes"] = {op: sorted(d) for op, d in sorted(dtypes.items())}
    del model
    if bf16:
        report("bf16")
        try:
            model = copy.deepcopy(pristine).to(dev)
            got = train_step(model, c.inputs, c.head, dev, autocast=True)
            problems = compare_bf16(cpu, got)
            record["bf16"] = {"status": "mismatch" if problems else "pass", "loss": got["loss"],
                              "cpu_loss": cpu["loss"], **({"error": problems[0]} if problems else {})}
            if problems:
                # CPU's own bf16 autocast run against its fp32 run: tells an ill-conditioned case
                # (both devices off) from a neuron-only one.
                ref = train_step(copy.deepcopy(pristine), c.inputs, c.head, torch.device("cpu"), autocast=True)
                own = compare_bf16(cpu, ref)
                record["bf16"]["cpu_bf16_loss"] = ref["loss"]
                record["bf16"]["cpu_bf16"] = own[0] if own else "within tolerance"
        except Exception as e:  # noqa: BLE001
            record["bf16"] = {"status": "neuron_error", "error": f"{first_line(e)} [{_where(e)}]"}
    record["wall_s"] = round(time.perf_counter() - t_start, 2)
    return record
