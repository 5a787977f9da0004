"""MCP tool results as the model reads them: text once, compact JSON, short notes for media."""

from mcp import types

from sk_toolfilter.agents.mcp.results import render_tool_result


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def test_text_reaches_the_model_as_written_and_once():
    assert render_tool_result(types.CallToolResult(content=[text("Echo: hi")])) == "Echo: hi"


def test_structured_content_that_repeats_the_text_is_not_sent_twice():
    pretty = '{\n  "timezone": "Europe/Paris",\n  "is_dst": false\n}'
    result = types.CallToolResult(
        content=[text(pretty)], structuredContent={"timezone": "Europe/Paris", "is_dst": False}
    )
    assert render_tool_result(result) == '{"timezone":"Europe/Paris","is_dst":false}'


def test_a_wrapped_plain_value_counts_as_the_same_data():
    result = types.CallToolResult(content=[text("saved note 1")], structuredContent={"result": "saved note 1"})
    assert render_tool_result(result) == "saved note 1"
    listed = types.CallToolResult(content=[text("a"), text("b")], structuredContent={"result": ["a", "b"]})
    assert render_tool_result(listed) == "a\nb"


def test_structured_content_without_text_becomes_compact_json():
    result = types.CallToolResult(content=[], structuredContent={"temperature": 21, "städte": ["Köln"]})
    assert render_tool_result(result) == '{"temperature":21,"städte":["Köln"]}'


def test_structured_content_that_differs_from_the_text_is_added():
    result = types.CallToolResult(content=[text("Weather for Paris")], structuredContent={"t": 21})
    assert render_tool_result(result) == 'Weather for Paris\n{"t":21}'


def test_media_and_resources_become_one_line_notes():
    result = types.CallToolResult(
        content=[
            types.ImageContent(type="image", data="A" * 4096, mimeType="image/png"),
            types.ResourceLink(type="resource_link", name="log", uri="file:///var/log/app.log", mimeType="text/plain"),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(uri="memo://1", text="the memo", mimeType="text/plain"),
            ),
            types.EmbeddedResource(
                type="resource", resource=types.BlobResourceContents(uri="blob://1", blob="AAAA", mimeType="x/zip")
            ),
        ]
    )
    assert render_tool_result(result).splitlines() == [
        "[image: image/png, 3.0 KB]",
        "[resource link: log <file:///var/log/app.log> (text/plain)]",
        "[resource <memo://1>]",
        "the memo",
        "[resource <blob://1>: x/zip, 3 bytes]",
    ]


def test_errors_and_empty_results_say_so():
    failed = types.CallToolResult(content=[text("no such city")], isError=True)
    assert render_tool_result(failed) == "error: no such city"
    assert render_tool_result(types.CallToolResult(content=[])) == "(the tool returned no output)"


def test_text_that_only_looks_like_json_is_left_alone():
    assert render_tool_result(types.CallToolResult(content=[text("[draft] {not json}")])) == "[draft] {not json}"
