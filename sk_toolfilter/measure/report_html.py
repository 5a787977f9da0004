"""The token-savings report as a page to share: summary cards, a chart with axes, the per-query table.

Self-contained (inline CSS and SVG, no script, no external request); it fits a 1,280 px window
without horizontal scrolling (long tool names and queries wrap; the chart scales to the page).
"""

from __future__ import annotations

import math
from html import escape
from typing import TYPE_CHECKING

from sk_toolfilter.basics.display import number, shorten
from sk_toolfilter.measure.token_report import caching_line, methods_used, picker_line

if TYPE_CHECKING:
    from sk_toolfilter.measure.token_report import QueryReport, TokenReport

OFF_COLOUR, ON_COLOUR = "#c0392b", "#1e8449"


def share_percent(share: float | None) -> str:
    """A share as a whole percentage ("n/a" when there is none)."""
    return "n/a" if share is None else f"{100 * share:.0f}%"


def nice_ticks(peak: float, count: int = 5) -> list[int]:
    """Round axis ticks from 0 to at least `peak` (steps of 1, 2 or 5 × a power of ten)."""
    if peak <= 0:
        return [0, 1]
    raw = peak / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return [int(step * i) for i in range(math.ceil(peak / step) + 1)]


LOG_AXIS_BELOW = 0.05
"""When every "filtering on" bar is under this share of the longest bar, the axis is logarithmic."""


def log_ticks(peak: float) -> list[int]:
    """Powers of ten from 1 to at least `peak` (a logarithmic axis)."""
    return [10**i for i in range(max(1, math.ceil(math.log10(max(peak, 10)))) + 1)]


def render_chart_svg(report: TokenReport, *, title: bool = True) -> str:
    """Grouped horizontal bars per query (filtering off vs on), with a labelled token axis."""
    bar, gap, left, plot = 10, 12, 330, 560
    top = 56 if title else 30
    rows = max(len(report.queries), 1)
    axis_y = top + rows * (2 * bar + gap)
    height, width = axis_y + 52, left + plot + 70
    # Both series set the axis: with few tools, "on" (discovery tools included) can exceed "off".
    peak = max([max(q.tools_tokens_off, q.tools_tokens_on) for q in report.queries] + [1])
    on_peak = max([q.tools_tokens_on for q in report.queries] + [0])
    logarithmic = 0 < on_peak < peak * LOG_AXIS_BELOW  # "on" bars would be a pixel or two wide: a log axis
    ticks = log_ticks(peak) if logarithmic else nice_ticks(peak)

    def position(value: float) -> float:
        if logarithmic:
            return plot * math.log10(max(value, 1)) / math.log10(ticks[-1])
        return plot * value / ticks[-1]

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" font-family="sans-serif" font-size="11" '
        f'aria-label="Tool-schema tokens per request, filtering off and on">',
    ]
    if title:
        parts.append(
            f'<text x="10" y="20" font-size="14" font-weight="bold">Tool-schema tokens per request: '
            f"{escape(shorten(report.agent, 30))} ({report.totals['saved_percent']:.1f}% saved)</text>"
        )
    legend_y = top - 22
    parts.append(
        f'<rect x="{left}" y="{legend_y}" width="10" height="10" fill="{OFF_COLOUR}"/>'
        f'<text x="{left + 14}" y="{legend_y + 9}">filtering off (every tool)</text>'
        f'<rect x="{left + 170}" y="{legend_y}" width="10" height="10" fill="{ON_COLOUR}"/>'
        f'<text x="{left + 184}" y="{legend_y + 9}">filtering on</text>'
    )
    for tick in ticks:  # grid lines and tick labels
        x = left + position(tick)
        parts.append(f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{axis_y}" stroke="#ddd"/>')
        parts.append(f'<text class="tick" x="{x:.1f}" y="{axis_y + 14}" text-anchor="middle">{tick:,}</text>')
    for i, q in enumerate(report.queries):
        y = top + i * (2 * bar + gap)
        label = escape(shorten(q.query, 46))
        parts.append(f'<text x="{left - 8}" y="{y + bar + 3}" text-anchor="end"><title>{escape(q.query)}</title>')
        parts.append(f"{label}</text>")
        for j, (value, colour) in enumerate(((q.tools_tokens_off, OFF_COLOUR), (q.tools_tokens_on, ON_COLOUR))):
            w = max(position(value), 1 if value else 0)
            parts.append(f'<rect x="{left}" y="{y + j * bar}" width="{w:.1f}" height="{bar - 1}" fill="{colour}"/>')
            parts.append(f'<text x="{left + w + 4:.1f}" y="{y + j * bar + bar - 2}">{value:,}</text>')
    parts += [
        f'<line x1="{left}" y1="{top - 4}" x2="{left}" y2="{axis_y}" stroke="#333"/>',
        f'<line x1="{left}" y1="{axis_y}" x2="{left + plot}" y2="{axis_y}" stroke="#333"/>',
        f'<text class="axis-label" x="{left + plot / 2:.0f}" y="{axis_y + 36}" text-anchor="middle" '
        f'font-size="12">Tool-schema tokens per request ({escape(report.encoding)} tokenizer'
        f"{'; log scale' if logarithmic else ''})</text>",
        f'<text class="axis-label" x="14" y="{(top + axis_y) / 2:.0f}" text-anchor="middle" font-size="12" '
        f'transform="rotate(-90 14 {(top + axis_y) / 2:.0f})">Sample query</text>',
        "</svg>",
    ]
    return "\n".join(parts)


_STYLE = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1c2833;background:#f4f6f7;
overflow-wrap:anywhere}
main{max-width:1200px;margin:0 auto;padding:24px}
h1{font-size:22px;margin:0 0 4px}
h2{font-size:17px;margin:28px 0 10px}
.meta{color:#566573;margin:0 0 18px;font-size:14px}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(170px,1fr));gap:12px}
.card{background:#fff;border-radius:8px;padding:14px 16px;box-shadow:0 1px 3px rgba(0,0,0,.12)}
.card .value{font-size:26px;font-weight:600}
.card .label{font-size:13px;color:#566573;margin-top:2px}
.card.good .value{color:#1e8449}
.card.bad .value{color:#c0392b}
figure{background:#fff;border-radius:8px;margin:0;padding:12px;box-shadow:0 1px 3px rgba(0,0,0,.12)}
figure svg{width:100%;height:auto;display:block}
table{width:100%;border-collapse:collapse;table-layout:fixed;background:#fff;font-size:13px;
box-shadow:0 1px 3px rgba(0,0,0,.12)}
th,td{padding:6px 8px;border-bottom:1px solid #e5e8e8;text-align:left;vertical-align:top;overflow-wrap:anywhere}
th{background:#eaeded}
td.num,th.num{text-align:right;width:78px}
th.num.wide{width:96px}
th.query{width:30%}
code{background:#f2f3f4;border-radius:3px;padding:1px 4px;margin:1px 2px;display:inline-block;font-size:12px;
max-width:100%}
.miss{color:#c0392b;font-weight:600}
"""


def _card(value: str, label: str, tone: str = "") -> str:
    return (
        f'<div class="card {tone}"><div class="value">{escape(value)}</div>'
        f'<div class="label">{escape(label)}</div></div>'
    )


def render_html(report: TokenReport) -> str:
    """The whole report as one self-contained HTML page."""
    picked = picker_line(report)
    rows = "".join(_query_row(q, with_picker=picked is not None) for q in report.queries)
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>Token savings: {escape(report.agent)}</title><style>{_STYLE}</style></head><body><main>"
        f"<h1>Token savings with sk-toolfilter: {escape(report.agent)}</h1>"
        f"<p class='meta'>{report.catalog_size} tools · model <code>{escape(report.model)}</code> · "
        f"tokenizer <code>{escape(report.encoding)}</code> · search <code>{escape(report.search_method)}</code> "
        f"(ranked with: {escape(methods_used(report))}) · "
        f"{len(report.queries)} sample queries. Tokens are counted on the <code>tools</code> array of the request "
        "body Semantic Kernel's OpenAI connector sent, filtering off (every tool) and on."
        + (f" {escape(picked)}." if picked is not None else "")
        + "</p>"
        f"<section class='cards'>{''.join(_cards(report))}</section>"
        f"<h2>Tool-schema tokens per request</h2><figure>{render_chart_svg(report, title=False)}</figure>"
        "<h2>Per query</h2><table><thead><tr><th class='query'>query</th><th class='num'>tools off</th>"
        "<th class='num'>tools on</th><th class='num'>tokens off</th><th class='num'>tokens on</th>"
        + ("<th class='num'>picker tokens</th>" if picked is not None else "")
        + "<th class='num wide'>expected sent</th><th>tools sent</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>{_conversation_section(report)}</main></body></html>"
    )


def _cards(report: TokenReport) -> list[str]:
    """The summary cards: tokens off and on, savings, tools per request, expected tools, the picker's net."""
    t = report.totals
    cards = [
        _card(f"{t['tools_tokens_off']:,}", "tool tokens, filtering off"),
        _card(f"{t['tools_tokens_on']:,}", "tool tokens, filtering on"),
        _card(f"{t['saved_percent']:.1f}%", "tool tokens saved", "good" if t["saved_percent"] > 0 else "bad"),
        _card(f"{t['body_saved_percent']:.1f}%", "whole-request tokens saved"),
        _card(
            f"{number(t['mean_tools_off'])} → {number(t['mean_tools_on'])}",
            f"tools per request (of {report.catalog_size})",
        ),
    ]
    if t["expected_tool_sent"]:
        sent, total = (int(n) for n in t["expected_tool_sent"].split("/"))
        tone = "good" if sent == total else "bad"
        cards.append(_card(f"{sent} / {total}", "queries whose expected tools were sent", tone))
    if picker_line(report) is not None:
        net = t["net_saved_percent"]
        tone = "good" if net > 0 else "bad"
        cards.append(_card(f"{net:.1f}%", "tools tokens saved net of the tool picker's tokens", tone))
    return cards


def _query_row(q: QueryReport, *, with_picker: bool) -> str:
    """One query's row of the per-query table."""
    expected = {True: "yes", False: '<span class="miss">no</span>', None: "–"}[q.expected_sent]
    missing = [name for name in q.expected if name not in q.selected]
    selected = "".join(f"<code>{escape(name)}</code>" for name in q.selected) or "(none)"
    if missing:
        selected += '<div class="miss">missing: ' + ", ".join(escape(m) for m in missing) + "</div>"
    return (
        f"<tr><td>{escape(q.query)}</td><td class='num'>{q.tools_off}</td><td class='num'>{q.tools_on}</td>"
        f"<td class='num'>{q.tools_tokens_off:,}</td><td class='num'>{q.tools_tokens_on:,}</td>"
        + (f"<td class='num'>{q.picker_tokens:,}</td>" if with_picker else "")
        + f"<td class='num'>{expected}</td><td>{selected}</td></tr>"
    )


def _conversation_section(report: TokenReport) -> str:
    """The sample conversation's table ("" without one)."""
    if not report.conversation:
        return ""
    c = report.conversation
    turns = "".join(
        f"<tr><td>{escape(turn)}</td><td class='num'>{tokens:,}</td>"
        f"<td>{''.join(f'<code>{escape(n)}</code>' for n in tools) or '(none)'}</td></tr>"
        for turn, tools, tokens in zip(c.turns, c.tools_per_request, c.tools_tokens_per_request, strict=True)
    )
    return (
        f"<h2>Sample conversation ({len(c.turns)} turns, <code>selection_mode: {escape(report.selection_mode)}"
        "</code>)</h2><p class='meta'>The tools prefix is unchanged from the previous request in "
        f"{share_percent(c.prefix_stable_share)} of requests (providers cache the prompt prefix). "
        f"{escape(caching_line(report))}.</p><table><thead><tr><th class='query'>turn</th>"
        f"<th class='num'>tool tokens</th><th>tools sent</th></tr></thead><tbody>{turns}</tbody></table>"
    )
