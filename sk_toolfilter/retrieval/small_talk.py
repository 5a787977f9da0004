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
Contoso", "Forget everything about Bob") is about something, and is never judged small talk however
weakly the encoder links it to a tool: a catalog the encoder never saw is ranked as usual (the
other signals, BM25 and the request's parts, still count) rather than sent nothing.

The descriptions, the margin and the subject-word limit were chosen on a list of 20 small-talk
requests and the dev halves (docs: intents and evidence): 1 of the dev sets' 4,138 requests is cut
this way with the general model, none with the shipped one (24 before the subject-word rule); of 20
small-talk requests written before the closed-class words were set aside, 11–14 % still send a catalog
tool with them (65–81 % of another such list without the check).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sk_toolfilter.retrieval.gloss import with_english_gloss
from sk_toolfilter.retrieval.text import CJK_RUN, tokenize

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

MAX_READ_CHARS = 1000  # a request this long is about something; its first words tell
# What is left of an English contraction once the tokenizer splits at the apostrophe ("you're").
_CONTRACTION_TAILS = frozenset({"re", "ve", "ll", "d", "m", "s", "t"})
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
    words = tokenize(with_english_gloss(request[:MAX_READ_CHARS]))
    return [t for t in words if t not in _SMALL_TALK_WORDS and not CJK_RUN.search(t)]


def may_be_small_talk(request: str) -> bool:
    """False for a request about something (more than :data:`MAX_SUBJECT_WORDS` subject words)."""
    return len(subject_words(request)) <= MAX_SUBJECT_WORDS


@dataclass(frozen=True)
class SmallTalkVerdict:
    """How close a request is to small talk and to its best tool (cosine similarities)."""

    small_talk: float
    best_tool: float
    closest: str
    subjectless: bool = False

    def reason(self) -> str:
        topic = self.closest.split(":", 1)[0]
        names_nothing = " and names nothing a tool could act on" if self.subjectless else ""
        return (
            f"the request reads as small talk ({topic!r} {self.small_talk:.2f} vs the best tool "
            f"{self.best_tool:.2f}){names_nothing}: no tool has real evidence"
        )


def judge_small_talk(
    query_vector: np.ndarray,
    small_talk_vectors: np.ndarray,
    tool_cosines: np.ndarray,
    margin: float,
    *,
    subjectless: bool = False,
) -> SmallTalkVerdict | None:
    """A verdict when the request is small talk (closer to it than to the best tool + `margin`, or
    `subjectless`: no word a tool could act on), else None."""
    if small_talk_vectors.size == 0 or tool_cosines.size == 0:
        return None
    similarities = small_talk_vectors @ np.asarray(query_vector, dtype=np.float32)
    closest = int(np.argmax(similarities))
    best_tool = float(np.max(tool_cosines))
    if not subjectless and float(similarities[closest]) <= best_tool + margin:
        return None
    return SmallTalkVerdict(float(similarities[closest]), best_tool, SMALL_TALK[closest], subjectless)
