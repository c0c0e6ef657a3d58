"""The house rules: one import name, no import cycles, types checked, nothing left behind.

- Installing the project claims only the name ``harness`` (``strategies/`` and ``reference/``
  install as ``harness.strategies`` and ``harness.reference``), so a user's own
  ``strategies.py`` or ``reference.py`` can neither shadow ours nor be shadowed.
- No module of the package imports, directly or through others, a module that imports it
  back, and no module imports one of a higher layer (:data:`harness.layers.LAYERS`, a folder
  each): the rank side never imports a controller module, the pool never a front end.  No
  ``"harness.module:attr"`` string (a helper call, a target) names a module above the rank
  side.  The modules a repro script embeds (the core layer and the reference) import only each
  other, the standard library and torch.  Each check is shown to catch a planted violation.
- mypy (pinned) passes over the package, ruff (pinned) over the repository.  These and the wheel
  build check the development environment (``constraints.txt``'s torch, the ``test`` extras),
  not the torch under test: marked ``dev_env``, the torch-range legs leave them out.
- A scratch project's ``git status`` is clean after ``check``, ``fuzz`` and ``report``: all
  generated files live in the one hidden directory, which ignores itself.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from harness import layers
from tests.budgets import COMMAND_TIMEOUT_S

ROOT = Path(__file__).resolve().parent.parent
#: Repository folder -> the package name it installs as.
PACKAGES = {"harness": "harness", "strategies": "harness.strategies", "reference": "harness.reference"}
#: What a module embedded in a repro script may import besides the other embedded modules.
EMBEDDED_MAY_IMPORT = frozenset({"__future__", "torch"} | set(sys.stdlib_module_names))
#: A helper call or a target named by a string: ``"harness.module:attr"``.
ADDRESS = re.compile(r"^(harness(?:\.\w+)+):[\w.]+$")
CORRECT_GATHER = "from harness.ragged import all_gather_ragged as gather\n"


def run(*args: str, cwd: Path, timeout: float = COMMAND_TIMEOUT_S, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **env}
    for name in ("PYTEST_XDIST_WORKER", "PYTHONDONTWRITEBYTECODE"):  # a user's shell has neither
        environment.pop(name, None)
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=environment)


# -- the import graph -----------------------------------------------------------------------------


def module_files() -> dict[str, Path]:
    """Every module of the package by its installed name, e.g. ``harness.strategies._internal``."""
    found: dict[str, Path] = {}
    for folder, package in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            name = ".".join((package, *parts[:-1]) + (() if parts[-1] == "__init__" else (parts[-1],)))
            found[name] = path
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its body, lazily ones included
    (not those only a type checker reads, under ``if TYPE_CHECKING:``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    edges: set[str] = set()
    tree = ast.parse(path.read_text())
    typing_only = {id(inner) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING"
                   for statement in node.body for inner in ast.walk(statement)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            edges |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}".rstrip(".")
            submodules = {f"{base}.{alias.name}" for alias in node.names} & known
            edges |= submodules
            if len(submodules) < len(node.names):  # names defined in ``base`` itself
                edges.add(base)
    return {edge for edge in edges if edge in known and edge != name}


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports: a copy a test may plant edges in."""
    return {name: set(edges) for name, edges in _read_import_graph().items()}


@functools.cache
def _read_import_graph() -> dict[str, frozenset[str]]:
    """Read once (0.9 s: every module parsed), as the files do not change during a run."""
    files = module_files()
    return {name: frozenset(imports_of(name, path, set(files))) for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph[node])
    return seen


def test_no_import_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 20, sorted(graph)
    assert cycles(graph) == []


def test_the_cycle_check_finds_a_planted_cycle() -> None:
    graph = import_graph()
    graph["harness.core.case"] = graph["harness.core.case"] | {"harness.frontends.commands"}
    assert any("harness.core.case" in cycle and "harness.frontends.commands" in cycle for cycle in cycles(graph))


def upward_imports(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Each module that imports a module of a higher layer (:data:`harness.layers.LAYERS`), with those modules."""
    def height(module: str) -> int:
        return layers.rank(layers.layer_of(module).name)

    found = {module: {other for other in imported if height(other) > height(module)} for module, imported in graph.items()}
    return {module: upward for module, upward in found.items() if upward}


def test_every_module_is_in_a_layer() -> None:
    unplaced = []
    for module in import_graph():
        try:
            layers.layer_of(module)
        except KeyError:
            unplaced.append(module)
    assert unplaced == []


def test_no_import_goes_up() -> None:
    """The rank side never imports the controller's modules, the pool never a front end, and so on."""
    assert upward_imports(import_graph()) == {}


def test_the_layer_check_finds_planted_upward_imports() -> None:
    graph = import_graph()
    graph["harness.core.case"] = graph["harness.core.case"] | {"harness.pool.pool"}
    graph["harness.pool.faults"] = graph["harness.pool.faults"] | {"harness.frontends.arguments"}
    assert upward_imports(graph) == {"harness.core.case": {"harness.pool.pool"},
                                     "harness.pool.faults": {"harness.frontends.arguments"}}


def test_each_layer_is_a_folder_of_at_most_ten_modules() -> None:
    for layer in layers.LAYERS:
        modules = [name for name in import_graph() if name.startswith(layer.package + ".")]
        assert 1 <= len(modules) <= 10, (layer.name, modules)


def string_addresses(source: str) -> set[str]:
    """The modules named by ``"harness.module:attr"`` strings in ``source``: helper calls and targets."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and (match := ADDRESS.match(node.value)):
            found.add(match.group(1))
    return found


def test_strings_name_only_rank_side_modules() -> None:
    """Ranks import what a string names: a helper call or target must never name a controller module."""
    named = {path.relative_to(ROOT).as_posix(): {module for module in string_addresses(path.read_text())
                                                 if not layers.rank_side(module)}
             for path in module_files().values()}
    assert {path: modules for path, modules in named.items() if modules} == {}


def test_the_address_check_finds_a_planted_controller_address() -> None:
    assert string_addresses('pool.call(2, "harness.search.probe:plan_on_rank")') == {"harness.search.probe"}
    assert not layers.rank_side("harness.search.probe") and layers.rank_side("harness.ranks.rank_calls")


def embedded_violations(name: str, source: str, embedded: set[str]) -> list[str]:
    """The imports of embedded module ``name``'s ``source`` that a repro script does not carry:
    one of a module not embedded (relative: the script loads the embedded modules as a private
    package with the harness's folders), or of anything but the standard library and torch.
    Imports under ``if TYPE_CHECKING:`` never run and are left out."""
    tree = ast.parse(source)
    typing_only = {id(node) for block in ast.walk(tree)
                   if isinstance(block, ast.If) and ast.unparse(block.test).endswith("TYPE_CHECKING")
                   for statement in block.body for node in ast.walk(statement)}
    packages = {module.rpartition(".")[0] for module in embedded}
    wrong = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.level:
            package = name if name in packages else name.rpartition(".")[0]
            anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            base = f"{anchor}.{node.module}" if node.module else anchor
            dots = "." * node.level
            named = ({base: f"from {dots}{node.module}"} if node.module
                     else {f"{base}.{alias.name}": f"from {dots} import {alias.name}" for alias in node.names})
            wrong += [text for module, text in named.items() if module not in embedded]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            wrong += [f"import {module}" for module in modules if module.split(".")[0] not in EMBEDDED_MAY_IMPORT]
    return wrong


def test_repro_scripts_embed_every_module_their_modules_import() -> None:
    from harness.report import repro

    embedded = {module.__name__ for module in repro.EMBEDDED}
    assert embedded == {name for name in import_graph() if layers.embedded(name)}
    wrong = {module.__name__: embedded_violations(module.__name__, inspect.getsource(module), embedded)
             for module in repro.EMBEDDED}
    assert {name: imports for name, imports in wrong.items() if imports} == {}


def test_the_embedding_check_finds_planted_imports() -> None:
    source = ("from typing import TYPE_CHECKING\nimport torch\nfrom .case import Case\nfrom .pool import LocalPool\n"
              "from .. import reference\nfrom ..pool.faults import Outcome\n"
              "from harness.pool.pool import LocalPool\nimport numpy\nif TYPE_CHECKING:\n    from .faults import Outcome\n")
    embedded = {"harness.core.case", "harness.core.checks", "harness.reference"}
    assert embedded_violations("harness.core.checks", source, embedded) == [
        "from .pool", "from ..pool.faults", "import harness.pool.pool", "import numpy"]


# -- types and lint -------------------------------------------------------------------------------


@pytest.mark.dev_env
@pytest.mark.slow
def test_mypy_passes() -> None:
    done = run(sys.executable, str(ROOT / "tools" / "typecheck.py"), cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout


@pytest.mark.dev_env
def test_ruff_passes() -> None:
    done = run(sys.executable, "-m", "ruff", "check", "harness", "strategies", "reference", "tests", "benchmarks",
               "tools", "conftest.py", cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


# -- one name in other people's environments ------------------------------------------------------


@pytest.mark.dev_env
@pytest.mark.slow
def test_a_built_wheel_installs_only_the_harness_package_and_all_of_it(tmp_path: Path) -> None:
    """Every module, in every layer's folder (``pyproject.toml`` lists the packages), and nothing else."""
    source = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__")
    for entry in ("harness", "strategies", "reference", "pyproject.toml", "README.md"):
        if (ROOT / entry).is_dir():
            shutil.copytree(ROOT / entry, source / entry, ignore=ignore)
        else:
            shutil.copy(ROOT / entry, source / entry)
    done = run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
               str(tmp_path / "dist"), str(source), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    [wheel] = (tmp_path / "dist").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {"harness", wheel.name.split("-")[0] + "-0.1.0.dist-info"}
    installed = {name.replace(".", "/") + ("/__init__.py" if path.name == "__init__.py" else ".py")
                 for name, path in module_files().items()}
    assert installed | {"harness/py.typed"} <= set(names), sorted(installed - set(names))


@pytest.fixture
def crowded(tmp_path: Path) -> Path:
    """A user's project with its own ``strategies.py`` and ``reference.py`` (common names) and a gather."""
    (tmp_path / "strategies.py").write_text("MINE = 'strategies'\n")
    (tmp_path / "reference.py").write_text("MINE = 'reference'\n")
    (tmp_path / "ok.py").write_text(CORRECT_GATHER)
    (tmp_path / "test_mine.py").write_text(
        "import harness.frontends.api\nimport harness.strategies\nimport strategies, reference\n\n"
        "def test_my_modules_are_mine():\n"
        "    assert (strategies.MINE, reference.MINE) == ('strategies', 'reference')\n"
        "    assert harness.strategies.cases is not None\n"
    )
    return tmp_path


@pytest.mark.slow
def test_check_works_beside_a_users_strategies_and_reference(crowded: Path) -> None:
    done = run(sys.executable, "-m", "harness", "check", "ok.py:gather", "--max-examples", "5", "--world-sizes",
               "1-2", "--quiet", cwd=crowded)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS: no counterexample in 5 examples" in done.stdout


@pytest.mark.slow
def test_the_plugin_works_beside_a_users_strategies_and_reference(crowded: Path) -> None:
    done = run(sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--gather-impl", "ok.py:gather",
               "--gather-max-examples", "5", "--gather-world-sizes", "1-2", "-q", cwd=crowded)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


# -- nothing left behind --------------------------------------------------------------------------


@pytest.mark.slow
def test_a_scratch_project_stays_clean(tmp_path: Path) -> None:
    """``check`` (a pass and a failure), ``fuzz`` and ``report`` leave only the hidden directory."""
    (tmp_path / "ok.py").write_text(CORRECT_GATHER)
    (tmp_path / "bad.py").write_text(CORRECT_GATHER + "\n\ndef upcast(x, dim):\n    return gather(x, dim).double()\n")
    assert run("git", "init", "-q", cwd=tmp_path).returncode == 0
    commands = [
        (["check", "ok:gather", "--max-examples", "5", "--world-sizes", "1-2"], 0),
        (["check", "bad.py:upcast", "--max-examples", "20", "--world-sizes", "1-2", "--dtypes", "float32"], 1),
        (["fuzz", "ok.py:gather", "--duration", "2", "--world-sizes", "1-2"], 0),
        (["report", "--variants", "ours_local", "--max-examples", "5"], 0),
    ]
    for args, status in commands:
        done = run(sys.executable, "-m", "harness", *args, "--quiet", cwd=tmp_path)
        assert done.returncode == status, (args, done.stdout + done.stderr)
    status = run("git", "status", "--porcelain", "--ignored", cwd=tmp_path).stdout.splitlines()
    assert sorted(status) == ["!! .gather-harness/", "?? bad.py", "?? ok.py"]
    hidden = tmp_path / ".gather-harness"
    assert (hidden / "fuzz.json").is_file()
    [repro] = (hidden / "repros").glob("bad.upcast-*/dtype.py")
    assert repro.is_file()


# -- prose that is checked ------------------------------------------------------------------------

#: A module longer than this says, in its docstring, why it is still one concern ("One concern: ...").
LONG_MODULE_LINES = 450


def test_every_test_module_is_in_the_test_map() -> None:
    listed = (ROOT / "tests" / "README.md").read_text()
    assert [path.name for path in sorted((ROOT / "tests").glob("test_*.py")) if f"`{path.name}`" not in listed] == []


def long_modules_without_a_reason(files: dict[str, Path]) -> list[str]:
    """Modules over :data:`LONG_MODULE_LINES` lines whose docstring does not say why they are one concern."""
    return [name for name, path in sorted(files.items())
            if len(path.read_text().splitlines()) > LONG_MODULE_LINES
            and "One concern" not in (ast.get_docstring(ast.parse(path.read_text())) or "")]


def test_every_long_module_says_why_it_is_one_concern() -> None:
    assert long_modules_without_a_reason(module_files()) == []


def test_the_long_module_check_finds_a_planted_long_module(tmp_path: Path) -> None:
    long = tmp_path / "long.py"
    long.write_text('"""A module."""\n' + "x = 1\n" * LONG_MODULE_LINES)
    reasoned = tmp_path / "reasoned.py"
    reasoned.write_text('"""A module.\n\nOne concern: the xs."""\n' + "x = 1\n" * LONG_MODULE_LINES)
    assert long_modules_without_a_reason({"long": long, "reasoned": reasoned}) == ["long"]


def missing_modules(text: str) -> list[str]:
    """The package paths (``harness/pool/pool.py``) and dotted names (``harness.pool.pool``) ``text``
    names that are neither a module, a package nor a name one of them defines."""
    files = module_files()
    named = {path.relative_to(ROOT).as_posix() for path in files.values()}
    missing = [path for path in re.findall(r"\b(?:harness|strategies|reference)/[\w/]+\.py\b", text)
               if path not in named]
    for dotted in re.findall(r"\bharness(?:\.\w+)+", text):
        module = next((dotted[:len(name)] for name in sorted(files, key=len, reverse=True)
                       if dotted == name or dotted.startswith(name + ".")), None)
        if module is None or (module != dotted and dotted.split(".")[len(module.split("."))] not in
                              {*dir(importlib.import_module(module))}):
            missing.append(dotted)
    return missing


def test_the_developers_guide_names_only_modules_that_exist() -> None:
    assert missing_modules((ROOT / "docs" / "DEVELOPING.md").read_text()) == []


def test_the_module_name_check_finds_planted_names() -> None:
    text = "see `harness/pool/pool.py`, `harness/search.py`, `harness.pool.pool.LocalPool` and `harness.search.nothing`"
    assert missing_modules(text) == ["harness/search.py", "harness.search.nothing"]


#: A cross-reference in a docstring, ``:role:`target```, the target optionally led by ``~`` or ``.``.
REFERENCE = re.compile(r":(?:class|func|meth|data|mod|attr|exc|obj):`([^`]+)`")
_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def docstrings(source: str) -> list[tuple[str, str]]:
    """Each docstring and ``#:`` comment of ``source`` with the scope it documents: ``""`` (the module),
    ``"Case"``, ``"Case.describe"``."""
    found: list[tuple[str, str]] = []
    lines = source.splitlines()

    def visit(node: ast.AST, scope: list[str]) -> None:
        if isinstance(node, _DOCUMENTED) and (text := ast.get_docstring(node, clean=False)):
            found.append((".".join(scope), text))
        for statement in getattr(node, "body", []) if isinstance(node, (ast.Module, ast.ClassDef)) else []:
            above = statement.lineno - 2
            while above >= 0 and lines[above].lstrip().startswith("#:"):
                found.append((".".join(scope), lines[above]))
                above -= 1
        for child in ast.iter_child_nodes(node):
            inner = [*scope, child.name] if isinstance(child, _DOCUMENTED[1:]) else scope
            visit(child, inner)

    visit(ast.parse(source), [])
    return found


def imported_names(name: str, source: str) -> dict[str, str]:
    """What each name ``source`` imports (anywhere, ``TYPE_CHECKING`` blocks included) stands for, dotted."""
    package = name.rpartition(".")[0]
    names: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.asname or alias.name.split(".")[0]: alias.name if alias.asname else alias.name.split(".")[0]
                      for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}".rstrip(".")
            names |= {alias.asname or alias.name: f"{base}.{alias.name}" for alias in node.names}
    return names


_TERMINAL = object()  # a name that exists only on instances (a field, an attribute set in a method)
_MISSING = object()


def _member(owner: object, attr: str) -> object:
    if hasattr(owner, attr):
        return getattr(owner, attr)
    if isinstance(owner, type):
        for klass in owner.__mro__:
            if attr in inspect.get_annotations(klass) or attr in getattr(klass, "__slots__", ()):
                return _TERMINAL
            try:
                tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
            except (OSError, TypeError):
                continue
            if any(isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
                   and node.attr == attr for node in ast.walk(tree)):
                return _TERMINAL
    return _MISSING


def defined(dotted: str) -> bool:
    """Whether ``dotted`` names a module, or something a module defines (on a class: instance attributes too)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            owner: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            found = _member(owner, attr) if owner is not _TERMINAL else _MISSING
            if found is _MISSING:
                return False
            owner = found
        return True
    return False


def moved(dotted: str) -> str | None:
    """Where a class or function that ``dotted`` names through a module (not a package's public name) is
    defined, when that is another module: ``harness.core.contract.UsageError`` names an import, the class
    lives in ``harness.core.errors``."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        found = getattr(module, parts[cut], None)
        home = getattr(found, "__module__", None)
        if hasattr(module, "__path__") or not (inspect.isclass(found) or inspect.isfunction(found)):
            return None
        return home if home != module.__name__ else None
    return None


def unresolved(module: str, source: str) -> list[str]:
    """The references in ``module``'s docstrings that name nothing: tried as written (fully qualified, or
    torch, the standard library, Hypothesis), from the enclosing class or function outwards, through
    the module's imports, and from its package.  A name written out in full must be the definition's
    own (:func:`moved`)."""
    imports = imported_names(module, source)
    package = module.rpartition(".")[0]
    wrong = []
    for scope, text in docstrings(source):
        for target in REFERENCE.findall(text):
            name = target.lstrip("~.").removesuffix("()")
            head, _, rest = name.partition(".")
            outer = scope.split(".") if scope else []
            tries = [name, *(".".join([module, *outer[:depth], name]) for depth in range(len(outer), -1, -1)),
                     f"{package}.{name}", f"harness.{name}"]
            if head in imports:
                tries.append(imports[head] + (f".{rest}" if rest else ""))
            if name.startswith("harness.") and (home := moved(name)):
                wrong.append(f"{scope or '<module>'}: {target} (defined in {home})")
            elif not any(defined(dotted) for dotted in tries):
                wrong.append(f"{scope or '<module>'}: {target}")
    return wrong


def test_every_docstring_reference_names_a_definition() -> None:
    """A ``:class:``/``:func:``/``:meth:``/``:data:``/``:mod:``/``:attr:``/``:exc:`` reference in a docstring or a
    ``#:`` comment that no longer names anything (a class moved, a function renamed) misleads the reader."""
    wrong = {name: found for name, path in module_files().items() if (found := unresolved(name, path.read_text()))}
    assert wrong == {}


def test_the_reference_check_finds_planted_stale_references() -> None:
    source = ('"""Raises :class:`UsageError`; see :func:`~harness.frontends.api.verify_target` and :data:`EXIT`."""\n'
              'class Exit:\n    """One of :data:`Exit.USAGE`, not :class:`harness.core.contract.UsageError`; as :class:`torch.Tensor` and :func:`hypothesis.given`."""\n'
              '    #: Not :data:`USAGES`.\n    USAGE = 2\n\n    def name(self) -> str:\n        """Says :attr:`USAGE`, not :attr:`.usage`."""\n')
    assert unresolved("harness.core.errors", source) == ["<module>: ~harness.frontends.api.verify_target", "<module>: EXIT",
                                                    "Exit: harness.core.contract.UsageError (defined in harness.core.errors)",
                                                    "Exit: USAGES",
                                                    "Exit.name: .usage"]
