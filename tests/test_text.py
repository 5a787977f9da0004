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
