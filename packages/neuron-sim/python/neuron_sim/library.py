"""Where the native runtime lives, for other packages' native code.

One runtime instance exists per process: native code must link against (or
dlopen) the very file ``get_library_path()`` names, which is the file the
dynamic loader mapped for ``neuron_sim._C``.
"""

from __future__ import annotations

import os

from . import _C

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def get_include() -> str:
    """Directory holding ``neuron_sim/neuron_sim.h`` (add it with ``-I``)."""
    return os.path.join(_PACKAGE_DIR, "include")


def get_library_path() -> str:
    """Absolute path of the loaded ``libneuron_sim`` shared library."""
    return os.path.realpath(_C.library_path())


def get_library_dir() -> str:
    """Directory of the loaded ``libneuron_sim`` (add it with ``-L`` and as an rpath)."""
    return os.path.dirname(get_library_path())
