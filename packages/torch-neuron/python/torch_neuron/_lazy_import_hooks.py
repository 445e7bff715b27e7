"""Runs a callback right after a module is first imported (without importing it)."""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import Callable

_pending: dict[str, list[Callable[[object], None]]] = {}


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname not in _pending:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        original_exec = loader.exec_module

        def exec_module(module, _orig=original_exec, _name=fullname):
            _orig(module)
            for cb in _pending.pop(_name, []):
                cb(module)

        loader.exec_module = exec_module
        return spec


_finder = _Finder()


def when_imported(name: str, callback: Callable[[object], None]) -> None:
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return
    _pending.setdefault(name, []).append(callback)
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
