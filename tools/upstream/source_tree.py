"""Upstream PyTorch test files against ``neuron``.

The wheel ships no test/*.py, so the files come from a PyTorch source tree: PYTORCH_SRC, or
Debian's ``pytorch`` source package fetched into third_party/ (git-ignored). That tree may be
of another torch version than the installed wheel, so each file runs on cpu first; neuron
results are reported only for the tests that pass on cpu, and files that do not import are
reported as such.
"""

from __future__ import annotations

import glob
import pathlib
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

REPO = pathlib.Path(__file__).resolve().parents[2]
FETCH_DIR = REPO / "third_party" / "pytorch-debian"
# Debian trixie's source package; the newer sid one is listed but not served (facts sheet 5.5).
DEBIAN_SUITE = "trixie"
DEBIAN_VERSION = "2.6.0+dfsg-7"


def locate(pytorch_src=None, fetch=False):
    if pytorch_src:
        tree = pathlib.Path(pytorch_src).expanduser().resolve()
        if not (tree / "test").is_dir():
            raise SystemExit(f"PYTORCH_SRC={tree} has no test/ directory")
        return tree
    existing = sorted(FETCH_DIR.glob("pytorch-*/test"))
    if existing:
        return existing[-1].parent
    if fetch:
        return fetch_debian()
    return None


def fetch_debian():
    """apt-get source with a private apt configuration (the system's sources stay untouched)."""
    apt = FETCH_DIR / "apt"
    (apt / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (apt / "sources.list").write_text(f"deb-src http://deb.debian.org/debian {DEBIAN_SUITE} main\n")
    opts = ["-o", f"Dir::Etc::SourceList={apt / 'sources.list'}", "-o", "Dir::Etc::SourceParts=-",
            "-o", f"Dir::State::Lists={apt / 'lists'}", "-o", "APT::Get::List-Cleanup=0"]
    subprocess.run(["apt-get", *opts, "update"], check=True, capture_output=True)
    subprocess.run(["apt-get", *opts, "source", "--download-only", f"pytorch={DEBIAN_VERSION}"],
                   check=True, cwd=FETCH_DIR, capture_output=True)
    tarball = sorted(FETCH_DIR.glob("pytorch_*.orig.tar.*"))[-1]
    subprocess.run(["tar", "-xf", str(tarball), "--wildcards", "*/test/*"], check=True, cwd=FETCH_DIR)
    return sorted(p.parent for p in FETCH_DIR.glob("*/test"))[-1]


def _import_error(tree, module, python, env):
    code = (f"import sys; sys.path.insert(0, {str(tree / 'test')!r}); import torch; "
            f"import importlib; importlib.import_module({module!r})")
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env, cwd=tree / "test",
                          timeout=600)
    if proc.returncode == 0:
        return None
    lines = proc.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit status {proc.returncode}"


_DEVICE_PART = re.compile(r"_(cpu|neuron|privateuse1)(?=_|$)")
_CLASS_PART = re.compile(r"(CPU|PRIVATEUSE1|NEURON)$")


def _normalise(classname, name):
    """A device-independent test id: TestFooCPU.test_x_cpu_float32 -> TestFoo.test_x_DEV_float32."""
    cls = _CLASS_PART.sub("", classname.split(".")[-1])
    return f"{cls}.{_DEVICE_PART.sub('_DEV', name, count=1)}"


def _junit_outcomes(path):
    outcomes = {}
    if not path.exists():
        return outcomes
    for case in ET.parse(path).getroot().iter("testcase"):
        key = _normalise(case.get("classname", ""), case.get("name", ""))
        if case.find("failure") is not None or case.find("error") is not None:
            outcomes[key] = "failed"
        elif case.find("skipped") is not None:
            outcomes[key] = "skipped"
        else:
            outcomes[key] = "passed"
    return outcomes


def _run_pytest(tree, fname, device, python, env, out, timeout):
    xml = out / f"{pathlib.Path(fname).stem}.{device}.xml"
    xml.unlink(missing_ok=True)
    run_env = dict(env, PYTORCH_TESTING_DEVICE_ONLY_FOR=device)
    # Upstream's test/conftest.py targets an older pytest (its hooks fail validation on pytest 9);
    # the files themselves need none of it.
    cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--noconftest", "-n", "2",
           "--timeout", str(timeout), f"--junitxml={xml}", "--rootdir", str(tree / "test"), fname]
    with open(out / f"{pathlib.Path(fname).stem}.{device}.log", "w") as fh:
        subprocess.run(cmd, cwd=tree / "test", env=run_env, stdout=fh, stderr=subprocess.STDOUT)
    return _junit_outcomes(xml)


def run_files(tree, files, python, out, env, timeout):
    out.mkdir(parents=True, exist_ok=True)
    report = {"tree": str(tree), "files": {}, "regressions": []}
    for fname in files:
        module = pathlib.Path(fname).stem
        entry = {}
        err = _import_error(tree, module, python, env)
        if err:
            entry["import_error"] = err
            report["files"][fname] = entry
            continue
        cpu = _run_pytest(tree, fname, "cpu", python, env, out, timeout)
        neuron = _run_pytest(tree, fname, "neuron", python, env, out, timeout)
        passing_on_cpu = [k for k, v in cpu.items() if v == "passed"]
        entry.update(
            cpu_total=len(cpu),
            cpu_passed=len(passing_on_cpu),
            neuron_total=len(neuron),
            neuron_passed=sum(1 for k in passing_on_cpu if neuron.get(k) == "passed"),
            neuron_failed=sum(1 for k in passing_on_cpu if neuron.get(k) == "failed"),
            neuron_skipped=sum(1 for k in passing_on_cpu if neuron.get(k) == "skipped"),
            neuron_missing=sum(1 for k in passing_on_cpu if k not in neuron),
        )
        if not cpu:
            entry["run_error"] = f"no test ran on cpu; see {out / (module + '.cpu.log')}"
        failing = sorted(k for k in passing_on_cpu if neuron.get(k) == "failed")
        entry["neuron_failures"] = failing
        report["regressions"] += [f"{fname}::{k}" for k in failing]
        report["files"][fname] = entry
    return report


if __name__ == "__main__":
    print(locate(sys.argv[1] if len(sys.argv) > 1 else None, fetch=True))
