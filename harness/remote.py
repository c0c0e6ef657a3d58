"""Scale-out: ranks that ``torchrun`` starts on many machines serve one driver running Hypothesis.

This module is what torchrun starts on every rank (``-m harness.remote``), and it runs
:mod:`harness.ranks.remote_worker`; the driver is :mod:`harness.pool.remote_driver`.

The connection
--------------
The driver listens; ranks dial in.  ``check``/``fuzz --listen HOST:PORT`` opens a TCP socket
(port 0, the default: the OS picks a free one, so the driver never needs a fixed port unless
the user names one), prints the address, and waits.  The user starts the ranks::

    GATHER_HARNESS_AUTHKEY=KEY torchrun --nnodes N --nproc-per-node P --rdzv-backend c10d \\
        --rdzv-endpoint NODE0:29400 --max-restarts 100 -m harness.remote --driver DRIVER:PORT

Every rank opens two authenticated :mod:`multiprocessing.connection` connections (HMAC
challenge with the key in ``GATHER_HARNESS_AUTHKEY``; the driver generates and prints one if
that variable is unset) and greets on both with ``ready`` and its torchrun identity
(``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, host):

- the *main* connection carries exactly a pool rank's messages, ``run``/``call``/``stop`` in
  and ``ready``/``result`` out, answered by the same loop (:func:`harness.ranks.rank.serve`);
- the *side* connection is served by a thread: ``stack`` asks for the main thread's stack and
  last collective while it is busy (hang reports name both, as for local ranks), and the
  side connection closing tells a rank that the driver has abandoned it.

Once all W ranks (W = torchrun's ``WORLD_SIZE``) are connected, the driver has every rank
call :func:`harness.ranks.rank_calls.join_group`: pin ``cuda:LOCAL_RANK`` for CUDA cases, then
``init_process_group(backend, init_method="env://")`` from torchrun's environment.  The
driver chooses backend and device (``--backend``/``--device``), so the torchrun command line
never repeats them.

Faults
------
As in a local pool, a set is discarded after any fault (a rank that blocked in or raised out
of a collective cannot be trusted, and NCCL cannot be re-initialised in a process after a
timeout).  The driver cannot kill remote processes; it closes their connections, and every
rank then exits with status 1 (a rank blocked in a collective exits from its side thread).
torchrun restarts the job's workers while ``--max-restarts`` lasts, they dial in again, and
the driver goes on with the new set (``reconnect_timeout``).  With no restarts left the job
ends, and the driver stops with :class:`~harness.core.errors.PoolGone` naming the fault: restart
the job, with a larger ``--max-restarts``.  A remote set has one world size, the job's.
"""

from __future__ import annotations

import os
import sys

from harness.ranks.remote_worker import worker_main

if __name__ == "__main__":
    status = worker_main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # no interpreter teardown: a broken NCCL group can hang in it
