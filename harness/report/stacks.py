"""Stacks a person reads: a rank's stack cut down to the user's own frames.

A hanging rank's faulthandler dump, or the traceback of a rank that raised, is mostly the
harness's frames (its rank loop, its procedure), multiprocessing's and torch's: in a real
report the target's own code was one line in sixteen.  :func:`user_frames` keeps the frames
of the user's code and, inside it, the innermost torch frame, which names the collective (or
the op) the rank is in; one line per stack says how many frames were hidden and how to see
them (``--full-stacks``).  Where the target is torch's own code (a stack with torch's frames and
none of the user's) torch's frames are kept and the harness's hidden; a stack of the harness's and
Python's frames alone (a rank back in the harness's loop, its target returned) is one line saying so.

Text in, text out: it reads stacks wherever they were formatted (local ranks, torchrun ranks,
a rank's own output), and leaves every other line alone.  The JSON keeps the full text.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import sysconfig

from harness.layers import engine_file

#: A frame line of a traceback (``File "p", line 3, in f``) or of a faulthandler dump
#: (``File "p", line 3 in f``).
_FRAME = re.compile(r'^(?P<indent>\s*)File "(?P<path>[^"]+)", line \d+,? in ')


def user_frames(text: str, how_to_show: str = "--full-stacks") -> str:
    """``text`` with every stack in it cut down to the user's frames (see the module docstring);
    ``how_to_show`` is the option that shows them all, named on the line that counts the hidden."""
    lines = text.split("\n")
    out: list[str] = []
    newest_first = False
    k = 0
    while k < len(lines):
        if "most recent call" in lines[k]:
            newest_first = "most recent call first" in lines[k]
        if not _FRAME.match(lines[k]):
            out.append(lines[k])
            k += 1
            continue
        frames, k = _read_stack(lines, k)
        out += _filtered(frames, newest_first, how_to_show)
    return "\n".join(out)


def _read_stack(lines: list[str], k: int) -> tuple[list[list[str]], int]:
    """The consecutive frames starting at line ``k`` (each its ``File`` line and deeper-indented
    source lines), and the index of the first line after them."""
    frames: list[list[str]] = []
    while k < len(lines) and (match := _FRAME.match(lines[k])):
        depth = len(match.group("indent"))
        frame = [lines[k]]
        k += 1
        while k < len(lines) and not _FRAME.match(lines[k]) and _indent_of(lines[k]) > depth:
            frame.append(lines[k])
            k += 1
        frames.append(frame)
    return frames, k


def _filtered(frames: list[list[str]], newest_first: bool, how_to_show: str) -> list[str]:
    kinds = [_kind(_path(frame[0])) for frame in frames]
    order = range(len(frames)) if newest_first else range(len(frames) - 1, -1, -1)
    if "user" in kinds:
        keep = {k for k in order if kinds[k] == "user"}
        for k in order:  # from the newest frame outwards: the torch call the user's code is in
            if kinds[k] == "user":
                break
            if kinds[k] == "torch":
                keep.add(k)
                break
    elif "torch" in kinds:  # the target is torch's own code: its frames are the story
        keep = {k for k in order if kinds[k] == "torch"}
    else:  # the harness's and Python's alone: the rank is not in the target; nothing of it to show
        indent = _FRAME.match(frames[0][0]).group("indent")  # type: ignore[union-attr]
        return [f"{indent}(not in the target: {len(frames)} frame{'' if len(frames) == 1 else 's'} of the harness "
                f"and Python hidden: {how_to_show} shows them)"]
    shown = [line for k, frame in enumerate(frames) if k in keep for line in frame]
    hidden = len(frames) - len(keep)
    if hidden:
        indent = _FRAME.match(frames[0][0]).group("indent")  # type: ignore[union-attr]
        shown.append(f"{indent}({hidden} frame{'' if hidden == 1 else 's'} of the harness, Python and torch "
                     f"hidden: {how_to_show} shows them)")
    return shown


def _path(line: str) -> str:
    match = _FRAME.match(line)
    return match.group("path") if match else ""


def _indent_of(line: str) -> int:
    return len(line) - len(line.lstrip()) if line.strip() else 1 << 30


def _kind(path: str) -> str:
    """``user``, ``torch`` or ``other`` (the harness's engine, the standard library, ``<frozen ...>``)."""
    if path.startswith("<"):
        return "other"
    absolute = os.path.abspath(path)
    if absolute.startswith(_torch_dir()):
        return "torch"
    if engine_file(absolute) or _in_standard_library(absolute):
        return "other"
    return "user"


@functools.cache
def _torch_dir() -> str:
    spec = importlib.util.find_spec("torch")
    locations = list(spec.submodule_search_locations or []) if spec else []
    return os.path.abspath(locations[0]) + os.sep if locations else "\0"


def _in_standard_library(path: str) -> bool:
    """Python's own modules (multiprocessing, threading, runpy), not packages installed beside them."""
    parts = path.split(os.sep)
    return path.startswith(_standard_library()) and "site-packages" not in parts and "dist-packages" not in parts


@functools.cache
def _standard_library() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple({os.path.abspath(paths[name]) + os.sep for name in ("stdlib", "platstdlib")})
