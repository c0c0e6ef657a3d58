"""Load a ``gather(x, dim)`` target from ``package.module:attr`` or ``path/to/file.py:attr``.

Loading happens inside rank processes: the driver never imports user code.  Before that,
:func:`locate` answers what can be known without running any of it, in milliseconds: the
selector's syntax, whether the file or module exists, whether its source parses; and
:func:`static_signature` reads a plain function's signature off its source.
This module imports only the standard library.
"""

from __future__ import annotations

import ast
import difflib
import importlib
import importlib.machinery
import importlib.util
import inspect
import os
import sys
import traceback
from collections.abc import Callable
from types import ModuleType
from typing import Any

from harness.core.errors import TargetError
from harness.layers import engine_file

_CACHE: dict[str, Callable] = {}


def split_target(target: str) -> tuple[str, str]:
    module, sep, attr = target.rpartition(":")
    if not sep or not module or not attr:
        raise TargetError(f"target {target!r} is not of the form package.module:attr or path/to/file.py:attr")
    return module, attr


def locate(target: str) -> str:
    """``target`` checked as far as it can be without importing it (else :class:`TargetError`), a
    file path made absolute: warm ranks keep the working directory they started in."""
    module, attr = split_target(target)
    if module.endswith(".py"):
        if not os.path.isfile(module):
            raise TargetError(f"target file {module!r} does not exist" + _similar_file(module))
        _check_syntax(module, module)
        return f"{os.path.abspath(module)}:{attr}"
    origin = _find_module(module)
    if origin is None:
        raise TargetError(f"target module {module!r} cannot be found (is it on PYTHONPATH?)")
    if origin.endswith(".py"):
        _check_syntax(origin, module)
    return target


def source_file(target: str) -> str | None:
    """The absolute path of the file ``target``'s module is read from (``None``: not a source file),
    found without importing anything: ``pkg.mod:f`` and ``pkg/mod.py:f`` are one target."""
    module, _ = split_target(target)
    if module.endswith(".py"):
        return os.path.abspath(module)
    origin = _find_module(module)
    return os.path.abspath(origin) if origin and os.path.isfile(origin) else None


def static_signature(target: str) -> inspect.Signature | None:
    """``target``'s signature read from its source without running it, where that read is exact:
    a function defined once at its module's top level, undecorated or decorated only by what keeps
    its signature (:data:`SIGNATURE_KEEPING`, their module imported by its own name), its name
    bound by nothing else there.  ``None`` otherwise (a class, another decorator, a reassigned
    function, a star import): the ranks read it by importing.  This lets a signature no calling convention fits be refused
    before any rank starts."""
    _, attr = split_target(target)
    path = source_file(target)
    if path is None or "." in attr:
        return None
    try:
        with open(path, "rb") as handle:
            tree = ast.parse(handle.read(), path)
    except (OSError, SyntaxError, ValueError):
        return None
    if any(_rebinds_dynamically(node, attr) for node in ast.walk(tree)):
        return None
    bound = [_top_level_names(node) for node in tree.body]
    binders = [node for node, names in zip(tree.body, bound) if attr in names]
    if any("*" in names for names in bound) or len(binders) != 1:
        return None
    [definition] = binders
    if not isinstance(definition, ast.FunctionDef):
        return None
    if not all(_keeps_signature(decorator, tree.body, bound) for decorator in definition.decorator_list):
        return None
    return _signature(definition.args, definition.returns)


#: Decorators whose result ``inspect.signature`` reads as the function's own (each wraps it with
#: ``functools.wraps``, which ``inspect`` follows): written by their dotted name, called or not.
SIGNATURE_KEEPING: frozenset[str] = frozenset({
    "torch.no_grad", "torch.enable_grad", "torch.inference_mode", "torch.compile", "torch.compiler.disable",
    "torch._dynamo.disable", "functools.cache", "functools.lru_cache"})


def _keeps_signature(decorator: ast.expr, body: list[ast.stmt], bound: list[set[str]]) -> bool:
    """Whether ``decorator`` is one of :data:`SIGNATURE_KEEPING`, its first name bound at the top
    level by one statement alone, a plain ``import`` of that module (``import torch``)."""
    name = _dotted(decorator.func if isinstance(decorator, ast.Call) else decorator)
    if name not in SIGNATURE_KEEPING:
        return False
    root = name.partition(".")[0]
    binders = [statement for statement, names in zip(body, bound) if root in names]
    return (len(binders) == 1 and isinstance(binders[0], ast.Import)
            and any(alias.asname is None and alias.name.partition(".")[0] == root for alias in binders[0].names)
            and all(alias.asname != root for alias in binders[0].names))


def _dotted(node: ast.expr) -> str:
    """``torch.no_grad`` for the expression ``torch.no_grad``; ``""`` for anything but names and attributes."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _rebinds_dynamically(node: ast.AST, attr: str) -> bool:
    """``global attr`` in a function, or a module's names reached by ``globals()``, ``vars()`` or
    ``setattr``: a binding the top-level statements do not show."""
    if isinstance(node, ast.Global):
        return attr in node.names
    return isinstance(node, ast.Name) and node.id in ("globals", "vars", "setattr")


def _top_level_names(statement: ast.stmt) -> set[str]:
    """The module-level names ``statement`` may bind (``"*"`` for a star import): a definition's own
    name, and every name stored or imported anywhere in any other statement."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {statement.name}
    names = set()
    for node in ast.walk(statement):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(alias.asname or alias.name.partition(".")[0] for alias in node.names)
    return names


class _Written:
    """A default that is not a literal, shown as written."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _default(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _Written(ast.unparse(node))


def _parameter(arg: ast.arg, kind: Any, default: Any = inspect.Parameter.empty) -> inspect.Parameter:
    annotation = inspect.Parameter.empty if arg.annotation is None else ast.unparse(arg.annotation)
    return inspect.Parameter(arg.arg, kind, default=default, annotation=annotation)


def _signature(args: ast.arguments, returns: ast.expr | None) -> inspect.Signature:
    """The signature ``inspect.signature`` gives a function of these ``args`` (annotations as text,
    as under ``from __future__ import annotations``)."""
    kind = inspect.Parameter
    positional = [*args.posonlyargs, *args.args]
    defaults = [kind.empty] * (len(positional) - len(args.defaults)) + [_default(node) for node in args.defaults]
    parameters = [_parameter(arg, kind.POSITIONAL_ONLY if index < len(args.posonlyargs) else kind.POSITIONAL_OR_KEYWORD,
                             default) for index, (arg, default) in enumerate(zip(positional, defaults))]
    if args.vararg:
        parameters.append(_parameter(args.vararg, kind.VAR_POSITIONAL))
    parameters += [_parameter(arg, kind.KEYWORD_ONLY, kind.empty if node is None else _default(node))
                   for arg, node in zip(args.kwonlyargs, args.kw_defaults)]
    if args.kwarg:
        parameters.append(_parameter(args.kwarg, kind.VAR_KEYWORD))
    return inspect.Signature(parameters, return_annotation=kind.empty if returns is None else ast.unparse(returns))


def _similar_file(path: str) -> str:
    """``"; did you mean 'examples/buggy.py'?"`` for a file of a close name in the same folder."""
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        return ""
    names = [name for name in os.listdir(folder) if name.endswith(".py")]
    close = difflib.get_close_matches(os.path.basename(path), names, n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(repr(os.path.join(os.path.dirname(path), n)) for n in close)}?" if close else ""


def _find_module(name: str) -> str | None:
    """Where ``import name`` would load ``name`` from (its ``origin``), or ``None`` if nowhere;
    unlike ``importlib.util.find_spec``, no parent ``__init__.py`` runs."""
    search = [*sys.path, os.getcwd()]
    parts = name.split(".")
    spec = None
    for depth in range(1, len(parts) + 1):
        prefix = ".".join(parts[:depth])
        loaded = sys.modules.get(prefix)
        if loaded is not None and getattr(loaded, "__spec__", None) is not None:
            spec = loaded.__spec__
        else:
            try:
                spec = (importlib.util.find_spec(prefix) if depth == 1 and prefix in sys.builtin_module_names
                        else importlib.machinery.PathFinder.find_spec(prefix, search))
            except KeyError:  # a namespace package inside one not imported: Python asks sys.modules
                spec = None
                search = [os.path.join(folder, parts[depth - 1]) for folder in search
                          if os.path.isdir(os.path.join(folder, parts[depth - 1]))]
                if search and depth < len(parts):
                    continue
            except (ImportError, ValueError):
                spec = None
        if spec is None:
            return None
        if depth < len(parts):
            search = _search_locations(spec, search, parts[depth - 1])
            if not search:
                return None
    return None if spec is None else (spec.origin or "namespace package")


def _search_locations(spec: Any, search: list[str], part: str) -> list[str]:
    """Where a package's submodules are: its spec's locations, or, for a namespace package inside
    another one that is not imported (whose locations Python computes from ``sys.modules``), the
    folders named ``part`` on the search path it was found on."""
    try:
        return list(spec.submodule_search_locations or [])
    except KeyError:
        return [os.path.join(folder, part) for folder in search if os.path.isdir(os.path.join(folder, part))]


def _check_syntax(path: str, what: str) -> None:
    """Parse (never run) the target's source: a syntax error is told at once, at its own line."""
    try:
        with open(path, "rb") as handle:
            compile(handle.read(), path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise TargetError(f"importing {what!r} raised {syntax_text(exc)}") from None
    except (OSError, ValueError):
        return  # unreadable here, or null bytes: the rank's import will say what is wrong


def syntax_text(exc: SyntaxError) -> str:
    """``SyntaxError: invalid syntax (broken.py:2: return x +)``: the user's file and line, not importlib's."""
    where = f"{shown_path(exc.filename) if exc.filename else '?'}:{exc.lineno}"
    code = (exc.text or "").strip()
    return f"{type(exc).__name__}: {exc.msg} ({where}{': ' + code if code else ''})"


def shown_target(target: str) -> str:
    """``target`` as a person types it: a file under the working directory by its relative path."""
    module, _, attr = target.rpartition(":")
    return f"{shown_path(module)}:{attr}" if module.endswith(".py") else target


def shown_path(path: str) -> str:
    """``path`` relative to the working directory when it lies under it, else as it is."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def load(target: str, *, fresh: bool = False) -> Callable:
    """Import the target's module (once per process) and return the callable it names; ``fresh``:
    execute the module again first, so state it keeps between calls starts over."""
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
            raise TargetError(f"target {target!r}: module {module_name!r} has no attribute {attr!r}"
                              + _did_you_mean(part, obj))
        obj = getattr(obj, part)
    if not callable(obj):
        raise TargetError(f"target {target!r}: {attr!r} is of type {type(obj).__name__}, not a callable gather")
    _CACHE[target] = obj
    return obj


def _did_you_mean(name: str, holder: Any) -> str:
    """``"; did you mean 'gather'?"`` when ``holder`` has callables of a close name, else ``""``."""
    names = [key for key in dir(holder) if not key.startswith("__") and callable(getattr(holder, key, None))]
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(repr(match) for match in close)}?" if close else ""


def _import_file(path: str) -> ModuleType:
    """Import a target file with its folder first on ``sys.path``, as ``python path/to/file.py``
    would run it: a sibling module it imports is found."""
    absolute = os.path.abspath(path)
    if not os.path.isfile(absolute):
        raise TargetError(f"target file {path!r} does not exist")
    folder = os.path.dirname(absolute)
    if folder not in sys.path:
        sys.path.insert(0, folder)
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
    if fresh and name in sys.modules and name.partition(".")[0] != "torch":  # torch's own register operators
        # once per process (a second _functional_collectives raises on its TORCH_LIBRARY) and keep no target state
        return _execute(lambda: importlib.reload(sys.modules[name]), name)
    return _execute(lambda: importlib.import_module(name), name)


def _execute(step: Callable[[], Any], what: str) -> Any:
    try:
        return step()
    except SyntaxError as exc:
        raise TargetError(f"importing {what!r} raised {syntax_text(exc)}") from None
    except Exception as exc:
        raise TargetError(f"importing {what!r} raised {type(exc).__name__}: {exc} ({_user_frame(exc)})") from None


def _user_frame(exc: BaseException) -> str:
    """``file:line`` of the innermost frame in the user's code: importlib's own frames
    (``<frozen importlib._bootstrap>``) and the harness's say nothing to them."""
    frames = traceback.extract_tb(exc.__traceback__)
    own = [frame for frame in frames if not frame.filename.startswith("<") and not engine_file(frame.filename)]
    frame = (own or frames)[-1]
    return f"{frame.filename}:{frame.lineno}"

