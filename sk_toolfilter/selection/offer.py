"""What one model request carries, decided once for every framework.

The SK chat-service wrapper, the Agent Framework middleware and ``prepare_execution_settings`` hand
:meth:`ToolFilterManager.offer` the names their framework put on offer and map the answer back to
their own tool objects; every rule about what is sent lives here and in the selection pipeline:

* filtering off → every tool on offer but the hidden ones (``exclude``, ``enabled: false``);
* filtering on → the selection (ranked, pinned, capped) among the tools on offer, in the order on
  offer, or with ``selection_mode: sticky`` in the conversation's sticky order;
* a tool the index does not know (given to one run only) stays on offer, after the selection, and
  counts toward ``max_tools_total`` (it is the first cut when the cap is reached);
* provider tool search on → what is sent loaded, and every other usable tool deferred
  (:func:`search_offer`); the offer says whether the filter answers the model's searches.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from sk_toolfilter.basics.redaction import library_logger, warn_once
from sk_toolfilter.config import ProviderSearchConfig
from sk_toolfilter.selection.pipeline import Selection
from sk_toolfilter.selection.provider_search import AgentTools

logger = library_logger(__name__)


@dataclass(frozen=True)
class Offer:
    """The tools one model request carries.

    ``names``: what to send loaded, in the order to send it (always a subset of what was on offer).
    ``narrowed``: False when the request goes out with exactly what was on offer (filtering off and
    nothing hidden). ``selection``: the evidence (None with filtering off; its decisions reach as deep
    as sending needs: every ranked tool and why is :meth:`ToolFilterManager.explain`). ``seconds``: time spent.
    ``deferred``: with provider tool search, every other tool this agent may use, sent deferred for the
    provider's search to find (catalog order; empty without it). ``filter_answers``: the model's searches
    among them are answered by the filter (``provider_search.search: filter``), not by the provider.
    """

    names: list[str]
    narrowed: bool
    selection: Selection | None = None
    seconds: float = 0.0
    deferred: tuple[str, ...] = ()
    filter_answers: bool = False

    @property
    def on_wire(self) -> list[str]:
        """Every tool the model can call on this request: loaded, then deferred."""
        return [*self.names, *self.deferred]


def visible_offer(on_offer: Sequence[str], hidden: set[str]) -> Offer:
    """Filtering off: everything on offer but the hidden tools (exclusions are a policy, not a ranking)."""
    names = [n for n in on_offer if n not in hidden]
    return Offer(names, narrowed=len(names) < len(on_offer))


def selected_offer(
    on_offer: Sequence[str],
    selection: Selection,
    order: Sequence[str] | None,
    unknown: Sequence[str],
    cap: int | None,
    seconds: float,
) -> Offer:
    """Filtering on: the selection among the tools on offer — in `order` (a sticky list) when given,
    else in the order on offer — then the `unknown` tools, all within `cap`."""
    chosen = set(selection.names)
    names = list(order) if order is not None else [n for n in on_offer if n in chosen]
    offered = set(on_offer)
    names = [n for n in names if n in offered]
    listed = set(names)
    names += [n for n in unknown if n not in listed]
    if cap is not None and len(names) > cap:
        room = cap - len([n for n in names if n in chosen])
        extra = [n for n in names if n not in chosen]
        dropped = set(extra[max(room, 0) :])
        if any(n in dropped for n in unknown):
            warn_once(
                logger,
                f"tools the index does not know are on offer beyond max_tools_total={cap}: the last of them are "
                "not sent (index them with the agent's tools, or raise max_tools_total)",
            )
        names = [n for n in names if n not in dropped]
    return Offer(names, narrowed=True, selection=selection, seconds=seconds)


def search_offer(
    manager: AgentTools,
    candidates: Sequence[str],
    selection: Sequence[str],
    config: ProviderSearchConfig,
    base: Offer | None = None,
) -> Offer:
    """Provider tool search on: `base` (or a new offer) loading the `selection` (at most ``config.loaded``)
    and deferring every other candidate this agent may use. Hidden (excluded, disabled) tools and the
    discovery tools are never sent, loaded or deferred."""
    discovery = set(manager.discovery_names)
    loaded = [n for n in selection if n not in discovery]
    if config.loaded is not None:
        loaded = loaded[: config.loaded]
    taken = set(loaded)
    deferred = tuple(n for n in candidates if n not in taken and n not in discovery and not manager.is_hidden(n))
    answers = config.search == "filter" and bool(deferred)
    return replace(base or Offer([], True), names=loaded, deferred=deferred, narrowed=True, filter_answers=answers)
