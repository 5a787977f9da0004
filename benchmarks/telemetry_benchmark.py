"""What telemetry costs per selection: p50 / p95 of ``ToolFilterManager.select`` on the bundled
agent's 46 tools, telemetry off vs on (an SDK tracer and meter with in-memory exporters).

    python benchmarks/telemetry_benchmark.py [--runs 300]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

import yaml
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sk_toolfilter.agents.agent import open_toolset
from sk_toolfilter.agents.agent_file import parse_agent
from sk_toolfilter.telemetry import Telemetry, TelemetrySwitch

ROOT = Path(__file__).resolve().parents[1]
QUERIES = ["What files are in my workspace?", "convert 5 miles to km", "email bob the report", "what time is it"]


async def main(runs: int) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    data = yaml.safe_load((ROOT / "agent.yaml").read_text())
    for source in data["tools"]:
        if "init" in source:
            source["init"]["root"] = "/tmp/sk-toolfilter-telemetry-benchmark"
    async with await open_toolset(parse_agent(data, base_dir=ROOT)) as toolset:
        manager = toolset.manager
        print("| telemetry | select p50 ms | p95 ms |\n|---|---|---|")
        for label, switch in (("off", TelemetrySwitch()), ("on (SDK, in-memory export)", TelemetrySwitch(True))):
            manager.telemetry = Telemetry(switch)
            for query in QUERIES:  # warm: query vectors, token counts, tokenizer data
                await manager.select(query)
            times = []
            for i in range(runs):
                started = time.perf_counter()
                await manager.select(QUERIES[i % len(QUERIES)])
                times.append(1000 * (time.perf_counter() - started))
            times.sort()
            p95 = times[int(0.95 * (len(times) - 1))]
            print(f"| {label} | {statistics.median(times):.3f} | {p95:.3f} |")
            exporter.clear()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    asyncio.run(main(parser.parse_args().runs))
