"""Load a ``gather(x, dim)`` target from ``package.module:attr`` or ``path/to/file.py:attr``.

One selector syntax for the CLI, the pytest plugin, the Python API and the environment.
Loading happens inside rank processes (the driver never imports user code); the driver
validates a target by asking a rank to load it and plan its call (``harness.probe``).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Callable
from types import ModuleType
from typing import Any

_CACHE: dict[str, Callable] = {}


class TargetError(Exception):
    """The target could not be loaded; the message is one line a user can act on."""


def split_target(target: str) -> tuple[str, str]:
    module, sep, attr = target.rpartition(":")
    if not sep or not module or not attr:
        raise TargetError(f"target {target!r} is not of the form package.module:attr or path/to/file.py:attr")
    return module, attr


def load(target: str, *, fresh: bool = False) -> Callable:
    """Import the target's module (once per process) and return the callable it names.

    ``fresh``: execute the module again first, so state it keeps between calls (caches,
    counters) starts over; state kept in other modules is not reset.
    """
    if target in _CACHE and not fresh:
        return _CACHE[target]
    module_name, attr = split_target(target)
    sys.dont_write_bytecode = True  # a rank importing a user's target leaves no __pycache__ in their project
    if module_name.endswith(".py"):
        module = _import_file(module_name)
    else:
        module = _import_module(module_name, fresh=fresh)
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise TargetError(f"target {target!r}: module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise TargetError(f"target {target!r}: {attr!r} is of type {type(obj).__name__}, not a callable gather")
    _CACHE[target] = obj
    return obj


def _import_file(path: str) -> ModuleType:
    absolute = os.path.abspath(path)
    if not os.path.isfile(absolute):
        raise TargetError(f"target file {path!r} does not exist")
    name = "gather_target_" + str(abs(hash(absolute)))
    spec = importlib.util.spec_from_file_location(name, absolute)
    if spec is None or spec.loader is None:
        raise TargetError(f"target file {path!r} is not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader = spec.loader
    _execute(lambda: loader.exec_module(module), path)
    return module


def _import_module(name: str, *, fresh: bool = False) -> ModuleType:
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        found = None
    if found is None:
        raise TargetError(f"target module {name!r} cannot be found (is it on PYTHONPATH?)")
    if fresh and name in sys.modules:
        return _execute(lambda: importlib.reload(sys.modules[name]), name)
    return _execute(lambda: importlib.import_module(name), name)


def _execute(step: Callable[[], Any], what: str) -> Any:
    try:
        return step()
    except Exception as exc:
        last = traceback.extract_tb(exc.__traceback__)[-1]
        raise TargetError(
            f"importing {what!r} raised {type(exc).__name__}: {exc} ({last.filename}:{last.lineno})"
        ) from None
