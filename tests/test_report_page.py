"""report.html in a real browser (Debian's Chromium, headless): the summary cards and the chart's
axes are there, nothing loads from outside, no script error, and the page fits a 1,280 px window."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess

from sk_toolfilter.measure.report import write_report
from tests.conftest import require_server
from tests.test_agent import spec  # noqa: F401  (fixture)
from tests.test_report import report_and_tools  # noqa: F401  (fixture)

PROBE = """<script>
window.__errors = [];
window.addEventListener('error', e => window.__errors.push(String(e.message || e.type)));
window.addEventListener('load', () => {
  const width = document.documentElement.clientWidth;
  const probe = {
    clientWidth: width,
    scrollWidth: document.documentElement.scrollWidth,
    wider: [...document.querySelectorAll('main *')]
      .filter(e => e.getBoundingClientRect().right > width + 0.5).map(e => e.tagName).slice(0, 5),
    cards: [...document.querySelectorAll('.card')].map(c => c.innerText.replace(/\\s+/g, ' ').trim()),
    axisLabels: [...document.querySelectorAll('figure svg .axis-label')].map(t => t.textContent),
    ticks: [...document.querySelectorAll('figure svg .tick')].map(t => t.textContent),
    bars: document.querySelectorAll('figure svg rect').length,
    chartWidth: document.querySelector('figure svg').getBoundingClientRect().width,
    rows: document.querySelectorAll('tbody tr').length,
    resources: performance.getEntriesByType('resource').map(r => r.name),
    errors: window.__errors,
  };
  const out = document.createElement('pre');
  out.id = 'probe';
  out.textContent = JSON.stringify(probe);
  document.body.appendChild(out);
});
</script>"""


def open_in_chromium(page, tmp_path, probe: str = PROBE) -> dict:
    """What the probe script measured once Chromium laid the page out in a 1,280 × 900 window."""
    chromium = require_server(
        os.environ.get("SK_TOOLFILTER_CHROMIUM"),
        "Chromium",
        "run .ci/install-chromium DIR and set SK_TOOLFILTER_CHROMIUM=$(command -v chromium)",
    )
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text(encoding="utf-8").replace("<head>", "<head>" + probe, 1), encoding="utf-8")
    command = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1280,900",
        "--virtual-time-budget=10000",
        "--dump-dom",
        probed.as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    found = re.search(r'<pre id="probe">(.*?)</pre>', done.stdout, re.S)
    assert found, f"no probe in Chromium's DOM (exit {done.returncode}): {done.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))


async def test_the_report_page_has_summary_cards_a_labelled_chart_and_fits_1280_px(report_and_tools, tmp_path):  # noqa: F811
    report, _ = report_and_tools
    page = write_report(report, tmp_path / "out")["html"]
    probe = open_in_chromium(page, tmp_path)
    t = report.totals
    cards = " | ".join(probe["cards"])
    assert f"{t['tools_tokens_off']:,} tool tokens, filtering off" in cards
    assert f"{t['tools_tokens_on']:,} tool tokens, filtering on" in cards
    assert f"{t['saved_percent']:.1f}% tool tokens saved" in cards
    assert "2 / 2 queries whose expected tools were sent" in cards
    assert probe["axisLabels"] == ["Tool-schema tokens per request (o200k_base tokenizer)", "Sample query"]
    assert probe["ticks"][0] == "0" and len(probe["ticks"]) >= 3
    assert probe["bars"] == 2 * len(report.queries) + 2  # two bars per query, two legend keys
    assert probe["rows"] == len(report.queries)
    assert probe["scrollWidth"] <= probe["clientWidth"] <= 1280, probe  # no horizontal scrolling
    assert probe["wider"] == [] and probe["chartWidth"] <= probe["clientWidth"]
    assert probe["resources"] == [] and probe["errors"] == []  # self-contained, no script error


CHART_PROBE = """<script>
window.addEventListener('load', () => {
  const svg = document.querySelector('svg');
  const right = svg.viewBox.baseVal.width;
  const out = [...svg.querySelectorAll('rect, text')].filter(e => {
    const b = e.getBBox();
    return e.getAttribute('transform') === null && (b.x < -0.5 || b.x + b.width > right + 0.5);
  }).map(e => e.tagName + ':' + (e.textContent || e.getAttribute('width')));
  const pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify({outside: out, scrollWidth: document.documentElement.scrollWidth,
    clientWidth: document.documentElement.clientWidth});
  document.body.appendChild(pre);
});
</script>"""


def random_report(seed: int):
    import random

    from sk_toolfilter.measure.report import QueryReport, TokenReport

    rng = random.Random(seed)
    queries = []
    for i in range(rng.randint(1, 12)):
        off = rng.choice([0, 1, 40, 255, 900, 7000, 120_000])
        on = rng.choice([0, off, off * 3 + 500, rng.randint(0, 200_000)])  # "on" may exceed "off"
        text = rng.choice(["q", "x" * 300, "send an email " * 20, "天气" * 80]) + str(i)
        queries.append(QueryReport(text, 3, 2, off, on, off + 10, on + 10, ["T-" + "a" * rng.randint(1, 300)]))
    long = "N" * rng.choice([10, 200, 5000])
    return TokenReport(long, "model-" + long, "o200k_base", rng.randint(0, 5000), "hybrid-" + long, queries)


def test_the_chart_keeps_every_bar_and_label_inside_its_frame_on_random_data(tmp_path):
    for seed in range(6):
        report = random_report(seed)
        page = write_report(report, tmp_path / f"r{seed}")["html"]
        probe_page = tmp_path / f"chart{seed}.html"
        svg = page.parent / "chart.svg"
        probe_page.write_text(f"<!doctype html><html><head>{CHART_PROBE}</head><body>{svg.read_text()}</body></html>")
        chart = open_in_chromium(probe_page, tmp_path, probe="")
        assert chart["outside"] == [], (seed, chart)
        whole = open_in_chromium(page, tmp_path)
        assert whole["scrollWidth"] <= whole["clientWidth"] <= 1280, (seed, whole)  # the page's width promise


def test_on_a_big_catalog_the_chart_reads_on_a_log_axis_and_figures_print_without_a_stray_decimal():
    import re

    from sk_toolfilter.measure.report import (
        QueryReport,
        TokenReport,
        render_chart_svg,
        render_markdown,
        render_terminal,
    )

    queries = [QueryReport(f"q{i}", 1287, 5, 83_298, 300 + 10 * i, 83_400, 400, ["T-a"]) for i in range(4)]
    report = TokenReport("bfcl", "gpt-4o-mini", "o200k_base", 1287, "hybrid", queries)
    svg = render_chart_svg(report)
    assert "log scale" in svg
    widths = [float(w) for w in re.findall(r'<rect x="330" y="\d+" width="([\d.]+)" height="9" fill="#1e8449"', svg)]
    assert len(widths) == 4 and min(widths) > 100  # readable bars, not 1-2 px beside 83,298-token ones
    linear = TokenReport("a", "m", "o200k_base", 46, "hybrid", [QueryReport("q", 46, 3, 2886, 250, 3000, 400, ["T-a"])])
    assert "log scale" not in render_chart_svg(linear)
    assert "mean tools sent 5 of 1287" in render_terminal(report)
    assert "| mean tools sent | 1,287 | 5 | |" in render_markdown(report)
