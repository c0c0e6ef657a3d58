"""The variant catalogue: published all_gather recipes and what their authors claim for them.

Data only: this module never imports the variant modules, so a driver process can list and
describe the catalogue without importing any variant code (or torch).  Each entry's
``target`` names the gather as ``module:attr`` *as its authors wrote it* wherever it can be
called as ``f(x)``, ``f(x, dim)``, with ``dim=``/``group=`` or through ``.apply``, with its
result read by its convention (``output``); ranks import it.  An adapter remains only where
the published API needs what no gather call has (an output buffer, an ``args`` namespace).

The contract is the authors' claim, not the truth: finding where the two differ is the
harness's job.  Gradient column: ``local`` = own slot of own cotangent, ``sum`` = sum over
ranks of their cotangents' slot, ``none`` = not differentiable.

====================== ========================================= ======== ==== ===== ======
name                   origin                                    ragged   dims grad  output
====================== ========================================= ======== ==== ===== ======
pad_to_max_1d          StackOverflow 71433508 ``all_gather(q,..)`` yes      0    none  list
pad_to_max_nd          its N-d extension ``all_gather_nd``       yes      0    none  list
pad_unpad_by_value     same, padding removed by value            yes      0    none  list
plain_all_gather       ``dist.all_gather`` + ``cat`` (MoCo)      no       any  none  tensor
no_grad_local_trick    gather in no_grad, ``all_x[rank] = x``    no       any  local tensor
simclr_gather_layer    SimCLR ``GatherLayer`` (``.apply``)       no       0    local list
bolts_sync_function    lightning-bolts ``SyncFunction``          no       0    sum   tensor
clip4clip_all_gather   CLIP4Clip ``AllGather``                   no       0    sum   tensor
all_gather_into_tensor ``dist.all_gather_into_tensor``           no       any  none  tensor
all_gather_single      ``dist.all_gather_single`` (torch 2.13)   no       any  none  tensor
lucidrains_all_gather  lucidrains ``AllGather(dim)``             yes      any  local first
lucidrains_all_reduce  same, ``all_reduce_grads=True``           yes      any  sum   first
torch_nn_all_gather    ``torch.distributed.nn.functional``       no       0    sum   list
all_gather_object      ``dist.all_gather_object``                yes      any  none  tensor
functional_autograd    ``all_gather_tensor_autograd``            no       0    sum   tensor
ours_sum               ``harness.ragged.all_gather_ragged``      yes      any  sum   tensor
ours_local             same, ``grad="local"``                    yes      any  local tensor
ours_mean              same, ``grad="mean"``                     yes      any  mean  tensor
====================== ========================================= ======== ==== ===== ======
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.contract import ALL_DTYPES, Contract

#: Every dtype gloo can move: all of the harness's names but ``int16``, which gloo rejects.
GLOO_DTYPES: tuple[str, ...] = tuple(name for name in ALL_DTYPES if name != "int16")


@dataclass(frozen=True)
class VariantSpec:
    """One catalogue entry: a short id, the ``module:attr`` of its gather, its claim (and convention)."""

    name: str
    target: str
    contract: Contract
    origin: str


def _claim(ragged: bool, dims: str, grad: str, output: str = "tensor") -> Contract:
    """The authors' claim, over every dtype gloo supports, with the result's convention."""
    return Contract(ragged=ragged, dims=dims, dtypes=GLOO_DTYPES, grad=grad, output=output)


CATALOGUE: tuple[VariantSpec, ...] = (
    VariantSpec(
        "pad_to_max_1d",
        "harness.variants.padded:gather_1d",
        _claim(ragged=True, dims="0", grad="none", output="list"),
        "The 1-D helper `all_gather(q, ws, device)` of StackOverflow answer 71433508, pasted "
        "into many training scripts: all_gather the local sizes, zero-pad to the max, "
        "all_gather the padded tensors, unpad with `t[:size]`. Claims tensors of different "
        "lengths along dim 0; written for 1-D tensors (`local_size.item()`).",
    ),
    VariantSpec(
        "pad_to_max_nd",
        "harness.variants.padded:all_gather_nd",
        _claim(ragged=True, dims="0", grad="none", output="list"),
        "`all_gather_nd(tensor)`, the N-d extension of the same answer: exchanges full "
        "shapes, pads and unpads along dim 0 by the recorded size. Claims ragged dim 0 with "
        "any number of (equal) extra dims.",
    ),
    VariantSpec(
        "pad_unpad_by_value",
        "harness.variants.padded:all_gather_unpad_by_value",
        _claim(ragged=True, dims="0", grad="none", output="list"),
        "The common rewrite of the pad-to-max helper that drops padding by value "
        "(`t[t != 0]`, row-wise for N-d) instead of by recorded size. Claims ragged dim 0; "
        "loses genuine zero rows of the data.",
    ),
    VariantSpec(
        "plain_all_gather",
        "harness.variants.plain:gather_equal",
        _claim(ragged=False, dims="any", grad="none"),
        "The textbook `dist.all_gather` into a list of `torch.empty_like(x)` followed by "
        "`torch.cat` (MoCo's `concat_all_gather` and its copies). Equal shapes only; no "
        "gradient.",
    ),
    VariantSpec(
        "no_grad_local_trick",
        "harness.variants.plain:gather_local_trick",
        _claim(ragged=False, dims="any", grad="local"),
        "Gather under `torch.no_grad()`, then `all_x[rank] = x` before `torch.cat`, the "
        "widespread workaround for 'all_gather has no gradient'. Equal shapes; claims the "
        "local gradient.",
    ),
    VariantSpec(
        "simclr_gather_layer",
        "harness.variants.contrastive:GatherLayer",
        _claim(ragged=False, dims="0", grad="local", output="list"),
        "SimCLR's `GatherLayer` autograd.Function (Spijkervet/SimCLR, copied into "
        "solo-learn and OpenSelfSup), called as written: `GatherLayer.apply(x)` all_gathers "
        "into a tuple of per-rank tensors; backward returns `grads[rank]`. Equal shapes; the "
        "local gradient.",
    ),
    VariantSpec(
        "bolts_sync_function",
        "harness.variants.contrastive:SyncFunction",
        _claim(ragged=False, dims="0", grad="sum"),
        "lightning-bolts SimCLR `SyncFunction`: all_gather + cat along dim 0, backward "
        "all_reduces (SUM) the cotangent and returns rows rank*batch:(rank+1)*batch. Equal "
        "batches along dim 0; claims the summed gradient.",
    ),
    VariantSpec(
        "clip4clip_all_gather",
        "harness.variants.contrastive:clip4clip",
        _claim(ragged=False, dims="0", grad="sum"),
        "CLIP4Clip's `AllGather` autograd.Function: all_gather + cat along dim 0, backward "
        "returns grad_output[rank*batch:(rank+1)*batch] without reduction. Its users rely on "
        "it for a contrastive loss computed on every rank, i.e. believe it sums; it is local. "
        "Adapter: `AllGather.apply(x, args)` needs an `args` namespace (world_size, rank).",
    ),
    VariantSpec(
        "all_gather_into_tensor",
        "harness.variants.into_tensor:gather_into_tensor",
        _claim(ragged=False, dims="any", grad="none"),
        "`dist.all_gather_into_tensor` into a [W*n, ...] buffer; the adapter moves `dim` to "
        "the front and back. Equal shapes only, no gradient (deprecated in torch 2.13).",
    ),
    VariantSpec(
        "all_gather_single",
        "harness.variants.into_tensor:gather_single",
        _claim(ragged=False, dims="any", grad="none"),
        "`dist.all_gather_single`, torch 2.13's successor of all_gather_into_tensor, with "
        "the same adapter. Equal shapes only, no gradient; absent from older torch.",
    ),
    VariantSpec(
        "lucidrains_all_gather",
        "harness.variants.lucidrains:gather",
        _claim(ragged=True, dims="any", grad="local", output="first"),
        "lucidrains' `AllGather(dim)` / `all_gather_variable_dim`: pad to the max along any "
        "dim, all_gather, select valid positions with an `arange < size` mask; backward "
        "splits the cotangent by size and keeps this rank's piece (local). The published "
        "module calls `pad_dim_to`/`exists` it never defines; the intended algorithm is used.",
    ),
    VariantSpec(
        "lucidrains_all_reduce",
        "harness.variants.lucidrains:gather_all_reduce_grads",
        _claim(ragged=True, dims="any", grad="sum", output="first"),
        "The same with `all_reduce_grads=True`: backward all_reduces (SUM, in place) the "
        "incoming cotangent before splitting it. Claims the summed gradient.",
    ),
    VariantSpec(
        "torch_nn_all_gather",
        "torch.distributed.nn.functional:all_gather",
        _claim(ragged=False, dims="0", grad="sum", output="list"),
        "torch's own `torch.distributed.nn.functional.all_gather(tensor, group)`, called as "
        "written: a tuple of per-rank tensors with autograd. Equal shapes; its backward "
        "reduce-scatters the cotangents: the summed gradient.",
    ),
    VariantSpec(
        "all_gather_object",
        "harness.variants.torch_builtin:all_gather_object",
        _claim(ragged=True, dims="any", grad="none"),
        "`dist.all_gather_object` of the tensor itself (pickled), concatenated along `dim`. "
        "Any shapes; no gradient.",
    ),
    VariantSpec(
        "functional_autograd",
        "harness.variants.torch_builtin:functional_autograd",
        _claim(ragged=False, dims="0", grad="sum"),
        "`torch.distributed._functional_collectives.all_gather_tensor_autograd(x, dim, "
        "group)`: its docs claim gradient propagation across workers (backward is a SUM "
        "reduce_scatter) and support for gather_dim=0 only. Equal shapes.",
    ),
    VariantSpec(
        "ours_sum",
        "harness.ragged:all_gather_ragged",
        _claim(ragged=True, dims="any", grad="sum"),
        "This project's `harness.ragged.all_gather_ragged(x, dim)` with the default "
        "grad='sum': one shape exchange and one all_gather_single of max-padded input; "
        "backward reduce-scatters the padded cotangent slots.",
    ),
    VariantSpec(
        "ours_local",
        "harness.ragged:gather_local",
        _claim(ragged=True, dims="any", grad="local"),
        "`all_gather_ragged(x, dim, grad='local')`: same forward; backward takes this "
        "rank's slot of its own cotangent, no collective.",
    ),
    VariantSpec(
        "ours_mean",
        "harness.ragged:gather_mean",
        _claim(ragged=True, dims="any", grad="mean"),
        "`all_gather_ragged(x, dim, grad='mean')`: same forward; backward is the summed "
        "gradient divided by the world size.",
    ),
)


def by_name(name: str) -> VariantSpec:
    """The catalogue entry called ``name``; ``KeyError`` listing the known names otherwise."""
    for spec in CATALOGUE:
        if spec.name == name:
            return spec
    known = ", ".join(spec.name for spec in CATALOGUE)
    raise KeyError(f"unknown variant {name!r}; known variants: {known}")
