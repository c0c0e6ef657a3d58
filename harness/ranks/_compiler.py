"""Imported by the rank forkserver of a command that compiles its target (``--compile``) only
(:data:`harness.pool.forkserver.COMPILER_PRELOAD`): the compiler, ready before any rank is forked.

A rank's first compile imports inductor and then asks which vector instructions the CPU's C++
kernels may use: inductor builds a probe library per instruction set and loads each in a child
process, 1.1-1.5 s a rank on 2 cores, in every process once.  Asked here, the answer (a
``functools.cache``) is inherited by every rank forked afterwards, so a fresh rank set (each failing
shrink step with compiled collectives, each confirmation replay) compiles in about 1.7 s, not 4.2
(``examples/compiled.py:fast_path_when_compiled``, W=2, measured 2026-12-07).  Whatever fails here
only leaves the ranks to ask themselves: a forkserver preload that raises would end the server.
"""

import contextlib


def _ready() -> None:
    import torch._inductor.compile_fx  # noqa: F401

    try:
        from torch._inductor.cpu_vec_isa import pick_vec_isa
    except ImportError:  # torch 2.4 keeps it in the code cache's module
        from torch._inductor.codecache import pick_vec_isa
    pick_vec_isa()


with contextlib.suppress(Exception):
    _ready()
