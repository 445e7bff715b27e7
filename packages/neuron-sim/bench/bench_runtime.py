#!/usr/bin/env python3
"""Builds bench_runtime (in packages/neuron-sim/build/bench) when needed and runs it.

Prints the runtime's hot-path figures, each against a baseline measured in the same run:
launch-record cost, device malloc/free vs libc, device-to-device copy vs memcpy.

    python packages/neuron-sim/bench/bench_runtime.py [--quick]
"""
import os
import shutil
import subprocess
import sys

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(PACKAGE, "build", "bench")


def build() -> str:
    if not os.path.exists(os.path.join(BUILD, "CMakeCache.txt")):
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        subprocess.run(
            ["cmake", "-S", PACKAGE, "-B", BUILD, *generator, "-DCMAKE_BUILD_TYPE=Release",
             "-DNSIM_BUILD_PYTHON=OFF", "-DNSIM_BUILD_BENCH=ON"],
            check=True, stdout=subprocess.DEVNULL)
    # Always ask the build tool: it rebuilds only what changed.
    subprocess.run(["cmake", "--build", BUILD, "--target", "bench_runtime"], check=True,
                   stdout=subprocess.DEVNULL)
    return os.path.join(BUILD, "bench_runtime")


def main() -> int:
    binary = build()
    return subprocess.run([binary, *sys.argv[1:]]).returncode


if __name__ == "__main__":
    sys.exit(main())
