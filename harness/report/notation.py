"""How to read a case line: the notation of :meth:`harness.core.case.Case.describe`, explained once.

Printed by ``python -m harness explain-case`` (a failure's output points there) and shown
in ``docs/case-notation.md``, which holds this very text (a test keeps the two the same).  This module
imports nothing, so the command answers at once.
"""

EXAMPLE = ("W=2 gloo/cpu float32 dim=0 grad=sum | r0 (1,2) iota C=ints "
           "| r1 (1,2) transposed random#7 C=floats transposed")

TEXT = f"""How to read a case line, e.g.

  {EXAMPLE}

reduce-scatter(sum) or all-to-all
                   first, when the case is not a gather's: the collective (and its reduction)
W=2 gloo/cpu       the world size, the backend and the device
float32 dim=0      the dtype, and the dim gathered along (a negative dim counts from the end)
scatter_dim=2 gather_dim=1
                   in place of dim, in an all-to-all that is a re-layout (heads for
                   sequence): the dim each rank splits into one piece per rank of its
                   group, and the dim the pieces received are concatenated along
grad=sum           the gradient contract checked: none, local, sum or mean; adjoint for a
                   reduce-scatter or an all-to-all (see docs/properties.md)
output=list        how the result was read, when not a tensor: list (one per rank; in an
                   all-to-all, the rows from each), stack (a (W, ...) tensor), first (a
                   tuple starting with the result, e.g. (output, handle))
groups={{0,2}}+{{1}}   subgroups, each gathering on its own process group in group-rank order
                   (rank 2 is group rank 1 of {{0,2}}, rank 1 group rank 0 of {{1}});
                   a rank in no group shows as "r3 idle" and does not call the gather
| r1 ...           what each rank holds, rank 0 first:
  (1,2)            the shape of its input; in a reduce-scatter (5,2)->slot (1,2): what it
                   holds, then its slot of the result
  transposed       the input's memory layout when it is not contiguous: transposed (a
                   permuted view, strides reversed), strided (every other element of a
                   wider tensor), offset (a view starting 3 elements into its storage)
  iota             the input's values: iota (1, 2, 3, ... plus 100 x rank: every element
                   distinct), padding#S (0, -1, NaN and a few real values: what careless
                   unpadding drops), special#S (NaN with payloads, +-inf, +-0.0,
                   subnormals, extremes), random#S (any bit pattern of the dtype),
                   normal#S (finite random values, drawn for reductions);
                   S seeds the recipe, so a case gives the same values everywhere
  sends 2+0+1      in an all-to-all: the rows it sends to each rank of its group, in order
  C=ints           the cotangent this rank feeds to backward (only when grad is not none),
                   different on every rank: ints (small nonzero integers: every sum is
                   exact) or floats (normal samples), then its layout when it is not
                   contiguous (transposed, strided): the grad_output the backward receives
"""
