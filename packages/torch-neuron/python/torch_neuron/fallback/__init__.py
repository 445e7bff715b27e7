"""The host-fallback policy: what a user is told when an op runs on the host.

Three modes (``TORCH_NEURON_FALLBACK_WARN``, or :func:`set_fallback_warnings`):

- ``once`` (default): the first host fallback of the process emits one
  :class:`FallbackWarning` at the user's line, naming the op and saying where the rest
  are listed; later fallbacks are only counted (``torch_neuron.get_fallback_ops()``).
- ``op``: one warning per op, when that op first runs on the host.
- ``0``: no warnings.

Ops run by torch's tensor printing never warn (they are still counted): a user who
prints a tensor has not asked for the ops the printer uses. Strict mode
(``TORCH_NEURON_STRICT=1``, ``torch_neuron.set_strict``) makes every fallback an error,
whatever the warning mode.

The decision to warn is made in C++ (one relaxed load per fallback once the warning
has been shown); only the first candidate fallbacks call :func:`warning.report`, which
finds the user's frame and issues the warning there.
"""
from __future__ import annotations

from .. import _C
from .. import env as _env
from .warning import FallbackWarning, report

__all__ = ["FallbackWarning", "set_fallback_warnings", "fallback_warnings"]

ENV = "TORCH_NEURON_FALLBACK_WARN"
# C++ codes (aten/Accounting.h, FallbackWarn).
_MODES = {"0": 0, "once": 1, "op": 2}
_NAMES = {code: name for name, code in _MODES.items()}
# Boolean spellings keep working: a true value is the default policy.
_ALIASES = {"1": "once", "true": "once", "yes": "once", "on": "once",
            "false": "0", "no": "0", "off": "0", "": "0"}


def _parse(value) -> str:
    if value is True:
        return "once"
    if value is False or value is None:
        return "0"
    raw = str(value).strip().lower()
    raw = _ALIASES.get(raw, raw)
    if raw not in _MODES:
        raise ValueError(f"fallback warning mode {value!r} is not one of 'once', 'op', '0' "
                         f"(or a boolean); see {ENV} in torch_neuron.env")
    return raw


def set_fallback_warnings(mode=True) -> None:
    """``"once"`` (or True): one warning for the process's first host fallback;
    ``"op"``: one per op as each first runs on the host; ``"0"`` (or False): none."""
    _C.set_fallback_warn_mode(_MODES[_parse(mode)])


def fallback_warnings() -> str:
    """The current mode: ``"once"``, ``"op"`` or ``"0"``."""
    return _NAMES[_C.fallback_warn_mode()]


def install() -> None:
    _C.set_fallback_reporter(report)
    set_fallback_warnings(_env.get_choice("TORCH_NEURON_FALLBACK_WARN", _ALIASES))
