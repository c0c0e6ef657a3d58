"""How a minimal repro gets its target: the user's own code inlined, so the script can be pasted.

A minimal repro goes into a bug report, where the user's file is not: when the target's module is
one file that imports nothing of its own folder or project, its source is written into the script
and executed there as its module (``if __name__ == "__main__"`` blocks stay asleep), so the script
runs from any directory after the file is gone.  A module that imports its siblings cannot be
inlined exactly: the script names the file it needs and finds it by a path relative to the working
directory or to itself, never an absolute one.  Installed code (torch, the harness, site-packages,
the standard library) is imported by name.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import sys
import sysconfig
from pathlib import Path

#: Where installed code lives: a target from there is imported by name, never inlined.
_INSTALLED = tuple({os.path.realpath(p) for p in (sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
                                                   sysconfig.get_paths()["stdlib"])})
_HARNESS = os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


#: What the lines of an inlined target need imported, beside what every script imports.
INLINED_IMPORTS = ("linecache", "types")


def import_lines(target: str, script_dir: Path) -> tuple[tuple[str, ...], list[str]]:
    """The modules the script must import for them, and the script's lines that bind ``target`` to
    the callable ``target`` names."""
    module, _, attr = target.rpartition(":")
    path = module if module.endswith(".py") else _module_file(module)
    first, rest = attr.split(".")[0], attr.split(".")[1:]
    tail = [f"target = target.{'.'.join(rest)}"] if rest else []
    if path is None or _installed(path):
        return (), [f"from {module} import {first} as target", *tail]
    source = Path(path).read_text()
    locals_ = _own_imports(source, Path(path), module)
    if not locals_:
        return INLINED_IMPORTS, [*_inlined(source, path, module, first), *tail]
    return (), [*_by_relative_path(path, module, first, locals_, script_dir), *tail]


def _module_file(module: str) -> str | None:
    """The file a dotted module is read from (``None``: a builtin, a namespace package, not found)."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    origin = spec.origin if spec is not None else None
    return origin if origin and origin.endswith(".py") and os.path.isfile(origin) else None


def _installed(path: str) -> bool:
    real = os.path.realpath(path)
    return real.startswith(_INSTALLED) or real.startswith(_HARNESS + os.sep)


def _own_imports(source: str, path: Path, module: str) -> list[str]:
    """The modules ``source`` imports from its own folder or project (relative imports, siblings,
    its package's modules): what inlining would lose."""
    folder = path.resolve().parent
    package = module.split(".")[0] if not module.endswith(".py") else ""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level:
            found.append("." * node.level + (node.module or ""))
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module] if isinstance(
            node, ast.ImportFrom) and node.module and not node.level else []
        found += [name for name in names if name.split(".")[0] == package or _project_module(name.split(".")[0], folder)]
    return sorted(set(found))


def _project_module(top: str, folder: Path) -> bool:
    """Whether ``top`` is the user's own code: a sibling of the target's file, or a module found
    outside every installed location (the project on ``sys.path``)."""
    if (folder / top).is_dir() or (folder / f"{top}.py").is_file():
        return True
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return False
    origin = (spec.origin or next(iter(spec.submodule_search_locations or []), None)) if spec else None
    return bool(origin) and origin not in ("built-in", "frozen") and not _installed(str(origin))


def _inlined(source: str, path: str, module: str, attr: str) -> list[str]:
    """The source as a string, executed as its module; tracebacks show its lines under its old name."""
    name = _shown(path)
    module_name = Path(path).stem if module.endswith(".py") else module
    return [
        f"# the target's module, {name}, inlined: this script runs after the file is gone",
        f"TARGET_SOURCE = {_literal(source)}",
        f"linecache.cache[{name!r}] = (len(TARGET_SOURCE), None, TARGET_SOURCE.splitlines(True), {name!r})",
        f"target_module = sys.modules[{module_name!r}] = types.ModuleType({module_name!r})",
        f"exec(compile(TARGET_SOURCE, {name!r}, 'exec'), target_module.__dict__)",
        f"target = target_module.{attr}",
    ]


def _by_relative_path(path: str, module: str, attr: str, needs: list[str], script_dir: Path) -> list[str]:
    """Load the target from its file, found from the working directory or from the script's folder."""
    from_cwd = _shown(path)
    from_script = os.path.relpath(os.path.abspath(path), os.path.abspath(script_dir))
    lines = [f"# the target's module is not inlined: it imports its own {', '.join(needs)}; run this script from the",
             "# project's directory, or leave it where it was written"]
    if module.endswith(".py"):
        lines += [f"candidates = [{from_cwd!r}, os.path.join(os.path.dirname(os.path.abspath(__file__)), "
                  f"{from_script!r})]",
                  "found = next((p for p in candidates if os.path.isfile(p)), None)",
                  "if found is None:",
                  f"    sys.exit(f'this repro needs the target file {from_cwd} (looked in: {{candidates}})')",
                  "sys.path.insert(0, os.path.dirname(os.path.abspath(found)))  # as `python file.py`: siblings import",
                  "import runpy",
                  f"target = runpy.run_path(found)[{attr!r}]"]
        return lines
    depth = len(module.split(".")) - (0 if Path(path).name == "__init__.py" else 1)
    root = Path(path).resolve().parents[depth - 1] if depth else Path(path).resolve().parent
    root_from_script = os.path.relpath(root, os.path.abspath(script_dir))
    return lines + [f"sys.path[:0] = [os.getcwd(), os.path.join(os.path.dirname(os.path.abspath(__file__)), "
                    f"{root_from_script!r})]",
                    f"from {module} import {attr} as target"]


def _shown(path: str) -> str:
    relative = os.path.relpath(path)
    return relative if not relative.startswith("..") else os.path.basename(path)


def _literal(source: str) -> str:
    """``source`` as a Python literal that reads like the file: a raw triple-quoted string where
    one can hold it exactly, else its ``repr``."""
    if "'''" not in source and not source.endswith(("\\", "'")) and "\r" not in source:
        return "r'''" + source + "'''"
    return repr(source)
