"""The README and the docs pages run as printed: every ``bash`` block but the two set-up commands.

The pages are ``README.md`` and every ``docs/*.md`` (``docs/findings/`` holds no commands: its
scripts are run on their own).  Each block runs with ``bash`` in a scratch directory holding a copy
of ``examples/`` (and nothing else of the repository) and every ``python`` block of its page whose
first line names a file (``# test_gathers.py``), written there under that name, with this
environment's ``python`` and ``torchrun`` first on ``PATH``.  A command line may end with
``# exit N`` to state the exit status it must have; every other command must exit 0.  The two
set-up commands create a virtual environment and install the project: ``.ci/run`` runs the second
of them on every CI run.

The README stays short (at most :data:`README_LINES` lines) and links every docs page; every
relative link of the README and of ``docs/`` resolves, anchors included.  The case notation
``docs/case-notation.md`` explains is the one ``python -m harness explain-case`` prints, and the
catalogue tables of ``docs/report.md`` are the catalogue's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.report import notation

pytestmark = pytest.mark.slow  # every block of the README and docs/ runs as a shell command (up to 40 s each)

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
#: A newcomer reads the README in ten minutes; the rest is in ``docs/``.
README_LINES = 300
_BLOCK = re.compile(r"```bash\n(.*?)```", re.DOTALL)
_FILE_BLOCK = re.compile(r"```python\n# ([\w.]+\.py)\n(.*?)```", re.DOTALL)
_FENCED = re.compile(r"```.*?```", re.DOTALL)
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_EXPECTED = re.compile(r"\s*#\s*exit (\d+)\s*$")
#: The whole budget of a block: a check starts in seconds; the scale-out block starts four torchrun ranks.
BLOCK_TIMEOUT_S = 240


def pages() -> list[Path]:
    """The pages whose commands run: the README, then every docs page in name order."""
    return [README, *sorted(DOCS.glob("*.md"))]


def bash_blocks(page: Path) -> list[str]:
    return [block for block in _BLOCK.findall(page.read_text()) if "-m venv" not in block]


def page_blocks() -> list[tuple[Path, str]]:
    return [(page, block) for page in pages() for block in bash_blocks(page)]


def block_id(page: Path, block: str) -> str:
    return f"{page.relative_to(ROOT)}: {block.strip().splitlines()[0][:60]}"


def checked_script(block: str) -> str:
    """``block`` as a script in which every command's exit status is checked.

    Continuation lines are joined; ``cmd  # exit N`` must exit N, any other command 0;
    ``cmd &`` is left to its ``wait``.
    """
    lines = ["set -u"]
    for number, command in enumerate(block.replace("\\\n", " ").splitlines(), 1):
        if not command.strip():
            continue
        expected = _EXPECTED.search(command)
        command = _EXPECTED.sub("", command) if expected else command
        if command.rstrip().endswith("&"):
            lines.append(command)
            continue
        want = int(expected.group(1)) if expected else 0
        lines.append(f"{command}\nstatus=$?; if [ $status -ne {want} ]; then "
                     f"echo 'block line {number} exited '$status', not {want}' >&2; exit 99; fi")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("page", "block"), page_blocks(), ids=[block_id(*pair) for pair in page_blocks()])
def test_the_block_runs_as_printed(page: Path, block: str, tmp_path: Path, subprocess_env: dict[str, str]) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    for name, source in _FILE_BLOCK.findall(page.read_text()):
        (tmp_path / name).write_text(source)
    env = {**subprocess_env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for name in ("PYTEST_XDIST_WORKER", "GATHER_HARNESS_DIR", "GATHER_HARNESS_DATABASE"):
        env.pop(name, None)
    done = subprocess.run(["bash", "-c", checked_script(block)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=BLOCK_TIMEOUT_S)
    assert done.returncode == 0, f"{block}\n--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}"


def test_the_pages_have_the_blocks_this_test_promises() -> None:
    text = "\n".join(block for _, block in page_blocks())
    for command in ("--help", "check examples/", "report --variants", "replay", "harness.remote"):
        assert command in text, command
    readme = "\n".join(bash_blocks(README))
    assert "check examples/" in readme, "the README's own check commands are gone"
    files = dict(_FILE_BLOCK.findall(README.read_text()))
    assert "test_gathers.py" in files and "pytest test_gathers.py" in readme, "the README's pytest example is gone"


def test_the_case_notation_page_explains_the_notation_the_command_prints() -> None:
    assert notation.TEXT in (DOCS / "case-notation.md").read_text()


def test_the_readme_is_short_and_links_every_docs_page() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= README_LINES, f"README.md has {lines} lines; move sections to docs/ (at most {README_LINES})"
    linked = {(README.parent / target.partition("#")[0]).resolve() for target in relative_links(README)}
    unlinked = [str(page.relative_to(ROOT)) for page in sorted(DOCS.glob("*.md")) if page.resolve() not in linked]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"


def relative_links(page: Path) -> list[str]:
    """The targets of ``page``'s links outside code blocks that are not URLs (``#anchor`` ones included)."""
    text = _FENCED.sub("", page.read_text())
    return [target for target in _LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:", target)]


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives ``page``'s headings: lower case, punctuation dropped, spaces to hyphens."""
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#{1,6}\s+(.*?)\s*#*$", _FENCED.sub("", page.read_text()), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def broken_links(page: Path) -> list[str]:
    """``page``'s relative links to a file that does not exist, or to a heading its page lacks."""
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target} (no heading with that anchor)")
    return broken


@pytest.mark.parametrize("page", [README, *sorted(DOCS.rglob("*.md"))], ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert not broken_links(page), f"{page.relative_to(ROOT)}: {broken_links(page)}"


def test_the_link_check_finds_planted_broken_links(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## Reduce-scatter and all-to-all paths\n")
    page = tmp_path / "page.md"
    page.write_text("# Page\n\n[fine](other.md), [fine too](other.md#reduce-scatter-and-all-to-all-paths),\n"
                    "[here](#page), [web](https://example.org/x.md), [gone](missing.md), [no heading](other.md#paths),\n"
                    "[not here](#nowhere)\n\n```text\n[in a code block](missing-too.md)\n```\n")
    assert broken_links(page) == ["missing.md (no such file)", "other.md#paths (no heading with that anchor)",
                                  "#nowhere (no heading with that anchor)"]


def report_catalogue_rows() -> list[tuple[str, str]]:
    """(variant, claimed) of each row of the report page's catalogue tables (one per collective), in order."""
    text = (DOCS / "report.md").read_text()
    header = "| variant | claimed | verdict |"
    rows: list[tuple[str, str]] = []
    for start in (index for index in range(len(text)) if text.startswith(header, index)):
        table = text[start:].split("\n\n")[0].splitlines()[2:]
        rows += [(cells[1].strip(), cells[2].strip()) for cells in (row.split("|") for row in table)]
    return rows


def test_the_report_page_catalogue_table_is_the_catalogue() -> None:
    """Every catalogue variant has its row, in catalogue order, claiming what the catalogue says
    (as ``report --markdown`` prints it); the page shows no variant the catalogue lacks."""
    from harness.core.contract import COLLECTIVES
    from harness.report.catalogue_table import short_contract
    from harness.variants import CATALOGUE

    printed = sorted(CATALOGUE, key=lambda spec: list(COLLECTIVES).index(spec.contract.collective))  # a section each
    assert report_catalogue_rows() == [(spec.name, short_contract(spec.contract)) for spec in printed]
