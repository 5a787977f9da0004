import pytest

from sk_toolfilter.retrieval.text import humanize_identifier, split_identifier, tokenize


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("send_email", ["send", "email"]),
        ("send-email", ["send", "email"]),
        ("sendEmail", ["send", "Email"]),
        ("HTTPServer", ["HTTP", "Server"]),
        ("getHTTPStatus_v2", ["get", "HTTP", "Status", "v", "2"]),
        ("utf8decode", ["utf", "8", "decode"]),
        ("Email-send_email", ["Email", "send", "email"]),
        ("brave_web_search", ["brave", "web", "search"]),
    ],
)
def test_identifiers_split_into_words(text, words):
    assert split_identifier(text) == words


def test_tokens_are_lowercase_stemmed_and_without_stopwords():
    assert tokenize("Please send the Emails to Bob") == ["send", "email", "bob"]


def test_stemming_and_stopwords_can_be_turned_off():
    assert tokenize("the emails", stem=False, drop_stopwords=False) == ["the", "emails"]


def test_accented_words_match_their_unaccented_form():
    assert tokenize("résumé café") == tokenize("resume cafe")


def test_non_ascii_words_are_kept():
    assert tokenize("Привет мир") == ["привет", "мир"]


def test_chinese_text_yields_characters_and_bigrams():
    tokens = tokenize("天气预报")
    assert {"天", "气", "天气", "预报"} <= set(tokens)


def test_empty_and_punctuation_only_text_have_no_tokens():
    assert tokenize("") == []
    assert tokenize("  ?!… ") == []


def test_humanized_identifier_reads_as_words():
    assert humanize_identifier("getCurrentWeather_v2") == "get current weather v 2"


def test_a_caller_changing_its_tokens_does_not_change_the_next_reading_of_the_same_text():
    for _ in range(2):  # the second reading is the kept one
        tokens = tokenize("Send the quarterly report to finance")
        tokens.append("injected")
    assert tokenize("Send the quarterly report to finance") == ["send", "quarter", "report", "financ"]


def _requests() -> list[str]:
    """The bundled dev requests and each with a boundary of every kind inserted (lines, ``;``, ``)``,
    sentences, steps, Unicode line separators)."""
    import json
    import random
    from pathlib import Path

    folder = Path(__file__).resolve().parents[1] / "examples" / "data"
    requests = [
        json.loads(line)["query"]
        for path in sorted(folder.glob("*/dev.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    rng = random.Random(0)
    inserts = ["\r", "\x85", "\u2028", "\x0b", ". Also", "; ", ")", " then ", "? Next, ", "\n- a\n- b", "1) a 2) b"]
    for request in list(requests):
        at = rng.randrange(len(request) + 1)
        requests.append(request[:at] + rng.choice(inserts) + request[at:])
    return [*requests, "- buy milk\r- buy eggs", "a\u2028b", "Do x. Then y", "hi!", "ok.\tNext", "Fly then rest"]


@pytest.mark.parametrize("min_sentences", [2, 3])
def test_a_plain_sentence_read_without_the_patterns_splits_as_the_patterns_split_it(monkeypatch, min_sentences):
    from sk_toolfilter.retrieval import text

    requests = _requests()
    fast = [text.split_request_intents(r, min_sentences) for r in requests]
    assert sum(text._one_plain_sentence(r) for r in requests) > len(requests) // 10  # the short cut is taken
    monkeypatch.setattr(text, "_one_plain_sentence", lambda request: False)
    assert fast == [text.split_request_intents(r, min_sentences) for r in requests]
