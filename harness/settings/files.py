"""Where the harness writes, and how: one hidden directory, atomic JSON, names per target.

Everything the harness writes without being given a path lands under :data:`OUTPUT_DIR`
(``.gather-harness/``), which, like ``.pytest_cache/``, holds a ``.gitignore`` that ignores it.
Repro scripts are ``repros/<target>/<property>.py``: a newer finding replaces the older script,
so the directory stays bounded.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import re
from pathlib import Path

from harness.core.errors import UsageError
from harness.ranks import targets

#: The hidden directory, relative to the working directory; ``GATHER_HARNESS_DIR`` moves it.
OUTPUT_DIR = ".gather-harness"
OUTPUT_DIR_ENV = "GATHER_HARNESS_DIR"
_IGNORE_EVERYTHING = "# Created by gather-harness: generated files (repros, example database, summaries).\n*\n"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def output_dir() -> Path:
    """The hidden output directory (not created: :func:`ensure_dir` does that on first write)."""
    return Path(os.environ.get(OUTPUT_DIR_ENV) or OUTPUT_DIR)


def default_path(*parts: str) -> str:
    """A path inside the hidden output directory, e.g. ``default_path("fuzz.json")``."""
    return str(output_dir().joinpath(*parts))


def ensure_dir(path: str | os.PathLike) -> Path:
    """Create ``path`` (and parents); a hidden output directory made here ignores itself in git."""
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    root = output_dir().resolve()
    if root == folder.resolve() or root in folder.resolve().parents:
        ignore = root / ".gitignore"
        if not ignore.exists():
            _replace(ignore, _IGNORE_EVERYTHING)
    return folder


def write_atomically(path: str | os.PathLike, text: str) -> None:
    """Write all of ``text`` or nothing: a reader polling for the file never sees half of it."""
    target = Path(path)
    ensure_dir(target.parent)
    _replace(target, text)


def _replace(target: Path, text: str) -> None:
    _remove_orphaned_partials(target)
    partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, target)


def _remove_orphaned_partials(target: Path) -> None:
    """The half-written copies of ``target`` whose writer was killed mid-write (a fuzz run ended by SIGKILL)."""
    for partial in target.parent.glob(f"{glob.escape(target.name)}.*.tmp"):
        pid = partial.name.removeprefix(target.name + ".").removesuffix(".tmp")
        if pid.isdigit() and not pid_alive(int(pid)):
            with contextlib.suppress(OSError):
                partial.unlink()


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (a pid reused since only keeps a stale file a while longer)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def write_json(path: str | os.PathLike, document: object) -> None:
    """``document`` as indented JSON, written atomically."""
    write_atomically(path, json.dumps(document, indent=2) + "\n")


def check_writable(option: str, path: str | None) -> None:
    """Fail before a long search, not after it, when a file the user named cannot be written."""
    if path is None:
        return
    folder = os.path.dirname(os.path.abspath(path))
    inside_ours = Path(folder).resolve() == output_dir().resolve() or output_dir().resolve() in Path(folder).resolve().parents
    if not inside_ours and not os.path.isdir(folder):
        raise UsageError(f"{option} {path}: directory {folder} does not exist")


def target_slug(target: str) -> str:
    """A directory name for ``target``: ``<module>.<attr>-<hash of its file>``, one however the
    target was written; the hash keeps two ``gather.py`` files in different directories apart."""
    module, _, attr = target.rpartition(":")
    source = targets.source_file(target)
    if source is None:
        name = f"{module}.{attr}"
    else:
        stem = Path(source).stem if Path(source).stem != "__init__" else Path(source).parent.name
        name = f"{stem}.{attr}-{hashlib.sha256(source.encode()).hexdigest()[:8]}"
    return _UNSAFE.sub("_", name)


def repro_path(directory: str | os.PathLike, target: str, prop: str) -> Path:
    """``<directory>/<target slug>/<property>.py``: one repro per target and property."""
    return Path(directory) / target_slug(target) / f"{prop.replace('-', '_')}.py"
