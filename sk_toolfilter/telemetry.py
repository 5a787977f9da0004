"""OpenTelemetry for tool selection: one span per selection and a few metrics (``opentelemetry-api`` only).

Off unless the app turns telemetry on with the frameworks' own switches (read when a
:class:`Telemetry` is created, i.e. when a filter manager is built):

- Semantic Kernel: ``SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS`` (spans and metrics)
  and ``..._SENSITIVE`` (the request text as well);
- Agent Framework: ``ENABLE_INSTRUMENTATION`` and ``ENABLE_SENSITIVE_DATA``;
- or ``SK_TOOLFILTER_TELEMETRY`` = ``on`` | ``sensitive`` | ``off`` (wins over the others).

Nothing here configures an SDK or an exporter: the app's providers receive the data (with none,
the API's no-op providers make every call free). Attributes carry tool names, scores and counts;
the request text only with sensitive data on; a fallback reason passes the library's redaction.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import metrics, trace

from sk_toolfilter.basics.redaction import library_logger, redact_text

logger = library_logger(__name__)

INSTRUMENTATION = "sk_toolfilter"
SPAN_NAME = "select_tools"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"off", "0", "false", "no"}


def _version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sk-toolfilter")
    except PackageNotFoundError:
        return None


@dataclass(frozen=True)
class TelemetrySwitch:
    """Whether telemetry is on, and whether request text may be recorded."""

    enabled: bool = False
    sensitive: bool = False

    @classmethod
    def from_environment(cls, environ: dict[str, str] | None = None) -> TelemetrySwitch:
        env = os.environ if environ is None else environ
        own = env.get("SK_TOOLFILTER_TELEMETRY", "").strip().lower()
        if own in _FALSE:
            return cls()
        if own in ("on", "sensitive", *_TRUE):
            return cls(True, own == "sensitive")
        if own:
            logger.warning(
                "sk-toolfilter: SK_TOOLFILTER_TELEMETRY=%r is not one of on, sensitive, off: ignored (the frameworks' "
                "own switches decide)",
                env.get("SK_TOOLFILTER_TELEMETRY", "")[:40],
            )

        def flag(name: str) -> bool:
            return env.get(name, "").strip().lower() in _TRUE

        sk = "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS"
        enabled = flag(sk) or flag(f"{sk}_SENSITIVE") or flag("ENABLE_INSTRUMENTATION")
        sensitive = flag(f"{sk}_SENSITIVE") or (flag("ENABLE_INSTRUMENTATION") and flag("ENABLE_SENSITIVE_DATA"))
        return cls(enabled, sensitive)


@dataclass
class SelectionRecord:
    """What one selection decided, filled in while it runs and recorded when it ends."""

    catalog_size: int = 0
    budget: int = 0
    method: str = ""
    method_used: str = ""
    offered: Sequence[str] = ()
    scores: Sequence[float | None] = ()
    pins: Sequence[str] = ()
    fallback_reason: str | None = None
    tokens_all: int | None = None
    tokens_offered: int | None = None
    query: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class Telemetry:
    """The instruments of one filter manager (created from the global providers at construction).

    Observability never takes a selection down: every call into the OpenTelemetry API (the app's
    tracer, span, meter and instruments) is contained. The first failure logs one warning naming
    the call; telemetry of this manager is then off, selections go on.
    """

    def __init__(self, switch: TelemetrySwitch | None = None) -> None:
        self.switch = switch or TelemetrySwitch.from_environment()
        self._broken = False
        if self.switch.enabled:
            self._contain("create its tracer and meter", self._create_instruments)

    def _create_instruments(self) -> None:
        version = _version()
        self._tracer = trace.get_tracer(INSTRUMENTATION, version)
        meter = metrics.get_meter(INSTRUMENTATION, version or "")
        self._duration = meter.create_histogram(
            "sk_toolfilter.selection.duration", unit="s", description="Time to select the tools of one request."
        )
        self._offered = meter.create_histogram(
            "sk_toolfilter.tools.offered", unit="{tool}", description="Tools offered to the model per request."
        )
        self._saved = meter.create_counter(
            "sk_toolfilter.tool_tokens.saved",
            unit="{token}",
            description="Tool-schema tokens not sent because of filtering (o200k_base).",
        )
        self._fallbacks = meter.create_counter(
            "sk_toolfilter.embedding.fallbacks", unit="{request}", description="Selections ranked with BM25 only."
        )
        self._discovery = meter.create_counter(
            "sk_toolfilter.discovery.calls", unit="{call}", description="Calls of the discovery tools."
        )
        self._unoffered = meter.create_counter(
            "sk_toolfilter.unoffered_tool.calls", unit="{call}", description="Calls of tools the model was not offered."
        )
        self._failing = meter.create_up_down_counter(
            "sk_toolfilter.embedding.failing",
            unit="{service}",
            description="Embedding services failing now (BM25 ranks meanwhile; the circuit breaker's incident).",
        )

    def _contain(self, what: str, call: Callable[[], Any]) -> Any:
        """Run one call into the OpenTelemetry API; on any exception: one warning, telemetry off, None."""
        if self._broken:
            return None
        try:
            return call()
        except Exception as exc:
            self._broken = True
            # The type only: a provider's message is third-party text.
            logger.warning(
                "sk-toolfilter: the OpenTelemetry provider raised %s when asked to %s; telemetry of this tool "
                "filter is off, selections go on",
                type(exc).__name__,
                what,
            )
            return None

    @property
    def enabled(self) -> bool:
        return self.switch.enabled and not self._broken

    @contextmanager
    def _span(self, name: str) -> Iterator[Any]:
        """The current span `name` (child of the current one; None with telemetry off or broken), ended
        with the block."""
        if not self.enabled:
            yield None
            return
        opened = self._contain(
            "start a span", lambda: self._tracer.start_as_current_span(name, kind=trace.SpanKind.INTERNAL)
        )
        span = opened and self._contain("start a span", opened.__enter__)
        try:
            yield span
        finally:
            if opened is not None and span is not None:
                self._contain("end a span", lambda: opened.__exit__(*sys.exc_info()))

    @contextmanager
    def selection(self, agent: str = "") -> Iterator[SelectionRecord]:
        """A span around one selection (child of the current span: the framework's own); the
        record the caller fills becomes its attributes and the metrics when the block ends."""
        record = SelectionRecord()
        if not self.enabled:
            yield record
            return
        started = time.perf_counter()
        with self._span(f"{SPAN_NAME} {agent}" if agent else SPAN_NAME) as span:
            try:
                yield record
            finally:
                elapsed = time.perf_counter() - started
                if span is not None:
                    self._contain("set span attributes", lambda: span.set_attributes(self._attributes(record, elapsed)))
                self._contain("record metrics", lambda: self._record_metrics(record, elapsed))

    @contextmanager
    def gateway(self, operation: str) -> Iterator[dict[str, Any]]:
        """A span ``gateway <operation>`` around one request of the MCP gateway (a search or a call);
        the attributes the caller fills are set when the block ends (``sk_toolfilter.query`` only with
        sensitive data on)."""
        attributes: dict[str, Any] = {}
        if not self.enabled:
            yield attributes
            return
        started = time.perf_counter()
        with self._span(f"gateway {operation}") as span:
            try:
                yield attributes
            finally:
                if not self.switch.sensitive:
                    attributes.pop("sk_toolfilter.query", None)
                attributes["sk_toolfilter.gateway.operation"] = operation
                attributes["sk_toolfilter.gateway.duration_ms"] = round(1000 * (time.perf_counter() - started), 3)
                if span is not None:
                    self._contain("set span attributes", lambda: span.set_attributes(attributes))

    def _record_metrics(self, record: SelectionRecord, elapsed: float) -> None:
        labels = {"sk_toolfilter.search.method": record.method_used or record.method}
        self._duration.record(elapsed, labels)
        self._offered.record(len(record.offered), labels)
        if record.tokens_all is not None and record.tokens_offered is not None:
            self._saved.add(max(record.tokens_all - record.tokens_offered, 0), labels)
        if record.fallback_reason:
            self._fallbacks.add(1, labels)

    def _attributes(self, record: SelectionRecord, elapsed: float) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": SPAN_NAME,
            "sk_toolfilter.search.method": record.method,
            "sk_toolfilter.search.method_used": record.method_used or record.method,
            "sk_toolfilter.catalog.size": record.catalog_size,
            "sk_toolfilter.budget": record.budget,
            "sk_toolfilter.tools.offered": list(record.offered),
            "sk_toolfilter.tools.offered_count": len(record.offered),
            # OpenTelemetry arrays hold one type: a pinned tool (no score) is -1.
            "sk_toolfilter.tools.scores": [-1.0 if s is None else round(float(s), 4) for s in record.scores],
            "sk_toolfilter.tools.pinned": list(record.pins),
            "sk_toolfilter.selection.duration_ms": round(1000 * elapsed, 3),
            **record.extra,
        }
        if record.tokens_all is not None and record.tokens_offered is not None:
            attributes["sk_toolfilter.tool_tokens.offered"] = record.tokens_offered
            attributes["sk_toolfilter.tool_tokens.saved"] = max(record.tokens_all - record.tokens_offered, 0)
        if record.fallback_reason:
            attributes["sk_toolfilter.fallback_reason"] = redact_text(record.fallback_reason)
        if self.switch.sensitive and record.query:
            attributes["sk_toolfilter.query"] = record.query
        return attributes

    def discovery_call(self, function: str) -> None:
        if self.enabled:
            self._contain(
                "count a call", lambda: self._discovery.add(1, {"sk_toolfilter.discovery.function": function})
            )

    def unoffered_call(self, outcome: str) -> None:
        """A call of a tool that was not offered: ``outcome`` is ``loaded`` or ``refused``."""
        if self.enabled:
            self._contain("count a call", lambda: self._unoffered.add(1, {"sk_toolfilter.outcome": outcome}))

    def embedding_incident(self, started: bool) -> None:
        """The embedding circuit breaker's incident started (True) or ended (False)."""
        if self.enabled:
            self._contain("count an incident", lambda: self._failing.add(1 if started else -1))
