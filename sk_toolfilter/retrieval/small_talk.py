"""Requests that need no tool: greetings, thanks, goodbyes, questions about the assistant itself.

Every relative score makes *some* tool the best match, so "hi" would send the catalog's most
chatty tool at score 1.0. Small talk is therefore ranked against a few descriptions of
conversation that needs no tool, embedded like tools (:data:`SMALL_TALK`). When the request is
at least as close to one of them as to any tool — closer than the best tool's cosine plus
``no_tool_margin`` — the request has no real evidence for a tool: only pinned tools (and tools the
request names) are sent, and ``explain`` says why.

A request with no subject at all — no word outside English stopwords, closed-class words (indefinite
pronouns, adverbs of degree and time) and the words of small talk ("what can you do?", "no thanks",
"anything else?") — gives a tool nothing to act on: it is small talk whatever its cosines (no dev
request, each of which needs a tool, is subjectless).

Small talk has no subject: a request with more than :data:`MAX_SUBJECT_WORDS` words outside
English stopwords and the small-talk descriptions' own words ("Remember that Alice works at
Contoso", "Forget everything about Bob") is about something, and the descriptions never judge it
small talk however weakly the encoder links it to a tool: a catalog the encoder never saw is ranked
as usual (the other signals, BM25 and the request's parts, still count) rather than sent nothing.
Only the examples below may judge a request of up to :data:`MAX_EXEMPLAR_SUBJECT_WORDS` subject
words (:data:`MAX_CLEAR_SUBJECT_WORDS` with a clear lead), and never one that names someone or something
(:func:`content_marks`; numbers alone need the clear lead).

The descriptions, the margin and the subject-word limit were chosen on a list of 20 small-talk
requests and the dev halves (docs: intents and evidence).

**Examples of conversation.** A short request is also compared with utterances that need no tool and
with short requests that do (:func:`load_exemplars`: CLINC150's train split, CC BY 3.0, and a few
ISO 24617-2 dialogue acts; ``training/small_talk_exemplars.py`` builds the file), embedded like
requests. It is small talk when it has at most :data:`MAX_EXEMPLAR_SUBJECT_WORDS` subject words and
no content marks (:func:`content_marks`: a name, a number, a quotation, a word in a script the encoder
does not read), its closest no-tool utterance is :data:`EXEMPLAR_MARGIN` closer than its closest tool
request, and :data:`EXEMPLAR_OVER_TOOL` closer than its best tool; a longer one (up to
:data:`MAX_CLEAR_SUBJECT_WORDS`), or one whose only marks are numbers, needs a clear lead
(:data:`CLEAR_MARGIN`, :data:`CLEAR_OVER_TOOL`). Chosen on CLINC's validation split
and the dev halves; measured on CLINC's test split and lists written before the change
(``benchmarks/intent_benchmark.py``): on CLINC's test split, small talk sending a catalog tool fell from
59 % to 7 % (shipped model); 3 of the dev halves' 4,138 requests are judged small talk.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Protocol

import numpy as np

from sk_toolfilter.retrieval.gloss import HAN_RUN, with_english_gloss
from sk_toolfilter.retrieval.numerics import PROBE_TEXTS, agrees, worst_agreement
from sk_toolfilter.retrieval.scoring import CatalogVectors, quantize_rows
from sk_toolfilter.retrieval.text import CJK_RUN, tokenize

DATA_DIR = Path(__file__).resolve().parent / "data"
EXEMPLARS_FILE = DATA_DIR / "small_talk_exemplars.json"
VECTORS_DIR = DATA_DIR / "small_talk_vectors"

SMALL_TALK: tuple[str, ...] = (
    "hello: greet the assistant. hi, hey, good morning, good evening, how are you",
    "thanks: thank the assistant or acknowledge its answer. thank you, thanks, ok, great, cool, perfect, got it",
    "goodbye: end the conversation. bye, see you later, that's all, never mind",
    "about the assistant: ask what the assistant is, who made it or what it can help with",
    "reply: answer yes or no, agree, apologize, laugh, react with an interjection",
)


SMALL_TALK_EXAMPLES: tuple[str, ...] = (
    "hi", "hello!", "thanks!", "thank you so much", "what can you do?", "ok", "good morning", "who are you?",
    "bye", "cool, thanks", "how are you today?", "never mind", "yes please", "no", "hmm", "lol", "great job",
    "can you help me?", "sorry", "that's all for now",
)  # fmt: skip
"""The 20 small-talk requests the descriptions, the margin and the subject words were tuned on (the
benchmark's held-out list was never used to choose anything)."""

MAX_SUBJECT_WORDS = 1
"""Small talk carries at most one word outside the words of small talk (``SMALL_TALK`` and
``SMALL_TALK_EXAMPLES``): "much appreciated", "good night", "are you a bot?" each have one."""

MAX_EXEMPLAR_SUBJECT_WORDS = 3
"""A request compared with the exemplars carries at most this many subject words ("sorry, wrong window")."""
EXEMPLAR_MARGIN = 0.05
"""How much closer (cosine) the closest no-tool utterance must be than the closest tool request."""
EXEMPLAR_OVER_TOOL = 0.10
"""How much closer (cosine) the closest no-tool utterance must be than the request's best tool."""
MAX_CLEAR_SUBJECT_WORDS = 6
"""A longer question about the assistant ("which type of pet would you rather have, a cat or a dog"), or
one whose only content marks are numbers ("are you 16 years old?"), of up to this many subject words is
judged by the examples only when one is clearly closer: by :data:`CLEAR_OVER_TOOL` and :data:`CLEAR_MARGIN`."""
CLEAR_OVER_TOOL = 0.20
"""For such a request: how much closer the closest no-tool utterance must be than its best tool."""
CLEAR_MARGIN = 0.15
"""For such a request: how much closer the closest no-tool utterance must be than the closest tool request."""

MAX_READ_CHARS = 1000  # a request this long is about something; its first words tell
# What is left of an English contraction once the tokenizer splits at the apostrophe ("you're").
_CONTRACTION_TAILS = frozenset({"re", "ve", "ll", "d", "m", "s", "t"})
# A negated auxiliary ("don't", "isn't", "won't", "can't") is a function word whole; split at the
# apostrophe its head ("don", "isn", "won") would read as a word of its own.
_NEGATED_AUXILIARY = re.compile(r"\b\w+n['’]t\b", re.IGNORECASE)
# English closed-class words the stopword list lacks (it keeps words BM25 can match on): indefinite
# pronouns and adverbs of degree, time and doubt. They name nothing a tool could act on.
_CLOSED_CLASS = (
    "anything anyone anybody anywhere something someone somebody somewhere everything everyone everybody "
    "everywhere nothing nobody nowhere none else either neither another whatever whoever whichever whenever "
    "wherever however ever never yet still already quite rather really maybe perhaps almost even though "
    "although unless whether"
)
_SMALL_TALK_WORDS = (
    frozenset(tokenize(" ".join((*SMALL_TALK, *SMALL_TALK_EXAMPLES, _CLOSED_CLASS)))) | _CONTRACTION_TAILS
)


def subject_words(request: str) -> list[str]:
    """The request's words (stemmed) outside English stopwords and the words of small talk itself;
    Chinese is read through its English gloss."""
    text = request[:MAX_READ_CHARS]
    if "'" in text or "’" in text:  # no apostrophe, no negated auxiliary (most requests)
        text = _NEGATED_AUXILIARY.sub(" ", text)
    words = tokenize(with_english_gloss(text))
    if text.isascii():  # no Chinese, no gloss: no token to test for Han characters
        return [t for t in words if t not in _SMALL_TALK_WORDS]
    return [t for t in words if t not in _SMALL_TALK_WORDS and not CJK_RUN.search(t)]


_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+)\W*(\w+)")
_TITLE_WORD = re.compile(r"\b[A-Z][a-z]+(?:'[a-z]+)?\b")
_QUOTATION = re.compile(r"[\"“][^\"”]+[\"”]|(?<!\w)'[^']+'(?!\w)")
_LETTERS = re.compile(r"[^\W\d_]+")
_FIRST_PERSON = frozenset({"I", "I'm", "I'd", "I'll", "I've"})


def content_marks(request: str) -> list[str]:
    """What in `request` names something a tool could act on whatever its words: numbers, quotations,
    names (a capitalised word inside a sentence) and words in a script other than Latin or Han (Han is
    read through its English gloss). Small talk carries none."""
    text = request[:MAX_READ_CHARS]
    starts = {m.start(1) for m in _SENTENCE_START.finditer(text)}
    names = [m.group() for m in _TITLE_WORD.finditer(text) if m.start() not in starts]
    other_scripts = [w for w in _LETTERS.findall(text) if any(ord(c) > 0x24F for c in w) and not HAN_RUN.search(w)]
    return [
        *re.findall(r"\d+", text),
        *_QUOTATION.findall(text),
        *(n for n in names if n not in _FIRST_PERSON),
        *other_scripts,
    ]


@dataclass(frozen=True)
class Exemplars:
    """Utterances that need no tool and short requests that do (see :func:`load_exemplars`)."""

    no_tool: tuple[str, ...]
    tool_request: tuple[str, ...]

    @property
    def texts(self) -> list[str]:
        return [*self.no_tool, *self.tool_request]

    @property
    def digest(self) -> str:
        """Identifies the texts (precomputed vectors are kept only for the same texts)."""
        return hashlib.sha256("\n".join(self.texts).encode()).hexdigest()


@lru_cache(maxsize=1)
def load_exemplars() -> Exemplars:
    """The exemplars shipped in ``retrieval/data/small_talk_exemplars.json``: 476 utterances that need no
    tool (CLINC150's train split, 15 conversational intents; CC BY 3.0, see the file's ``source``; and 44
    written for the ISO 24617-2 dialogue acts CLINC lacks) and 2,660 requests of its 133 other intents."""
    content = json.loads(EXEMPLARS_FILE.read_text(encoding="utf-8"))
    return Exemplars(tuple(content["no_tool"]), tuple(content["tool_request"]))


def _vectors_file(request_model_id: str, tag: str = "") -> Path:
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", request_model_id) + (f"+{tag}" if tag else "")
    return VECTORS_DIR / (name + ".npz")


def save_exemplar_vectors(request_model_id: str, vectors: np.ndarray, tag: str = "") -> Path:
    """Keep the exemplars' vectors for a shipped request encoder (int8 codes and a scale per row), as
    computed on this CPU: `tag` names a variant for a CPU whose arithmetic differs from the reference
    one's ('' : the reference; see :mod:`sk_toolfilter.retrieval.numerics`)."""
    codes, scales = quantize_rows(np.asarray(vectors, dtype=np.float32))
    path = _vectors_file(request_model_id, tag)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, codes=codes, scales=scales, digest=load_exemplars().digest)
    return path


def shipped_exemplar_variants(request_model_id: str, dimensions: int) -> dict[str, np.ndarray]:
    """The exemplars' unit vectors precomputed for a shipped request encoder, one set per CPU arithmetic
    they were computed on (tag -> vectors; '' the reference); empty for another model, other texts or
    another size (the index embeds them itself). Which one this CPU may use: :func:`matching_variant`."""
    variants: dict[str, np.ndarray] = {}
    reference = _vectors_file(request_model_id)
    for path in sorted(VECTORS_DIR.glob(reference.stem + "*.npz")):
        tag = path.stem[len(reference.stem) :]
        if tag and not tag.startswith("+"):
            continue  # another model whose id starts like this one
        with np.load(path) as stored:
            if str(stored["digest"]) != load_exemplars().digest or stored["codes"].shape[1] != dimensions:
                continue
            vectors = stored["codes"].astype(np.float32) * stored["scales"][:, None]
        variants[tag[1:]] = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return variants


@lru_cache(maxsize=1)
def _probe_rows() -> list[int]:
    position = {text: row for row, text in enumerate(load_exemplars().texts)}
    return [position[text] for text in PROBE_TEXTS]


def matching_variant(variants: dict[str, np.ndarray], probe: np.ndarray) -> str | None:
    """The tag of the variant whose vectors of :data:`~sk_toolfilter.retrieval.numerics.PROBE_TEXTS` are
    what this CPU computes (`probe`: the request encoder's vectors of them here), or None."""
    rows = _probe_rows()
    return next((tag for tag, vectors in variants.items() if agrees(vectors[rows], probe)), None)


def worst_probe_agreement(variants: dict[str, np.ndarray], probe: np.ndarray) -> float:
    """The best of the variants' worst probe cosines (for the log line when none matches)."""
    rows = _probe_rows()
    return max((worst_agreement(vectors[rows], probe) for vectors in variants.values()), default=-1.0)


class SmallTalkStore(Protocol):
    """Where a deployment keeps the small-talk vectors its own embedding model made (the shared index
    store): one process embeds the descriptions and exemplars (~3,100 texts) and keeps them there, and
    every replica reads them instead of embedding them again. Failures are the store's to report:
    ``load`` answers None and ``save`` does nothing then."""

    async def load_small_talk(self, model_id: str, key: str, rows: int, dims: int) -> np.ndarray | None: ...

    async def save_small_talk(self, model_id: str, key: str, vectors: np.ndarray) -> None: ...


def small_talk_key() -> str:
    """Identifies what a stored set holds: the :data:`SMALL_TALK` descriptions, then the exemplars."""
    return hashlib.sha256("\n".join([*SMALL_TALK, load_exemplars().digest]).encode()).hexdigest()[:16]


def small_talk_rows() -> int:
    """Rows of a stored set: the descriptions, then the exemplars (no-tool utterances, tool requests)."""
    return len(SMALL_TALK) + len(load_exemplars().texts)


@dataclass(frozen=True)
class SmallTalkVectors:
    """What a request is compared with: the :data:`SMALL_TALK` descriptions (embedded like tools) and,
    when available, the exemplars (embedded like requests; scored row by row, never through BLAS)."""

    descriptions: np.ndarray
    no_tool: CatalogVectors | None = None
    tool_request: CatalogVectors | None = None


@dataclass(frozen=True)
class SmallTalkVerdict:
    """How close a request is to small talk and to its best tool (cosine similarities)."""

    small_talk: float
    best_tool: float
    closest: str
    subjectless: bool = False
    tool_request: float | None = None
    """Set when an exemplar decided: the cosine of the closest tool request."""

    def reason(self) -> str:
        if self.tool_request is not None:
            return (
                f"the request reads as small talk (like {self.closest!r} {self.small_talk:.2f}; the closest "
                f"request for a tool {self.tool_request:.2f}, the best tool {self.best_tool:.2f}): no tool has "
                "real evidence"
            )
        topic = self.closest.split(":", 1)[0]
        names_nothing = " and names nothing a tool could act on" if self.subjectless else ""
        return (
            f"the request reads as small talk ({topic!r} {self.small_talk:.2f} vs the best tool "
            f"{self.best_tool:.2f}){names_nothing}: no tool has real evidence"
        )


def judge_small_talk(
    query_vector: np.ndarray,
    small_talk: SmallTalkVectors,
    tool_cosines: np.ndarray,
    margin: float,
    *,
    subject_count: int,
    marks: Sequence[str] | Callable[[], Sequence[str]] = (),
    best_tool: float | None = None,
) -> SmallTalkVerdict | None:
    """A verdict when the request is small talk, else None: it names nothing (`subject_count` 0); or,
    without content `marks` (a name, a number, …: :func:`content_marks`), it has at most
    :data:`MAX_SUBJECT_WORDS` subject words and is closer to a :data:`SMALL_TALK` description than to
    the best tool + `margin`; or, again without content `marks` and with at most
    :data:`MAX_EXEMPLAR_SUBJECT_WORDS` subject words, its closest no-tool exemplar beats its closest
    tool request by :data:`EXEMPLAR_MARGIN` and its best tool by :data:`EXEMPLAR_OVER_TOOL`; or, with
    numbers as its only marks or up to :data:`MAX_CLEAR_SUBJECT_WORDS` subject words, by
    :data:`CLEAR_MARGIN` and :data:`CLEAR_OVER_TOOL`. `marks` may be a function that finds them: it is
    called only when the verdict depends on them (most requests for a tool are decided without).
    `best_tool`: the highest of `tool_cosines` when the caller knows it already."""
    if tool_cosines.size == 0:
        return None
    found: list[Sequence[str]] = []

    def content() -> Sequence[str]:  # found once, if at all
        if not found:
            found.append(marks() if callable(marks) else marks)
        return found[0]

    query = np.asarray(query_vector, dtype=np.float32)
    best_tool = float(np.max(tool_cosines)) if best_tool is None else best_tool
    if subject_count <= MAX_SUBJECT_WORDS and small_talk.descriptions.size:
        similarities = np.vecdot(small_talk.descriptions, query)
        closest = int(np.argmax(similarities))
        if subject_count == 0 or (float(similarities[closest]) > best_tool + margin and not content()):
            description = SMALL_TALK[closest]
            return SmallTalkVerdict(float(similarities[closest]), best_tool, description, subject_count == 0)
    if subject_count > MAX_CLEAR_SUBJECT_WORDS or small_talk.no_tool is None or small_talk.tool_request is None:
        return None
    no_tool = small_talk.no_tool.scores(query)
    closest = int(np.argmax(no_tool))
    nearest = float(no_tool[closest])
    if nearest < best_tool + min(EXEMPLAR_OVER_TOOL, CLEAR_OVER_TOOL):
        return None  # most short requests for a tool end here, whatever their marks
    marks_found = content()
    if any(not mark.isdigit() for mark in marks_found):  # a name: never small talk
        return None
    clear_only = bool(marks_found) or subject_count > MAX_EXEMPLAR_SUBJECT_WORDS
    over_tool, margin = (CLEAR_OVER_TOOL, CLEAR_MARGIN) if clear_only else (EXEMPLAR_OVER_TOOL, EXEMPLAR_MARGIN)
    if nearest < best_tool + over_tool:
        return None  # before the 2,660 tool requests are scored
    tool_request = float(np.max(small_talk.tool_request.scores(query)))
    if nearest < tool_request + margin:
        return None
    return SmallTalkVerdict(nearest, best_tool, load_exemplars().no_tool[closest], tool_request=tool_request)
