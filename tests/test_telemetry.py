"""Every selection is visible in the app's OpenTelemetry trace (SK's own switch turns it on): one
span per model request, child of Semantic Kernel's agent span, with the tools offered, their
scores and the budget; metrics for latency, tools offered and tokens saved; the user's words only
when the app opts in to sensitive data. Each case runs in a fresh process (SK reads its switch at
import, and the global providers can be set once)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sk_toolfilter.telemetry import TelemetrySwitch

ROOT = Path(__file__).resolve().parents[1]
SECRET_WORDS = "my card is 4111-1111-1111-1111, I fly to Zanzibar"

TURN = textwrap.dedent(
    """
    import asyncio, json, sys
    import yaml
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))

    from sk_toolfilter.agents.agent import load_agent
    from sk_toolfilter.agents.agent_file import parse_agent
    from sk_toolfilter.measure.wire import RecordingTransport, text_reply, tool_call_reply
    from sk_toolfilter.measure.wire import offline_agent_framework_client, offline_chat_service

    data = yaml.safe_load(open("agent.yaml"))
    data["tool_filtering"]["search_method"] = "bm25"
    for source in data["tools"]:
        if "init" in source:
            source["init"]["root"] = sys.argv[2]

    async def main():
        transport = RecordingTransport(
            [tool_call_reply(("Files-write_file", {"path": "todo.txt", "content": "milk"})), text_reply("Saved.")]
        )
        spec = parse_agent(data, base_dir=".")
        if sys.argv[3] == "agent-framework":
            client = offline_agent_framework_client(transport)
            async with await load_agent(spec, chat_service=client, framework="agent-framework") as a:
                await a.agent.run(sys.argv[1])
        else:
            async with await load_agent(spec, chat_service=offline_chat_service(transport)) as a:
                await a.agent.get_response(messages=sys.argv[1])

    asyncio.run(main())
    out = {
        "spans": [
            {
                "name": s.name,
                "id": s.context.span_id,
                "parent": s.parent.span_id if s.parent else None,
                "attributes": dict(s.attributes or {}),
            }
            for s in spans.get_finished_spans()
        ],
        "metrics": {
            m.name: [
                dict(p.attributes or {}) | {"count": getattr(p, "count", None), "sum": getattr(p, "sum", None)}
                | {"value": getattr(p, "value", None)}
                for p in m.data.data_points
            ]
            for rm in reader.get_metrics_data().resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
        },
    }
    print(json.dumps(out, default=list))
    """
)


def run_turn(tmp_path, env: dict[str, str], framework: str = "semantic-kernel") -> dict:
    message = f"Write the file todo.txt with: buy milk ({SECRET_WORDS})."
    done = subprocess.run(
        [sys.executable, "-c", TURN, message, str(tmp_path / "sandbox"), framework],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# Each framework's own switch, and the span its function-calling loop runs the model calls in.
FRAMEWORKS = {
    "semantic-kernel": ("SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS", "AutoFunctionInvocationLoop"),
    "agent-framework": ("ENABLE_INSTRUMENTATION", "invoke_agent atlas"),
}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_filtered_turn_is_two_selection_spans_under_the_agent_span_with_metrics(tmp_path, framework):
    switch, loop_span = FRAMEWORKS[framework]
    out = run_turn(tmp_path, {switch: "true"}, framework)
    spans = out["spans"]
    selections = [s for s in spans if s["name"] == "select_tools"]
    assert len(selections) == 2  # one per model request of the function-calling loop
    by_id = {s["id"]: s for s in spans}
    for span in selections:
        ancestors, parent = [], by_id.get(span["parent"])
        while parent is not None:
            ancestors.append(parent["name"])
            parent = by_id.get(parent["parent"])
        # Inside the framework's own spans: its function-calling loop, within the agent's invocation.
        assert ancestors[0] == loop_span and ancestors[-1].startswith("invoke_agent"), ancestors
        a = span["attributes"]
        assert a["gen_ai.operation.name"] == "select_tools"
        assert a["sk_toolfilter.search.method"] == "bm25" and a["sk_toolfilter.catalog.size"] == 46
        assert "Files-write_file" in a["sk_toolfilter.tools.offered"]
        assert len(a["sk_toolfilter.tools.scores"]) == a["sk_toolfilter.tools.offered_count"]
        assert a["sk_toolfilter.tools.pinned"] == ["ToolSearch-describe_tool", "ToolSearch-search_tools"]
        assert a["sk_toolfilter.budget"] >= 5 and a["sk_toolfilter.tool_tokens.saved"] > 1000
    # Nothing the user wrote is in an attribute without the sensitive switch.
    # (Attributes only: a span's random id may hold any digits.)
    attributes = json.dumps([s["attributes"] for s in selections])
    assert "Zanzibar" not in attributes and "4111-1111" not in attributes
    metrics = out["metrics"]
    assert metrics["sk_toolfilter.selection.duration"][0]["count"] == 2
    offered = metrics["sk_toolfilter.tools.offered"][0]
    assert offered["count"] == 2 and offered["sum"] == sum(
        s["attributes"]["sk_toolfilter.tools.offered_count"] for s in selections
    )
    saved = sum(s["attributes"]["sk_toolfilter.tool_tokens.saved"] for s in selections)
    assert metrics["sk_toolfilter.tool_tokens.saved"][0]["value"] == saved
    assert metrics["sk_toolfilter.selection.duration"][0]["sk_toolfilter.search.method"] == "bm25"


SENSITIVE = {
    "semantic-kernel": {"SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE": "true"},
    "agent-framework": {"ENABLE_INSTRUMENTATION": "true", "ENABLE_SENSITIVE_DATA": "true"},
}


@pytest.mark.parametrize("framework", SENSITIVE)
def test_the_request_is_recorded_only_when_the_app_opts_in_to_sensitive_data(tmp_path, framework):
    sensitive = run_turn(tmp_path, SENSITIVE[framework], framework)
    first = next(s for s in sensitive["spans"] if s["name"] == "select_tools")
    assert "Zanzibar" in first["attributes"]["sk_toolfilter.query"]
    off = run_turn(tmp_path, {}, framework)
    assert not [s for s in off["spans"] if s["name"] == "select_tools"]
    assert not [name for name in off["metrics"] if name.startswith("sk_toolfilter.")]


def test_the_switches_follow_each_framework_and_our_own_wins():
    assert TelemetrySwitch.from_environment({}) == TelemetrySwitch(False, False)
    sk = "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS"
    assert TelemetrySwitch.from_environment({sk: "true"}) == TelemetrySwitch(True, False)
    assert TelemetrySwitch.from_environment({f"{sk}_SENSITIVE": "true"}) == TelemetrySwitch(True, True)
    assert TelemetrySwitch.from_environment({"ENABLE_INSTRUMENTATION": "true"}) == TelemetrySwitch(True, False)
    both = {"ENABLE_INSTRUMENTATION": "true", "ENABLE_SENSITIVE_DATA": "true"}
    assert TelemetrySwitch.from_environment(both) == TelemetrySwitch(True, True)
    assert TelemetrySwitch.from_environment({"ENABLE_SENSITIVE_DATA": "true"}) == TelemetrySwitch(False, False)
    assert TelemetrySwitch.from_environment({sk: "true", "SK_TOOLFILTER_TELEMETRY": "off"}) == TelemetrySwitch()
    assert TelemetrySwitch.from_environment({"SK_TOOLFILTER_TELEMETRY": "sensitive"}) == TelemetrySwitch(True, True)


RAISING_PROVIDER = textwrap.dedent(
    """
    import asyncio, logging, sys
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider

    variant = sys.argv[1]

    class Broken(RuntimeError):
        pass

    class RaisingTracerProvider(TracerProvider):
        def get_tracer(self, *args, **kwargs):
            if variant == "tracer" and args[0] == "sk_toolfilter":  # Semantic Kernel's own calls still work
                raise Broken("tracer provider down: user text hunter2pass")
            tracer = super().get_tracer(*args, **kwargs)
            if variant == "span" and args[0] == "sk_toolfilter":
                def start(*a, **k):
                    raise Broken("span failed")
                tracer.start_as_current_span = start
            return tracer

    class RaisingMeterProvider(MeterProvider):
        def get_meter(self, *args, **kwargs):
            if variant == "meter" and args[0] == "sk_toolfilter":
                raise Broken("meter provider down")
            meter = super().get_meter(*args, **kwargs)
            if variant == "instrument" and args[0] == "sk_toolfilter":
                create = meter.create_histogram
                def histogram(*a, **k):
                    instrument = create(*a, **k)
                    def record(*a, **k):
                        raise Broken("instrument failed")
                    instrument.record = record
                    return instrument
                meter.create_histogram = histogram
            return meter

    trace.set_tracer_provider(RaisingTracerProvider())
    metrics.set_meter_provider(RaisingMeterProvider())
    logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="LOG %(message)s")

    from semantic_kernel import Kernel
    from sk_toolfilter import ToolFilterConfig, ToolFilterManager
    from sk_toolfilter.demo import MessagingPlugin, NotesPlugin

    async def main():
        kernel = Kernel()
        kernel.add_plugin(MessagingPlugin(), "Messaging")
        kernel.add_plugin(NotesPlugin(sys.argv[2]), "Notes")
        manager = await ToolFilterManager.from_kernel(kernel, ToolFilterConfig(search_method="bm25"))
        for _ in range(3):
            print("SELECTED", (await manager.filter_tools("send an email to Bob"))[0])

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("variant", ["tracer", "span", "meter", "instrument"])
def test_a_raising_telemetry_provider_never_takes_a_selection_down(variant, tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", RAISING_PROVIDER, variant, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SK_TOOLFILTER_TELEMETRY": "on"},
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count("SELECTED Messaging-send_email") == 3
    warnings = [line for line in result.stdout.splitlines() if line.startswith("LOG") and "OpenTelemetry" in line]
    assert len(warnings) == 1 and "Broken" in warnings[0], result.stdout
    assert "hunter2pass" not in result.stdout + result.stderr


def test_a_telemetry_switch_with_an_unknown_value_is_named_in_a_warning(caplog):
    with caplog.at_level("WARNING", logger="sk_toolfilter"):
        switch = TelemetrySwitch.from_environment({"SK_TOOLFILTER_TELEMETRY": "garbage"})
    assert not switch.enabled
    assert "SK_TOOLFILTER_TELEMETRY='garbage' is not one of on, sensitive, off" in caplog.text
