"""Builds the small-talk exemplars the library ships (``sk_toolfilter/retrieval/data/``).

A request is compared with utterances that need no tool and with short requests that do
(:mod:`sk_toolfilter.retrieval.small_talk`). Both come from the *train* split of CLINC150
(:data:`training.sources.SMALL_TALK_SOURCE`: clinc/oos-eval at a pinned commit, CC BY 3.0), read
from a local clone so a rebuild reads exactly the same texts:

- no tool: 30 utterances (seeded sample) of each of CLINC's 15 conversational intents (greeting,
  goodbye, thank you, questions about the assistant, yes / no / maybe), plus :data:`DIALOGUE_ACTS`,
  a few utterances written here for the social and conversation-managing dialogue acts of ISO 24617-2
  CLINC has no intent for (time management, feedback, apology, retraction, turn management);
- tool requests: 20 utterances of each of CLINC's other intents (banking, travel, home, …) but
  ``cancel`` and ``repeat``, which are either.

CLINC's validation and test splits are never read here: ``benchmarks/intent_benchmark.py`` measures
on them, and on its own small-talk lists, none of which is an exemplar (the few CLINC utterances equal
to one, "thank you!", "what's up", are left out). With ``--vectors`` it also writes the exemplars'
vectors for the shipped request encoders (int8 codes and a scale per row, with a digest of the texts),
so no process embeds them at run time; any other embedding model embeds them once, at its first short
request. The int8 request encoders compute slightly different vectors on CPUs of different arithmetic
(:mod:`sk_toolfilter.retrieval.numerics`): ``--variant TAG`` adds this CPU's vectors as one more shipped
set for each model whose existing sets it does not match (a CPU that matches none embeds them itself).

    python -m training.small_talk_exemplars --clinc PATH [--vectors]
    python -m training.small_talk_exemplars --variant TAG
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

from training.sources import SMALL_TALK_SOURCE

NO_TOOL_INTENTS = (
    "greeting", "goodbye", "thank_you", "are_you_a_bot", "what_is_your_name", "who_made_you", "who_do_you_work_for",
    "how_old_are_you", "where_are_you_from", "what_are_your_hobbies", "do_you_have_pets", "what_can_i_ask_you",
    "yes", "no", "maybe",
)  # fmt: skip
EITHER = ("cancel", "repeat")
NO_TOOL_PER_INTENT = 30
TOOL_REQUESTS_PER_INTENT = 20
SEED = 0

DIALOGUE_ACTS: dict[str, tuple[str, ...]] = {
    "time management": (
        "give me a moment", "just a second", "wait for me", "let me check something first", "bear with me",
        "I'll be right back", "pause for a sec", "one moment please",
    ),
    "feedback": (
        "I see", "right, understood", "okay I understand", "interesting", "good to know", "fair enough",
        "uh huh", "got you",
    ),
    "apology": (
        "sorry", "I apologize", "sorry for the confusion", "excuse me", "pardon me", "oops", "my apologies",
        "sorry, I made a mistake",
    ),
    "accepting an apology or thanks": (
        "no worries", "no problem", "you're welcome", "it's fine", "don't worry about it", "all is forgiven",
    ),
    "retraction": (
        "scratch that", "ignore what I just said", "wait, no", "let me rephrase", "I misspoke",
        "disregard my last message",
    ),
    "turn management": ("go ahead", "let's move on", "where were we?", "let's continue", "I'm ready", "your turn"),
}  # fmt: skip
"""Written for this file (no dataset holds them with a licence to ship): the ISO 24617-2 dialogue acts
that need no tool and that CLINC has no intent for."""

DATA = Path(__file__).resolve().parent.parent / "sk_toolfilter" / "retrieval" / "data"
BENCHMARKS_DIR = Path(__file__).resolve().parent.parent / "benchmarks"


def _key(text: str) -> str:
    return text.lower().strip(" ?!.")


def measured_requests() -> set[str]:
    """The small-talk lists ``benchmarks/intent_benchmark.py`` measures on: no exemplar may be one of them."""
    sys.path.insert(0, str(BENCHMARKS_DIR))
    try:
        from intent_benchmark import SMALL_TALK_LISTS
    finally:
        sys.path.remove(str(BENCHMARKS_DIR))
    return {_key(r) for requests in SMALL_TALK_LISTS.values() for r in requests}


def read_clinc(clone: Path, commit: str = SMALL_TALK_SOURCE.commit) -> dict[str, list[list[str]]]:
    text = subprocess.run(
        ["git", "-C", str(clone), "show", f"{commit}:data/data_full.json"], capture_output=True, text=True, check=True
    ).stdout
    return json.loads(text)


def exemplars(clinc: dict[str, list[list[str]]]) -> dict[str, Any]:
    """The exemplar file's content: source, counts and both lists (train split only)."""
    by_intent: dict[str, list[str]] = {}
    for text, intent in clinc["train"]:
        by_intent.setdefault(intent, []).append(text)
    rng = random.Random(SEED)

    def sample(intent: str, count: int) -> list[str]:
        texts = list(by_intent[intent])
        rng.shuffle(texts)
        return texts[:count]

    no_tool = [t for intent in NO_TOOL_INTENTS for t in sample(intent, NO_TOOL_PER_INTENT)]
    no_tool += [t for acts in DIALOGUE_ACTS.values() for t in acts]
    others = sorted(set(by_intent) - set(NO_TOOL_INTENTS) - set(EITHER))
    tool_requests = [t for intent in others for t in sample(intent, TOOL_REQUESTS_PER_INTENT)]
    measured = measured_requests()  # "thanks!", "I see", … stay measurements, never exemplars
    no_tool = [t for t in no_tool if _key(t) not in measured]
    tool_requests = [t for t in tool_requests if _key(t) not in measured]
    return {
        "source": {
            "repository": SMALL_TALK_SOURCE.repository,
            "commit": SMALL_TALK_SOURCE.commit,
            "licence": SMALL_TALK_SOURCE.licence,
            "file": "data/data_full.json (train split)",
            "no_tool_intents": list(NO_TOOL_INTENTS),
            "per_intent": {"no_tool": NO_TOOL_PER_INTENT, "tool_request": TOOL_REQUESTS_PER_INTENT},
            "seed": SEED,
            "written_here": {act: len(texts) for act, texts in DIALOGUE_ACTS.items()},
        },
        "no_tool": list(dict.fromkeys(no_tool)),
        "tool_request": list(dict.fromkeys(tool_requests)),
    }


def write_vectors(content: dict[str, Any] | None, tag: str = "") -> None:
    """The exemplars' vectors for every shipped request encoder (what the index would embed); with `tag`,
    as a variant for this CPU, only for the models whose shipped sets this CPU does not match."""
    import numpy as np

    from sk_toolfilter.retrieval.embeddings import LocalEmbeddingGenerator
    from sk_toolfilter.retrieval.encoders import embedding_model_id, query_encoder
    from sk_toolfilter.retrieval.local_models import TOOL_SIDE_MODEL_ID, shipped_models
    from sk_toolfilter.retrieval.numerics import PROBE_TEXTS
    from sk_toolfilter.retrieval.small_talk import (
        load_exemplars,
        matching_variant,
        save_exemplar_vectors,
        shipped_exemplar_variants,
    )

    load_exemplars.cache_clear()  # the file just written
    texts = load_exemplars().texts
    assert content is None or texts == [*content["no_tool"], *content["tool_request"]]
    for model_id in shipped_models():
        service = LocalEmbeddingGenerator(model=model_id)
        if model_id == TOOL_SIDE_MODEL_ID:
            continue  # a tool-side file: requests are never embedded with it
        request_model = embedding_model_id(query_encoder(service))
        if tag:
            here = service.embed_queries_sync(list(PROBE_TEXTS))
            matched = matching_variant(shipped_exemplar_variants(request_model, service.dimensions), here)
            if matched is not None:
                print(f"{model_id}: this CPU computes the shipped set {matched or '(reference)'!r}; nothing written")
                continue
        vectors = np.asarray(service.embed_queries_sync(texts), dtype=np.float32)
        path = save_exemplar_vectors(request_model, vectors, tag)
        print(f"{model_id}: {len(texts)} exemplars -> {path.relative_to(DATA.parent.parent.parent)}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clinc", type=Path, help="a clone of clinc/oos-eval")
    parser.add_argument("--vectors", action="store_true", help="also write the shipped request encoders' vectors")
    parser.add_argument("--variant", metavar="TAG", help="only add this CPU's vectors as the shipped set TAG")
    args = parser.parse_args(argv)
    if args.variant:
        write_vectors(None, args.variant)
        return
    if args.clinc is None:
        parser.error("--clinc is required (or --variant TAG)")
    content = exemplars(read_clinc(args.clinc))
    DATA.mkdir(parents=True, exist_ok=True)
    out = DATA / "small_talk_exemplars.json"
    out.write_text(json.dumps(content, indent=1, ensure_ascii=False) + "\n")
    print(f"{out}: {len(content['no_tool'])} no-tool utterances, {len(content['tool_request'])} tool requests")
    if args.vectors:
        write_vectors(content)


if __name__ == "__main__":
    main()
