"""pytest plugin: gathers checked as tests, like ``python -m harness check``.

Loaded for every pytest run where gather-harness is installed, so without a target or the
fixture it adds nothing: no items, no header lines, no torch import.  Two ways in: the
``gather_check`` fixture (:func:`harness.check_gather` with the session's ``--gather-*`` budget
options filled in), and ``pytest --gather-impl TARGET`` (or ``$GATHER_IMPL``), one more test item.
A failed check is told once, with pytest's own means: its verdict is the ``E`` line of the
failure's body and the short summary's line, its detail a section of that body folded to the
terminal's width (:func:`pytest_runtest_makereport`), with no harness source.  The options are
``check``'s, spelled ``--gather-*``, generated from :mod:`harness.settings.options`; bad ones
stop the run before collection.  Usage: docs/checking.md.
"""

from __future__ import annotations

import os
import shlex
import warnings
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

import pytest

from harness.core.errors import UsageError, check_failed, summary_of
from harness.ranks import targets
from harness.settings import files, profiles
from harness.settings.options import OPTIONS, add_to_pytest, option_value

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr

    from harness.frontends.api import CheckOptions
    from harness.search.results import CheckReport

TARGET_ENV = "GATHER_IMPL"
_OPTIONS: pytest.StashKey[CheckOptions] = pytest.StashKey()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gather-harness", "check a gather(x, dim) implementation (gather-harness)")
    group.addoption("--gather-impl", metavar="TARGET",
                    help=f"package.module:attr or path/to/file.py:attr to check (or ${TARGET_ENV})")
    add_to_pytest(group)


def pytest_configure(config: pytest.Config) -> None:
    """Turn the options into a check, or do nothing when no target is selected."""
    target = config.getoption("gather_impl") or os.environ.get(TARGET_ENV)
    if not target:
        return
    from harness.core.errors import TargetError
    from harness.frontends import api  # imports torch: only when a target is selected

    values = {option.name: config.getoption(f"gather_{option.spelled.replace('-', '_')}")
              for option in OPTIONS if option.plugin and not option.fixture}
    try:
        profile = _our_profile(config) or profiles.default_name()
        config.stash[_OPTIONS] = api.bind({**values, **_fixture_options(config), "profile": profile},
                                          api.target_of(target), prefix="--gather-")
    except (UsageError, TargetError) as exc:
        raise pytest.UsageError(f"gather-harness: {exc}") from None


def _fixture_options(config: pytest.Config) -> dict[str, Any]:
    """The session's budget options (:attr:`harness.settings.options.Option.fixture`) as ``check_gather``
    keywords: those given, and the repro folder under the rootdir."""
    given = {option.name: option_value(option, config.getoption(f"gather_{option.name}"))
             for option in OPTIONS if option.fixture}
    given = {name: value for name, value in given.items() if value not in (None, False)}
    return {"repro_dir": str(config.rootpath / files.default_path("repros")), **given}


def _our_profile(config: pytest.Config) -> str | None:
    """``--hypothesis-profile`` when it names one of the project's profiles (another project's own
    profile, or Hypothesis' ``default``, says nothing about ranks: the default one applies)."""
    chosen = config.getoption("hypothesis_profile", None)
    return chosen if chosen in profiles.WORLD_SIZES else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport,
                                                                                          pytest.TestReport]:
    """A failed check told once: the body pytest makes for the exception's first line alone, the
    verdict as its crash message (the short summary's, without ``AssertionError: gather check
    failed:``, as pytest shows its own ``assert``), and the detail
    (:func:`harness.report.text.failure_summary`) as a section of the body, folded to the width.
    A report's sections travel under xdist and land in JUnit XML; the whole text under ``E`` would
    be printed again, whole, on the summary line of a CI run (pytest cuts it only off CI)."""
    report = yield
    summary = summary_of(call.excinfo.value) if call.excinfo is not None else None
    if call.excinfo is not None and summary is not None:
        report.longrepr = _told_once(item, call.excinfo, summary)
    return report


def _told_once(item: pytest.Item, excinfo: pytest.ExceptionInfo[BaseException],
               summary: list[str]) -> str | TerminalRepr:
    from harness.report.text import fold

    verdict, *detail = summary
    first_line = check_failed(str(excinfo.value).partition("\n")[0], summary).with_traceback(excinfo.tb)
    longrepr = item.repr_failure(pytest.ExceptionInfo.from_exception(first_line))
    addsection = getattr(longrepr, "addsection", None)  # an exception's repr (ExceptionRepr), not text
    if addsection is None:
        return longrepr
    width = _terminal_width(item.config)
    addsection("gather-harness: the counterexample", "\n".join(part for line in detail for part in fold(line, width)))
    reprcrash = getattr(longrepr, "reprcrash", None)
    if reprcrash is not None:
        reprcrash.message = verdict
    return longrepr


def _terminal_width(config: pytest.Config) -> int:
    """The width pytest writes at (``COLUMNS``, else the terminal's, else 80), on an xdist worker too."""
    import shutil

    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        return int(config.get_terminal_writer().fullwidth)
    width = shutil.get_terminal_size((80, 24)).columns
    return width if width >= 40 else 80


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    """After the run: how each check called its target (``-v``) and what its examples covered."""
    for key in ("passed", "failed"):
        for report in terminalreporter.stats.get(key, []):
            properties = dict(getattr(report, "user_properties", []))
            if report.when != "call":
                continue
            if properties.get("gather_call_notes") and config.get_verbosity() > 0:
                from harness.report.text import fold

                terminalreporter.write_sep("-", f"gather-harness: how {report.nodeid} called its target")
                for note in properties["gather_call_notes"]:
                    for part in fold(f"note: {note}", config.get_terminal_writer().fullwidth):
                        terminalreporter.write_line(part)
            if properties.get("gather_coverage"):
                terminalreporter.write_sep("-", "gather-harness coverage")
                terminalreporter.write_line(str(properties["gather_coverage"]))


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    options = config.stash.get(_OPTIONS, None)
    if options is None:
        return None
    contract = options.contract
    low, high = contract.world_sizes
    from harness.ranks.targets import shown_target

    return [f"gather-harness: checking {shown_target(options.target)}",
            f"  contract {contract.describe()}; backend {contract.backend}/{contract.device}; "
            f"world sizes {low}-{high}; hypothesis profile {options.profile}; seed {options.seed or 0} "
            f"(fixed: --gather-seed N for another)"]


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """The check item is collected with the session's own top-level nodes: counted and listed by
    ``--collect-only``, selectable by ``-k``/``-m``, and the same on every xdist worker."""
    report = yield
    options = collector.config.stash.get(_OPTIONS, None)
    if isinstance(collector, pytest.Session) and options is not None and report.passed:
        from harness.ranks.targets import shown_target

        name = f"check[{shown_target(options.target)}]"
        report.result.append(GatherCheckItem.from_parent(collector, name=name, nodeid=f"gather-harness::{name}"))
    return report


@pytest.fixture
def gather_check(request: pytest.FixtureRequest) -> Callable[..., CheckReport]:
    """``gather_check(target, **options)``: :func:`harness.check_gather` inside a test, with the
    session's ``--gather-*`` budget options where the call gives none (see the module docstring)."""
    from harness.frontends import api

    session = {**_fixture_options(request.config), "profile": _our_profile(request.config)}

    def check(gather: Any, **keywords: Any) -> CheckReport:
        __tracebackhide__ = True
        report = api.check_gather(gather, **{**{k: v for k, v in session.items() if v is not None}, **keywords})
        request.node.user_properties.append(("gather_call_notes", list(report.call_notes)))
        return report

    return check


class GatherCheckItem(pytest.Item):
    """One item that runs the whole check for the ``--gather-impl`` target."""

    def runtest(self) -> None:
        from harness.frontends import api
        from harness.pool.pool import shared_pool

        options = self.config.stash[_OPTIONS]
        pool = shared_pool()
        report = api.execute(options, pool, api.prepare(options, pool))
        api.warn_unattributed(report)
        self.user_properties += [("gather_verdict", report.verdict), ("gather_examples", report.examples),
                                 ("gather_coverage", report.coverage.summary()),
                                 ("gather_call_notes", list(report.call_notes))]
        html = self.config.getoption("gather_html")
        if html:
            from harness.report import coverage_page
            from harness.report.text import finding_dicts, page_header

            coverage_page.write(html, report.coverage, page_header(report), finding_dicts(report))
        if report.verdict == "fail":  # its notes are in its text: not told again as warnings
            from harness.report.text import failure_summary, failure_text

            rerun = [shlex.join(["pytest", *self.config.invocation_params.args]), api.check_command(options)]
            raise check_failed(failure_text(report, full_stacks=options.full_stacks, rerun=rerun,
                                            how_to_show="--gather-full-stacks"),
                               failure_summary(report, full_stacks=options.full_stacks, rerun=rerun[-1]))
        source = targets.source_file(options.target) or str(self.path)
        for note in api.note_warnings(report):  # attributed to the target's own file
            warnings.warn_explicit(note, api.GatherNote, source, 1)

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: str | None = None
    ) -> str | TerminalRepr:
        """The verdict (:func:`pytest_runtest_makereport` adds the detail) or the reason the target is
        unusable, without a harness traceback."""
        from harness.core.errors import Misfit, PoolError, TargetError

        if summary_of(excinfo.value) is not None:
            return super().repr_failure(excinfo, style="value")
        if isinstance(excinfo.value, (UsageError, TargetError, Misfit)):
            return str(excinfo.value)
        if isinstance(excinfo.value, PoolError):  # the harness could not run: no verdict on the target
            return f"harness error: {excinfo.value}"
        return super().repr_failure(excinfo, style=style)  # type: ignore[arg-type]

    def reportinfo(self) -> tuple[os.PathLike[str] | str, int | None, str]:
        return self.path, None, f"gather-harness check {self.config.stash[_OPTIONS].target}"
