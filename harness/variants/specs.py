"""What a catalogue entry is: a variant's spec, the torch names it needs, a known race, its claim.

Data only, like the catalogue (:mod:`harness.variants`): no variant code is imported here.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from harness.core.contract import ALL_DTYPES, COLLECTIVES, OP_DTYPES, Contract

#: Every dtype gloo can move: all of the harness's names but ``int16``, which gloo rejects.
GLOO_DTYPES: tuple[str, ...] = tuple(name for name in ALL_DTYPES if name != "int16")


@dataclass(frozen=True)
class Need:
    """Names of ``module`` a variant calls that not every supported torch release has.

    ``since`` is the first torch minor release that has every one of them, measured by
    looking them up on each release from the floor (torch 2.4) to the newest
    (docs/torch-versions.md).  Whether they are there is asked of the installed torch
    itself (an import of a torch module, never of variant code), so a backport or a
    removal is seen as it is; ``since`` only words the message.
    """

    module: str
    names: tuple[str, ...]
    since: str

    def missing(self) -> list[str]:
        """The names (``module.name``) the installed torch lacks."""
        try:
            module = importlib.import_module(self.module)
        except ImportError:
            return [self.module]
        return [f"{self.module}.{name}" for name in self.names if not hasattr(module, name)]


def _version_key(since: str) -> tuple[int, ...]:
    return tuple(int(part) for part in since.split("."))


@dataclass(frozen=True)
class KnownRace:
    """A torch race on part of a variant's contract: there its outcome is a matter of timing.

    The catalogue report does not draw that part (``dtypes``) and says so the same way on every
    run (``intermittent (torch race: <doc>)``), whatever this run's timing would have shown;
    the rest of the contract is checked as any variant's.  ``doc`` is the finding, with its
    standalone script; ``shows`` what a run that loses the race sees.
    """

    doc: str
    dtypes: tuple[str, ...]
    shows: str


#: torch 2.13's functional collectives: a complex output view that requires grad is wrapped by
#: autograd after gloo's worker thread may have bumped its version (an error on the rank that
#: loses the race; its peers then wait in the backward's reduce-scatter: a hang).
FUNCOL_VIEW_RACE = KnownRace("docs/findings/funcol_complex_autograd_view_race.md", ("complex64", "complex128"),
                             "values or hang, on complex")


@dataclass(frozen=True)
class VariantSpec:
    """One catalogue entry: a short id, the ``module:attr`` of its gather, its claim (and convention).

    ``needs``: the torch names its code calls that older supported releases lack; where one
    is missing the entry is not run and reports :meth:`unavailable` instead of a verdict.
    ``race``: a known torch race on part of its contract (:class:`KnownRace`).
    """

    name: str
    target: str
    contract: Contract
    origin: str
    needs: tuple[Need, ...] = ()
    race: KnownRace | None = None

    def unavailable(self) -> str:
        """Why the installed torch cannot run this variant, e.g. ``needs torch >= 2.5 (...)``; "" if it can."""
        lacking = [(need, names) for need in self.needs if (names := need.missing())]
        if not lacking:
            return ""
        since = max((need.since for need, _ in lacking), key=_version_key)
        return f"needs torch >= {since} (this torch has no {lacking[0][1][0]})"


#: The public DTensor module's names, there since torch 2.5 (torch 2.4 kept them in the private
#: ``torch.distributed._tensor``; the catalogue checks the public path users are told to use).
DTENSOR = Need("torch.distributed.tensor", ("DTensor", "Shard", "Replicate", "Partial"), since="2.5")
#: ``torch.distributed.all_gather_single``, the successor of ``all_gather_into_tensor``.
C10D_ALL_GATHER_SINGLE = Need("torch.distributed", ("all_gather_single",), since="2.13")
#: The functional collectives' ``all_gather_single`` family (``all_gather_tensor`` is older).
FUNCOL_ALL_GATHER_SINGLE = Need("torch.distributed._functional_collectives",
                                ("all_gather_single", "all_gather_single_autograd"), since="2.13")

#: ``reduce_scatter_single`` (c10d and funcol), the successor of ``reduce_scatter_tensor``: absent
#: in 2.4.1, present in 2.13.0 and 2.15.0 (the releases between not looked up; 2.13 is when its
#: gather twin ``all_gather_single`` arrived).
C10D_REDUCE_SCATTER_SINGLE = Need("torch.distributed", ("reduce_scatter_single",), since="2.13")
FUNCOL_REDUCE_SCATTER_SINGLE = Need("torch.distributed._functional_collectives", ("reduce_scatter_single",),
                                    since="2.13")


def claim(
    ragged: bool, dims: str, grad: str, output: str = "tensor", groups: bool | None = None, mesh: bool = False,
    collective: str = "gather", op: str = "sum",
) -> Contract:
    """The authors' claim, over every dtype gloo supports (and the reduction is defined for),
    with the result's convention; on subgroups wherever the code takes a group (``groups``
    ``None``: a target that takes a group claims any group), always passing it where ``True``."""
    dtypes = tuple(name for name in GLOO_DTYPES if not COLLECTIVES[collective].reduces or name in OP_DTYPES[op])
    return Contract(ragged=ragged, dims=dims, dtypes=dtypes, grad=grad, output=output, groups=groups, mesh=mesh,
                    collective=collective, op=op)


def reduce_scatter_claim(ragged: bool, dims: str, grad: str, op: str = "sum") -> Contract:
    return claim(ragged=ragged, dims=dims, grad=grad, collective="reduce-scatter", op=op)


def all_reduce_claim(grad: str, op: str = "sum") -> Contract:
    return claim(ragged=False, dims="any", grad=grad, collective="all-reduce", op=op)


def all_to_all_claim(ragged: bool, dims: str, grad: str) -> Contract:
    return claim(ragged=ragged, dims=dims, grad=grad, collective="all-to-all")


def relayout_claim(ragged: bool, scatter_dim: str, gather_dim: str, grad: str,
              ndims: tuple[int, int] | None = None) -> Contract:
    """A re-layout all-to-all's claim: its dims (``any``: drawn) and the dims of its inputs."""
    return all_to_all_claim(ragged=ragged, dims="any", grad=grad).with_(scatter_dim=scatter_dim, gather_dim=gather_dim,
                                                                   ndims=ndims)
