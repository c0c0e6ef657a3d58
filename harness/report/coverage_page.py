"""The coverage page: one self-contained HTML file showing what a run tested and where it failed.

One static file, no network, no script: the W x dtype matrix as a heat map (examples per
cell; a failing cell links to its finding), the other axes of :data:`harness.strategies.space.AXES`
as bar charts, the findings with their case lines and repro paths, and the run's header.
Plain HTML and CSS only, so it opens anywhere (a CI artifact, a GPU box's scp'd file).

A long fuzz run rewrites it as it goes (:func:`write` is atomic, so a browser never loads
half a page); while the header's ``status`` is ``running`` the page asks the browser to
reload it every :data:`REFRESH_S` seconds, and every page says when it was written.
"""

from __future__ import annotations

import datetime
import math
import os
from html import escape

from harness.search.coverage import Coverage, Tally, world_label
from harness.settings import files
from harness.strategies.space import AXES

#: How often a browser reloads a page whose run is still going.
REFRESH_S = 30
#: The matrix's two colours: few examples, many examples (log scale in between).
_FEW = (232, 240, 252)
_MANY = (31, 78, 155)
#: Axes the matrix already shows.
_MATRIX_AXES = ("W", "dtype")

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d2330; margin: 24px auto;
       max-width: 1340px; padding: 0 24px; background: #fafbfc; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 10px; }
h3 { font-size: 14px; margin: 0 0 2px; }
code, pre { font: 12.5px/1.4 ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
.status { display: flex; flex-wrap: wrap; gap: 10px; align-items: center; margin: 6px 0 14px; }
.badge { padding: 3px 10px; border-radius: 12px; font-weight: 600; font-size: 13px; color: #fff; }
.running { background: #2f6fd0; } .finished { background: #4b5563; }
.pass { background: #1f8a4c; } .fail { background: #c62828; }
.muted { color: #667085; }
dl.header { display: grid; grid-template-columns: repeat(auto-fill, minmax(210px, 1fr)); gap: 8px 20px; margin: 0;
            background: #fff; border: 1px solid #e3e7ee; border-radius: 8px; padding: 10px 14px; }
dl.header dt { color: #667085; font-size: 12px; }
dl.header dd { margin: 0; font-family: ui-monospace, Menlo, Consolas, monospace; overflow-wrap: anywhere; }
.totals { font-size: 15px; margin: 14px 0 0; }
.missing { margin: 6px 0 0; } .missing code { background: #fff4d6; color: #7a5200; padding: 1px 5px; border-radius: 4px;
                                                margin-right: 4px; white-space: nowrap; }
table.heat { border-collapse: separate; border-spacing: 3px; }
table.heat th { font-weight: 600; font-size: 12.5px; padding: 2px 6px; color: #344054; }
table.heat thead th { text-align: center; } table.heat tbody th { text-align: right; }
table.heat td { width: 74px; height: 40px; text-align: center; border-radius: 5px; font-variant-numeric: tabular-nums;
                font-size: 14px; font-weight: 600; }
table.heat td.out { background: #f0f1f3; }
table.heat td.never { background: repeating-linear-gradient(45deg, #fff4d6, #fff4d6 5px, #ffe7a8 5px, #ffe7a8 10px);
                      color: #9a6700; }
table.heat td.fail { outline: 3px solid #c62828; outline-offset: -3px; }
table.heat td.total { background: none; color: #475467; font-weight: 500; }
table.heat a { color: inherit; text-decoration: none; display: block; }
.x { display: block; font-size: 11px; line-height: 1.1; color: #fff; background: #c62828; border-radius: 3px;
     margin: 1px 6px 0; }
.legend { display: flex; flex-wrap: wrap; gap: 18px; margin: 8px 0 0; font-size: 12.5px; color: #475467; }
.swatch { display: inline-block; width: 16px; height: 12px; border-radius: 3px; vertical-align: -1px; margin-right: 5px; }
.finding { background: #fff; border: 1px solid #f1c4c4; border-left: 5px solid #c62828; border-radius: 6px;
           padding: 10px 14px; margin: 0 0 10px; }
.finding pre { background: #f6f7f9; padding: 8px; border-radius: 4px; white-space: pre-wrap; word-break: break-word;
               margin: 6px 0; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(300px, 1fr)); gap: 12px; }
.axis { background: #fff; border: 1px solid #e3e7ee; border-radius: 8px; padding: 10px 12px; }
.axis p { margin: 0 0 6px; font-size: 12px; color: #667085; }
.axis table { width: 100%; border-collapse: collapse; font-size: 12.5px; }
.axis th { text-align: left; font-weight: 500; white-space: nowrap; padding: 1px 8px 1px 0; width: 1%; }
.axis td.n { text-align: right; white-space: nowrap; padding-left: 8px; width: 1%; font-variant-numeric: tabular-nums; }
.track { display: flex; height: 12px; background: #eef1f5; border-radius: 3px; overflow: hidden; }
.ok { background: #3f72c0; } .bad { background: #c62828; }
.never-bar { display: block; height: 12px; line-height: 12px; border-radius: 3px; padding-left: 6px; white-space: nowrap;
             background: #fff4d6; color: #9a6700; font-weight: 600; font-size: 11px; }
footer { margin: 28px 0 8px; font-size: 12px; color: #667085; }
"""


def render(coverage: Coverage, header: dict[str, str], findings: list[dict]) -> str:
    """The whole page as text.

    - ``header``: the run's facts in display order (target, contract, backend/device, torch,
      seed, duration, examples, ...); ``status`` (``running`` or ``finished``) shows as a badge.
    - ``findings``: dicts with ``property``, ``kind``, ``case`` (``Case.to_dict()``),
      ``case_line``, ``message`` and ``repro`` (a path or ``None``), as ``Finding.to_json()``.
    """
    status = header.get("status", "finished")
    title = f"gather-harness coverage: {header.get('target', 'run')}"
    refresh = f'<meta http-equiv="refresh" content="{REFRESH_S}">' if status == "running" else ""
    body = [_banner(title, status, header, findings), _totals(coverage), _matrix(coverage, findings),
            _findings(findings, status), _axes(coverage), _footer(status)]
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">{refresh}<title>{escape(title)}</title>'
            f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def write(path: str | os.PathLike, coverage: Coverage, header: dict[str, str], findings: list[dict]) -> None:
    """Write the page atomically: a browser or a poller reading ``path`` never sees half of it."""
    files.write_atomically(path, render(coverage, header, findings))


# ---------------------------------------------------------------------------------------------
# the top


def _banner(title: str, status: str, header: dict[str, str], findings: list[dict]) -> str:
    verdict = (f'<span class="badge fail">{len(findings)} finding{"" if len(findings) == 1 else "s"}</span>'
               if findings else f'<span class="badge pass">no counterexample{" yet" if status == "running" else ""}'
               "</span>")
    rows = "".join(f"<div><dt>{escape(key)}</dt><dd>{escape(str(value))}</dd></div>"
                   for key, value in header.items() if key != "status")
    return (f"<header><h1>{escape(title)}</h1>"
            f'<div class="status"><span class="badge {_css_class(status)}">{escape(status)}</span>{verdict}'
            f'<span class="muted">updated {_now()}</span></div>'
            f'<dl class="header">{rows}</dl></header>')


def _css_class(status: str) -> str:
    return status if status in ("running", "finished") else "finished"


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _totals(coverage: Coverage) -> str:
    """One line of totals, then the axis values and the pairs of path values never reached, named
    (the matrix shows the cells)."""
    reached, possible = coverage.cells_reached()
    failing = (f' · <strong style="color:#c62828">{coverage.failures:,} failing examples</strong>'
               if coverage.failures else "")
    never = [label for label in coverage.never_reached() if not label.startswith("W=")]
    missing = "".join(f"<code>{escape(label)}</code>" for label in never) if never else "none"
    pairs, pairs_possible = coverage.pairs_reached()
    gone = coverage.pairs_missing()
    unpaired = "".join(f"<code>{escape(label)}</code>" for label in gone) if gone else "none"
    return (f'<p class="totals"><strong>{coverage.examples:,}</strong> examples{failing} · '
            f"<strong>{reached}</strong> of {possible} W × dtype cells reached · "
            f"<strong>{pairs}</strong> of {pairs_possible} pairs of path values reached</p>"
            f'<p class="missing">Other axis values never reached: {missing}</p>'
            f'<p class="missing">Pairs of path values ({escape(", ".join(coverage.domain()))}) never reached: '
            f"{unpaired}</p>")


# ---------------------------------------------------------------------------------------------
# the matrix


def _matrix(coverage: Coverage, findings: list[dict]) -> str:
    """The heat map: W rows (a run of world sizes never reached shares one), dtype columns,
    totals at the right and bottom."""
    dtypes = coverage.dtype_range()
    most = max((tally.examples for tally in coverage.cells.values()), default=0)
    head = "<tr><th></th>" + "".join(f"<th>{escape(dtype)}</th>" for dtype in dtypes) + "<th>all</th></tr>"
    rows = []
    for lo, hi in coverage.matrix_rows():
        if lo == hi:
            cells = "".join(_cell(coverage, lo, dtype, most, findings) for dtype in dtypes)
        else:
            cells = f'<td class="never" colspan="{len(dtypes)}">0: never reached at any dtype</td>'
        total = sum(coverage.cell(w, dtype)[0] for w in range(lo, hi + 1) for dtype in dtypes)
        rows.append(f'<tr><th>{world_label(lo, hi)}</th>{cells}<td class="total">{total:,}</td></tr>')
    totals = "".join(f'<td class="total">{_column_total(coverage, dtype):,}</td>' for dtype in dtypes)
    foot = f'<tr><th>all</th>{totals}<td class="total">{coverage.examples:,}</td></tr>'
    return ('<section id="matrix"><h2>Examples per world size × dtype</h2>'
            f'<table class="heat"><thead>{head}</thead><tbody>{"".join(rows)}</tbody><tfoot>{foot}</tfoot></table>'
            f"{_legend()}</section>")


def _column_total(coverage: Coverage, dtype: str) -> int:
    return sum(tally.examples for (_, column), tally in coverage.cells.items() if column == dtype)


def _cell(coverage: Coverage, w: int, dtype: str, most: int, findings: list[dict]) -> str:
    tally = coverage.cells.get((w, dtype), Tally())
    where = f'data-w="{w}" data-dtype="{escape(dtype)}"'
    if not tally.examples:
        if coverage.in_space(w, dtype):
            return f'<td class="never" {where} title="W={w} × {escape(dtype)}: never reached">0</td>'
        return f'<td class="out" {where} title="W={w} × {escape(dtype)}: outside this run\'s space"></td>'
    tip = f"W={w} × {dtype}: {tally.examples:,} examples"
    style = _heat(tally.examples, most)
    if not tally.failures:
        return f'<td class="hit" {where} style="{style}" title="{escape(tip)}">{tally.examples:,}</td>'
    number, target = _finding_for(w, dtype, tally, findings)
    tip += f", {tally.failures:,} failing ({', '.join(sorted(tally.failed))})"
    badge = f"✗ {tally.failures:,}" + (f" · #{number}" if number else "")
    return (f'<td class="hit fail" {where} style="{style}" title="{escape(tip)}"><a href="{target}">'
            f'{tally.examples:,}<span class="x">{badge}</span></a></td>')


def _finding_for(w: int, dtype: str, tally: Tally, findings: list[dict]) -> tuple[int | None, str]:
    """The finding a failing cell links to: the one whose minimal case lies in the cell (its
    number is shown), else the first one of a property that failed there, else the list."""
    for number, finding in enumerate(findings, 1):
        case = finding["case"]
        if len(case["ranks"]) == w and case["dtype"] == dtype:
            return number, f"#finding-{number}"
    for number, finding in enumerate(findings, 1):
        if finding["property"] in tally.failed:
            return None, f"#finding-{number}"
    return None, "#findings"


def _heat(examples: int, most: int) -> str:
    """Background on a log scale from :data:`_FEW` to :data:`_MANY`; white text on dark cells."""
    t = math.log1p(examples) / math.log1p(max(most, 1))
    red, green, blue = (round(a + (b - a) * t) for a, b in zip(_FEW, _MANY))
    return f"background: rgb({red},{green},{blue}); color: {'#fff' if t > 0.55 else '#1d2330'}"


def _legend() -> str:
    scale = f"background: linear-gradient(90deg, rgb{_FEW}, rgb{_MANY}); width: 60px"
    return ('<div class="legend">'
            f'<span><span class="swatch" style="{scale}"></span>examples (log scale)</span>'
            '<span><span class="swatch" style="background:#ffe7a8"></span>0: in the space, never reached</span>'
            '<span><span class="swatch" style="background:#f0f1f3"></span>outside the space</span>'
            '<span><span class="swatch" style="outline:3px solid #c62828;outline-offset:-3px"></span>'
            "✗ failing examples (shrinking included); #n: where finding n's minimal case lies</span></div>")


# ---------------------------------------------------------------------------------------------
# findings


def _findings(findings: list[dict], status: str) -> str:
    if not findings:
        none = "None so far." if status == "running" else "None: no example broke a property."
        return f'<section id="findings"><h2>Findings</h2><p>{none}</p></section>'
    return (f'<section id="findings"><h2>Findings ({len(findings)})</h2>'
            + "".join(_finding(number, finding) for number, finding in enumerate(findings, 1)) + "</section>")


def _finding(number: int, finding: dict) -> str:
    case = finding["case"]
    repro = (f"<code>python {escape(finding['repro'])}</code>" if finding.get("repro")
             else '<span class="muted">no repro script</span>')
    return (f'<article class="finding" id="finding-{number}">'
            f"<h3>#{number} {escape(finding['property'])} <span class=\"muted\">({escape(finding['kind'])})</span> "
            f'<span class="muted">· W={len(case["ranks"])} × {escape(case["dtype"])} · '
            '<a href="#matrix">matrix</a></span></h3>'
            f"<pre>{escape(finding['case_line'])}</pre>"
            f"<details><summary>what each rank got</summary><pre>{escape(finding['message'])}</pre></details>"
            f"<p>repro: {repro}</p></article>")


# ---------------------------------------------------------------------------------------------
# the other axes


def _axes(coverage: Coverage) -> str:
    cards = [_axis(coverage, name) for name in AXES if name not in _MATRIX_AXES]
    return ('<section id="axes"><h2>Other axes</h2>'
            '<p class="muted">Bars are shares of all examples; red: failing examples.</p>'
            f'<div class="grid">{"".join(card for card in cards if card)}</div></section>')


def _axis(coverage: Coverage, name: str) -> str:
    """One card: a bar per value (expected ones included), or nothing for an axis never recorded
    and not in the space (the cotangent axes of a run without gradients)."""
    tallies = coverage.axis(name)
    if not tallies:
        return ""
    rows = "".join(_bar(value, tally, coverage.examples) for value, tally in tallies.items())
    return (f'<div class="axis" id="axis-{name.replace(" ", "-")}"><h3>{escape(name)}</h3>'
            f"<p>{escape(AXES[name])}</p><table>{rows}</table></div>")


def _bar(value: str, tally: Tally, examples: int) -> str:
    if not tally.examples:
        return (f'<tr><th>{escape(value)}</th><td><span class="never-bar">never reached</span></td>'
                '<td class="n">0</td></tr>')
    ok = 100 * (tally.examples - tally.failures) / max(examples, 1)
    bad = 100 * tally.failures / max(examples, 1)
    failing = f' <span style="color:#c62828">✗{tally.failures:,}</span>' if tally.failures else ""
    share = 100 * tally.examples / max(examples, 1)
    return (f'<tr><th>{escape(value)}</th><td><div class="track"><div class="ok" style="width:{ok:.2f}%"></div>'
            f'<div class="bad" style="width:{bad:.2f}%"></div></div></td>'
            f'<td class="n">{tally.examples:,} <span class="muted">{share:.0f}%</span>{failing}</td></tr>')


def _footer(status: str) -> str:
    again = f" This run is still going: the page reloads every {REFRESH_S} s." if status == "running" else ""
    return (f"<footer>Written by gather-harness at {_now()}. Self-contained: no network, no script.{again}"
            "</footer>")


__all__ = ["REFRESH_S", "render", "write"]
