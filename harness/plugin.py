"""pytest plugin: gathers checked as tests, like ``python -m harness check``.

Loaded for every pytest run where gather-harness is installed, so without a target or the
fixture it adds nothing: no items, no header lines, no torch import.  Two ways in: the
``gather_check`` fixture (:func:`harness.check_gather` with the session's ``--gather-*`` budget
options filled in), and ``pytest --gather-impl TARGET`` (or ``$GATHER_IMPL``), one more test item.
A failure reads like any test failure, verdict first, with no harness source; the run ends with
each failed check's verdict, case and repro.  The options are ``check``'s, spelled ``--gather-*``,
generated from :mod:`harness.settings.options`; bad ones stop the run before collection.
Usage: docs/checking.md.
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
    """A failed check's few summary lines ride on its report (under xdist too) for the end-of-run section."""
    report = yield
    summary = summary_of(call.excinfo.value) if call.excinfo is not None else None
    if summary is not None:
        report.user_properties.append(("gather_failure", summary))
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    """After the run: how each check called its target (``-v``), what its examples covered, and
    every failed check's verdict, case and repro, wrapped to the terminal (pytest's short summary
    cuts its one line at the terminal's width: at 80 columns, before the verdict)."""
    failures = []
    for key in ("passed", "failed"):
        for report in terminalreporter.stats.get(key, []):
            properties = dict(getattr(report, "user_properties", []))
            if report.when != "call":
                continue
            if properties.get("gather_call_notes") and config.get_verbosity() > 0:
                terminalreporter.write_sep("-", f"gather-harness: how {report.nodeid} called its target")
                for note in properties["gather_call_notes"]:
                    _write_wrapped(terminalreporter, f"note: {note}")
            if properties.get("gather_coverage"):
                terminalreporter.write_sep("-", "gather-harness coverage")
                terminalreporter.write_line(str(properties["gather_coverage"]))
            if properties.get("gather_failure"):
                failures.append((report.nodeid, properties["gather_failure"]))
    if failures:
        terminalreporter.write_sep("=", "gather-harness: failed checks")
        for nodeid, lines in failures:
            _write_wrapped(terminalreporter, f"FAILED {nodeid}")
            for line in lines:
                _write_wrapped(terminalreporter, line)


def _write_wrapped(terminalreporter: pytest.TerminalReporter, line: str) -> None:
    """``line`` folded to the terminal's width, its continuation indented under its first word."""
    import textwrap

    indent = " " * (len(line) - len(line.lstrip()) + 4)
    width = max(40, getattr(getattr(terminalreporter, "_tw", None), "fullwidth", 80))  # pytest's own: COLUMNS
    for part in textwrap.wrap(line, width=width - 1, subsequent_indent=indent, break_on_hyphens=False) or [""]:
        terminalreporter.write_line(part)


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
        source = targets.source_file(options.target) or str(self.path)
        for note in api.note_warnings(report):  # attributed to the target's own file
            warnings.warn_explicit(note, api.GatherNote, source, 1)
        if report.verdict == "fail":
            from harness.report.text import failure_summary, failure_text

            rerun = [shlex.join(["pytest", *self.config.invocation_params.args]), api.check_command(options)]
            raise check_failed(failure_text(report, full_stacks=options.full_stacks, rerun=rerun,
                                            how_to_show="--gather-full-stacks"), failure_summary(report))

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: str | None = None
    ) -> str | TerminalRepr:
        """The counterexample or the reason the target is unusable, without a harness traceback.

        Text, so pytest's short summary shows its first line (the verdict), under xdist too.
        """
        from harness.core.errors import Misfit, PoolError, TargetError

        if summary_of(excinfo.value) is not None or isinstance(excinfo.value, (UsageError, TargetError, Misfit)):
            return str(excinfo.value)
        if isinstance(excinfo.value, PoolError):  # the harness could not run: no verdict on the target
            return f"harness error: {excinfo.value}"
        return super().repr_failure(excinfo, style=style)  # type: ignore[arg-type]

    def reportinfo(self) -> tuple[os.PathLike[str] | str, int | None, str]:
        return self.path, None, f"gather-harness check {self.config.stash[_OPTIONS].target}"
