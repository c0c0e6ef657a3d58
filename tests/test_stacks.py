"""Stacks cut down to the user's frames: the harness's, Python's and torch's hidden, the collective kept."""

from __future__ import annotations

import os
import sysconfig

import torch

from harness import layers
from harness.report import stacks

HARNESS = layers.PACKAGE_DIR
TORCH = os.path.dirname(torch.__file__)
STDLIB = sysconfig.get_paths()["stdlib"]

#: A blocked rank's faulthandler dump, as the pool reads it (indented under its rank's line).
DUMP = f"""  rank 1 blocked in collective #1 all_gather(torch.float32, shape=(1,))
      Current thread 0x00007f34b4498b80 (most recent call first):
        File "{TORCH}/distributed/distributed_c10d.py", line 4287 in all_gather
        File "{TORCH}/distributed/c10d_logger.py", line 83 in wrapper
        File "{HARNESS}/ranks/rank.py", line 133 in recorded
        File "/home/me/mytrain/dist_utils.py", line 11 in forward
        File "{TORCH}/autograd/function.py", line 625 in apply
        File "{HARNESS}/core/conventions.py", line 91 in invoke
        File "{HARNESS}/core/procedure.py", line 141 in run_case
        File "{STDLIB}/multiprocessing/process.py", line 108 in run
        File "<string>", line 1 in <module>"""

#: A rank's traceback (most recent call last), with source lines and carets under frames.
TRACEBACK = f"""  rank 0 raised before entering any collective
    Traceback (most recent call last):
      File "{HARNESS}/core/procedure.py", line 141, in run_case
        y = call.invoke(target, x, case.dim, group, pass_group=bool(case.groups))
            ^^^^^^^^^^^^^^^^^
      File "/home/me/mine.py", line 5, in gather
        return helper(x)
      File "/home/me/mine.py", line 9, in helper
        raise ValueError("boom")
    ValueError: boom"""


def test_a_dump_keeps_the_users_frames_and_the_collective_they_are_in() -> None:
    shown = stacks.user_frames(DUMP)
    frames = [line.strip() for line in shown.splitlines() if line.strip().startswith("File")]
    assert frames == [f'File "{TORCH}/distributed/distributed_c10d.py", line 4287 in all_gather',
                      'File "/home/me/mytrain/dist_utils.py", line 11 in forward']
    assert "(7 frames of the harness, Python and torch hidden: --full-stacks shows them)" in shown
    assert shown.startswith("  rank 1 blocked in collective #1") and "Current thread" in shown


def test_a_traceback_keeps_the_users_frames_with_their_source() -> None:
    shown = stacks.user_frames(TRACEBACK, "--gather-full-stacks")
    assert "procedure.py" not in shown and "call.invoke" not in shown and "^^^" not in shown
    assert 'mine.py", line 5, in gather\n        return helper(x)' in shown
    assert 'mine.py", line 9, in helper\n        raise ValueError("boom")' in shown
    assert "(1 frame of the harness, Python and torch hidden: --gather-full-stacks shows them)" in shown
    assert shown.endswith("    ValueError: boom")


def test_a_stack_of_the_harness_and_python_alone_is_one_line_saying_the_rank_is_not_in_the_target() -> None:
    """A rank whose target returned waits in the harness's loop: its frames say nothing of the target."""
    harness_only = "\n".join(line for line in DUMP.splitlines() if "/home/me/" not in line and TORCH not in line)
    shown = stacks.user_frames(harness_only)
    assert f"{HARNESS}/" not in shown and 'File "' not in shown
    assert "(not in the target: " in shown and "frames of the harness and Python hidden: --full-stacks shows them)" in shown


def test_where_the_target_is_torchs_own_code_its_frames_are_kept_and_the_harness_hidden() -> None:
    torch_target = "\n".join(line for line in DUMP.splitlines() if "/home/me/" not in line)
    shown = stacks.user_frames(torch_target)
    assert f"{HARNESS}/" not in shown and "multiprocessing" not in shown
    assert "distributed_c10d.py" in shown and "autograd/function.py" in shown
    assert "(5 frames of the harness, Python and torch hidden: --full-stacks shows them)" in shown


def test_torch_frames_outside_the_users_code_are_hidden() -> None:
    """Only the torch frame the user's code called is kept: autograd's ``apply`` around it is not."""
    shown = stacks.user_frames(DUMP)
    assert "autograd/function.py" not in shown and "c10d_logger.py" not in shown


def test_text_without_stacks_is_unchanged() -> None:
    text = "property violated: values (mismatch)\ncase: W=2 gloo/cpu float32 dim=0 grad=none | r0 (1,) iota"
    assert stacks.user_frames(text) == text


def test_the_catalogue_and_the_projects_gather_count_as_the_users() -> None:
    dump = DUMP.replace("/home/me/mytrain/dist_utils.py", f"{HARNESS}/variants/simclr.py")
    assert "variants/simclr.py" in stacks.user_frames(dump)
