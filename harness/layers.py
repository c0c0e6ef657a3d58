"""The map of the house: the package's layers, lowest first, and which module is in which.

A module may import only from its own layer and those below (``tests/test_house.py``), and what a
repro script embeds (:func:`embedded`) and the rank side (:func:`rank_side`) are read off this table.
Modules outside the layer folders (public entry points, ``strategies/``, ``reference/``) are placed
in :data:`PLACED`.  Where a new module goes: ``docs/DEVELOPING.md``.  Imports nothing of the package.
"""

from __future__ import annotations

import os
from typing import NamedTuple


class Layer(NamedTuple):
    name: str
    #: The package the layer's folder installs as.
    package: str
    #: What belongs here, in one line.
    holds: str


LAYERS: tuple[Layer, ...] = (
    Layer("core", "harness.core", "what a repro script embeds: the case model, calls, the rank procedure, checks"),
    Layer("ranks", "harness.ranks", "what a rank process runs besides the core: its loop, messages, targets"),
    Layer("strategies", "harness.strategies", "Hypothesis strategies and the space of cases they draw from"),
    Layer("settings", "harness.settings", "the options table, where files go, Hypothesis profiles"),
    Layer("pool", "harness.pool", "warm rank sets: starting, watching, healing, the capability matrix"),
    Layer("search", "harness.search", "running cases: the search, the probe, confirmation, findings, coverage"),
    Layer("report", "harness.report", "what a person reads: text, stacks, hints, repro scripts, the coverage page"),
    Layer("frontends", "harness.frontends", "the ways in: the Python API, the command line, fuzz, the catalogue report"),
)

#: Modules outside the layer folders, by the layer they belong to.
PLACED: dict[str, str] = {
    "harness.reference": "core",
    "harness.ragged": "ranks",
    "harness.remote": "ranks",
    "harness.variants": "ranks",
    "harness.layers": "core",
    "harness": "frontends",
    "harness.__main__": "frontends",
    "harness.plugin": "frontends",
}


#: The folder the package is installed in.
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
#: Code in the package that is a collective under test, not the engine: the catalogue and our gather.
_TARGETS_INSIDE = (os.path.join(PACKAGE_DIR, "variants") + os.sep, os.path.join(PACKAGE_DIR, "ragged.py"))


def engine_file(path: str) -> bool:
    """Whether ``path`` is a source file of the harness's engine (any layer), not a target it ships:
    a person reading a stack or a warning's origin is shown their own frames, not these."""
    absolute = os.path.abspath(path)
    return absolute.startswith(PACKAGE_DIR + os.sep) and not absolute.startswith(_TARGETS_INSIDE)


def layer_of(module: str) -> Layer:
    """The layer of ``module`` (``harness.pool.rankset``, ``harness.variants.plain``)."""
    for layer in LAYERS:
        if module == layer.package or module.startswith(layer.package + "."):
            return layer
    placed = next((PLACED[name] for name in sorted(PLACED, key=len, reverse=True)
                   if module == name or module.startswith(name + ".")), None)
    if placed is None:
        raise KeyError(f"{module} is in no layer: put it in a layer's folder (docs/DEVELOPING.md)")
    return next(layer for layer in LAYERS if layer.name == placed)


def package(layer: str) -> str:
    """The package of the layer named ``layer`` (``harness.ranks`` for ``ranks``)."""
    return next(each.package for each in LAYERS if each.name == layer)


def rank(layer: str) -> int:
    """How high ``layer`` sits: 0 for the lowest."""
    return [each.name for each in LAYERS].index(layer)


def rank_side(module: str) -> bool:
    """Whether rank processes import ``module``: the layers up to ``ranks``."""
    return rank(layer_of(module).name) <= rank("ranks")


def embedded(module: str) -> bool:
    """Whether repro scripts embed ``module``: the core layer's modules, the reference with them
    (this map is read by the controller only, and is not embedded)."""
    return layer_of(module).name == "core" and module != "harness.layers"
