"""Tokenizing tool metadata and queries for lexical search.

Identifiers are split into words (``send_email``, ``send-email``, ``sendEmail``, ``HTTPServer2``
→ ``send email`` …), text is lowercased and accent-folded, CJK runs become characters and
character bigrams, English stopwords are dropped, and ASCII words are Snowball-stemmed.
"""

from __future__ import annotations

import re
import unicodedata

import Stemmer

from sk_toolfilter.basics.text_cache import bounded_text_cache

# Runs of letters or digits in any script; "_" and "-" separate words.
_WORD_RUN = re.compile(r"[^\W_]+")
# Zero-width boundaries inside a run: fooBar, HTTPServer, abc123, 123abc.
_INNER_BOUNDARY = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[^\W\d_])(?=\d)|(?<=\d)(?=[^\W\d_])")
CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+")

STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has
    have having he her here hers herself him himself his how i if in into is it its itself just let
    lets me might more most must my myself no nor not now of off on once only or other our ours
    ourselves out over own please same shall she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were what
    when where which while who whom why will with would you your yours yourself yourselves hi hello
    hey thanks thank ok okay yes also using use want need like help tell give show s t
    """.split()  # noqa: SIM905
)

_stemmer = Stemmer.Stemmer("english")


def split_identifier(text: str) -> list[str]:
    """Split text into words at separators, camelCase humps and letter/digit boundaries.

    Case is preserved: ``split_identifier("getHTTPStatus_v2")`` → ``["get", "HTTP", "Status", "v", "2"]``.
    """
    words: list[str] = []
    for run in _WORD_RUN.findall(text):
        words.extend(part for part in _INNER_BOUNDARY.split(run) if part)
    return words


@bounded_text_cache(max_bytes=4 << 20)
def humanize_identifier(name: str) -> str:
    """``send_email`` → ``send email``; used for embedding text."""
    return " ".join(split_identifier(name)).lower()


@bounded_text_cache(max_bytes=4 << 20)
def _normalize_word(word: str) -> tuple[str, ...]:
    if word.isascii():
        return (word.lower(),)  # nothing to fold, no CJK
    # Compatibility-fold first (accents off, "𝐀" → "A", "ﬁ" → "fi"), then lowercase.
    folded = "".join(ch for ch in unicodedata.normalize("NFKD", word) if not unicodedata.combining(ch)) or word
    folded = folded.lower()
    if CJK_RUN.search(folded):
        return _cjk_tokens(folded)
    return (folded,)


def _cjk_tokens(word: str) -> tuple[str, ...]:
    tokens: list[str] = []
    pos = 0
    for match in CJK_RUN.finditer(word):
        if match.start() > pos:
            tokens.append(word[pos : match.start()])
        run = match.group()
        tokens.extend(run)
        tokens.extend(run[i : i + 2] for i in range(len(run) - 1))
        pos = match.end()
    if pos < len(word):
        tokens.append(word[pos:])
    return tuple(tokens)


@bounded_text_cache(max_bytes=4 << 20)
def _stem(word: str) -> str:
    return _stemmer.stemWord(word) if word.isascii() and word.isalpha() else word


def tokenize(text: str, *, stem: bool = True, drop_stopwords: bool = True) -> list[str]:
    """Lexical tokens of `text`, in order, duplicates kept."""
    key = (text, stem, drop_stopwords)
    recent = _recent_texts.get(key)
    if recent is not None:
        return list(recent)
    tokens: list[str] = []
    known = _run_tokens.entries.get  # a kept run is one lookup, not one call (half the time of a request's words)
    for run in _WORD_RUN.findall(text):
        found = known((run, stem, drop_stopwords))
        tokens.extend(found[0] if found is not None else _run_tokens(run, stem, drop_stopwords))
    if len(_recent_texts) >= RECENT_TEXTS:
        _recent_texts.pop(next(iter(_recent_texts)), None)  # the oldest (a lost race only costs a miss)
    _recent_texts[key] = tuple(tokens)
    return tokens


RECENT_TEXTS = 4
"""Texts whose tokens are kept whole, newest last: a request is read by BM25 and by the small-talk check
(the same tokens, one pass). Bounded in entries, each at most a request's bounded length."""
_recent_texts: dict[tuple[str, bool, bool], tuple[str, ...]] = {}


@bounded_text_cache(max_bytes=16 << 20)
def _run_tokens(run: str, stem: bool, drop_stopwords: bool) -> tuple[str, ...]:
    """The tokens of one run of letters and digits (``getHTTPStatus2``). A catalog's vocabulary is
    small and repeats: caching per run makes tokenizing thousands of tools a dictionary lookup per word
    (bounded in bytes; a long run, such as a pasted token, is never kept)."""
    tokens: list[str] = []
    for part in _INNER_BOUNDARY.split(run):
        if not part:
            continue
        for token in _normalize_word(part):
            if drop_stopwords and token in STOPWORDS:
                continue
            tokens.append(_stem(token) if stem else token)
    return tuple(tokens)


# Sentence ends (not after common abbreviations), semicolons, and sequencing words that start a new request.
_ABBREVIATIONS = "".join(
    rf"(?<!\b{re.escape(a)})" for a in ("e.g.", "i.e.", "etc.", "vs.", "Mr.", "Mrs.", "Ms.", "Dr.", "St.", "No.")
)
# The cheap test first: the ten abbreviation look-behinds run only after a sentence mark, not at every
# character (same matches, 7x faster on the dev requests).
_PART_BOUNDARY = re.compile(
    r"(?<=[.!?])" + _ABBREVIATIONS + r"\s+(?=[\"'(\[]?[A-Z0-9])|;\s+|\n+",
)


def split_query_parts(query: str) -> list[str]:
    """The request's parts: sentences (abbreviations and decimals kept whole), ``;`` clauses, lines.

    Splitting on " and " is avoided on purpose: it cuts single requests ("bread and butter").
    """
    parts = [p.strip() for p in _PART_BOUNDARY.split(query)]
    return [p for p in parts if len(p) > 2]


def _single_spaced(parts: list[str]) -> list[str]:
    """Each part with its runs of whitespace as one space: the boundary patterns below start with
    ``\\s+``, and on a long run of whitespace a failing match would retry every shorter run (a request
    padded with 20,000 spaces took 14 s to split). The tokenizers read both forms alike."""
    return [" ".join(part.split()) for part in parts]


# Inside a sentence, a list of actions: "lock the doors, press the brake and start the engine".
_CLAUSE_BOUNDARY = re.compile(
    r"(,\s*(?:and\s+then\s+|and\s+|then\s+)?|\s+and\s+then\s+|\s+then\s+|\s+and\s+)", re.IGNORECASE
)
MIN_CLAUSE_WORDS = 2


def split_request_clauses(request: str) -> list[str]:
    """The needs of one request: its parts (:func:`split_query_parts`), and within each part the
    actions of a list joined by commas, "and" or "then". A piece with fewer than
    ``MIN_CLAUSE_WORDS`` content words stays with the piece before it: "buy bread and butter" is
    one need, "average 3, 5 and 10, then round it" two."""
    return [need for part in _single_spaced(split_query_parts(request)) for need in _pieces(_CLAUSE_BOUNDARY, part)]


def _pieces(boundary: re.Pattern[str], text: str) -> list[str]:
    """`text` cut at `boundary` (a pattern with one group: the separator). A piece with fewer than
    ``MIN_CLAUSE_WORDS`` content words joins the piece before it, the separator between them kept;
    a short first piece joins the next. Each piece is tokenized once."""
    parts = boundary.split(text)  # text, separator, text, ...
    if len(parts) == 1:  # no boundary: nothing to count (most requests)
        return [text.strip()] if text.strip() else []
    merged: list[str] = []
    last_words = 0  # content words of merged[-1]
    for position in range(0, len(parts), 2):
        piece = parts[position]
        words = len(tokenize(piece, stem=False))
        if merged and (words < MIN_CLAUSE_WORDS or last_words < MIN_CLAUSE_WORDS):
            merged[-1] += parts[position - 1] + piece
            last_words += words
        else:
            merged.append(piece)
            last_words = words
    return [m.strip() for m in merged if m.strip()]


# Inside a sentence, words that start the next step of a request: "create the file, then change
# a word in it", "book the flight and after that a hotel", "save it; once that's done, email it",
# "find a course and also recommend some music". Plain "and" and commas are not among them: they join
# the objects of one action as often as two actions ("median and variance"). "next", "finally" and
# "lastly" start a step only after a comma or "and" ("next week" names a time).
_STEP_WORDS = (
    r"(?:then|after\s+that|afterwards|after\s+which|subsequently"
    r"|once\s+(?:that\s+is\s+|that's\s+|it\s+is\s+|it's\s+)?(?:done|finished))"
)
_CLOSING_STEP_WORDS = r"(?:next(?!\s+to\b)|finally|lastly)"  # "next to it" is a place
_STEP_BOUNDARY = re.compile(
    r"(?=[,\s])"  # every boundary starts at a comma or a space: other characters fail at once (2x faster)
    rf"((?:,\s*|\s+)(?:and\s+)?{_STEP_WORDS}(?:\s*,)?\s+"
    rf"|(?:,\s*(?:and\s+)?|\s+and\s+){_CLOSING_STEP_WORDS}(?:\s*,)?\s+"
    r"|,\s*followed\s+by\s+"
    r"|(?:,\s*|\s+)and\s+also\s+|,\s*(?:also|additionally)\s+)",
    re.IGNORECASE,
)
# Every step boundary holds one of these words: an ASCII sentence without any has none (most
# sentences; a substring test is much cheaper than the pattern at every comma and space).
_STEP_KEYS = ("then", "after", "subsequently", "once", "next", "finally", "lastly", "followed", "also", "additionally")


def _steps(sentence: str) -> list[str]:
    """The steps of one sentence (:data:`_STEP_BOUNDARY`)."""
    if sentence.isascii():  # (outside ASCII, case-insensitive matching is more than lower())
        lowered = sentence.lower()
        if not any(key in lowered for key in _STEP_KEYS):
            return [sentence.strip()] if sentence.strip() else []
    return _pieces(_STEP_BOUNDARY, sentence)


# A sentence that opens by adding to the one before ("Also, …", "Additionally …"), or as its next step
# ("Then …", "After that, …", "Finally …", "Next, …"; a clause after ";" too), asks for more.
_NEXT_SENTENCE = re.compile(
    r"^(?:(?:also|additionally|in\s+addition|besides|moreover|furthermore|on\s+top\s+of\s+that"
    rf"|{_STEP_WORDS}|finally|lastly)\b|next\s*,)",  # "Next week …" names a time; "Next, …" a step
    re.IGNORECASE,
)


# A list: two or more lines opening with a marker ("- …", "* …", "• …", "1. …", "2) …", "(3) …", "b) …").
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*•]|\(?\d{1,2}[.)]|\(?[a-h]\))[ \t]+(?=\S)", re.MULTILINE)
# Numbered items inside a line: "… 1) create a file … 2) email it …", "(1) … and (2) …".
_INLINE_ITEM = re.compile(r"(?:[,;]?\s+(?:and\s+|then\s+)?|^)\(?(\d{1,2})\)\s+")
_LINE_BREAK = re.compile("(\n)")  # between a list's items (one group: the separator, as _pieces needs)


def _list_items(request: str) -> tuple[str, bool]:
    """`request` with one list item per line and the markers removed, and whether it is a list (two
    or more marked lines, or items numbered from 1 inside a line)."""
    # Each line single-spaced first: on a long run of whitespace the patterns would retry every shorter run.
    text = "\n".join(" ".join(line.split()) for line in request.splitlines())
    if ")" in text and [int(m.group(1)) for m in _INLINE_ITEM.finditer(text)][:2] == [1, 2]:
        return _INLINE_ITEM.sub("\n", text), True
    if len(_LIST_ITEM.findall(text)) < 2:
        return request, False
    return _LIST_ITEM.sub("", text), True


def split_request_intents(request: str, min_sentences: int = 3) -> list[str]:
    """The intents of a request, or [] when it reads as one: every step a sequencing or adding
    word starts ("…, then …", "… and after that …", "… and also …") is one; every item of a list
    (marked lines, or "1) … 2) …" inside a line) is one; every sentence is one when a sentence after
    the first opens by adding to it or as its next step ("… today? Also, …", "… . Then …") or the
    request has at least `min_sentences` sentences (:func:`split_query_parts`). A piece with fewer than
    ``MIN_CLAUSE_WORDS`` content words stays with its neighbour.

    >>> split_request_intents("Create Work Plan.txt with the agenda, then replace 'quality' with 'care'")
    ['Create Work Plan.txt with the agenda', "replace 'quality' with 'care'"]
    >>> split_request_intents("Will it rain today? Also, what do houses cost here?")
    ['Will it rain today?', 'Also, what do houses cost here?']
    >>> split_request_intents("Determine the median and variance of 3, 4, 5.")
    []
    """
    if min_sentences > 1 and _one_plain_sentence(request):
        return []
    request, listed = _list_items(request)
    sentences = _single_spaced(split_query_parts(request))
    intents = [step for sentence in sentences for step in _steps(sentence)]
    stepped = len(intents) > len(sentences)
    added = any(_NEXT_SENTENCE.match(sentence) for sentence in sentences[1:])
    if listed:  # a lead-in ("Please:", "Do the following:") is no item: it joins the first one
        intents = [" ".join(item.split()) for item in _pieces(_LINE_BREAK, "\n".join(intents))]
    return intents if stepped or added or listed or len(sentences) >= min_sentences else []


def _one_plain_sentence(request: str) -> bool:
    """Whether `request` is one sentence without a list or a step (what most requests are), read in one
    search instead of the patterns: no line boundary (``str.splitlines``'), ``;`` or ``)`` (no part
    boundary, no list), no sentence mark before a space (one part) and, in ASCII, none of the words a
    step starts with."""
    if _NOT_PLAIN.search(request) is not None:
        return False
    return request.isascii() and not any(key in request.lower() for key in _STEP_KEYS)


_NOT_PLAIN = re.compile("[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029;)]|[.!?]\\s")


def clean_text(text: str) -> str:
    """`text` as valid UTF-8: lone surrogates (``\\ud800``) become U+FFFD, so no service rejects it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)  # one replacement character per surrogate
    return text


_SURROGATE = re.compile("[\ud800-\udfff]")
