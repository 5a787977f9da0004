"""Semantic Kernel declarative agent specs run with filtering: plugins given in code, tools named in the file."""

from pathlib import Path
from typing import Annotated

import pytest
from semantic_kernel import Kernel
from semantic_kernel.functions import kernel_function

from sk_toolfilter import ConfigError
from sk_toolfilter.agents.agent import load_agent
from sk_toolfilter.agents.declarative import settings_variable
from sk_toolfilter.measure.wire import RecordingTransport, offline_chat_service, text_reply, tool_call_reply

SPEC = Path(__file__).parent / "fixtures" / "sk_declarative" / "host_agent.yaml"


class MenuPlugin:
    @kernel_function(description="List today's specials on the menu.")
    def get_specials(self) -> str:
        return "Soup: clam chowder; Salad: cobb"

    @kernel_function(description="Get the price of a menu item.")
    def get_item_price(self, item: Annotated[str, "The menu item"]) -> str:
        return f"{item}: $9.99"

    @kernel_function(description="Delete the whole menu (admin only).")
    def delete_menu(self) -> str:
        return "deleted"


class BookingPlugin:
    @kernel_function(description="Book a table at the restaurant for a number of people.")
    def book_table(self, people: Annotated[int, "How many people"]) -> str:
        return f"booked for {people}"

    @kernel_function(description="Cancel a table booking.")
    def cancel_booking(self, booking_id: Annotated[str, "The booking"]) -> str:
        return f"cancelled {booking_id}"


def kernel_with_plugins() -> Kernel:
    kernel = Kernel()
    kernel.add_plugin(MenuPlugin(), "MenuPlugin")
    kernel.add_plugin(BookingPlugin(), "BookingPlugin")
    return kernel


@pytest.fixture(autouse=True)
def settings_from_env(monkeypatch):
    monkeypatch.setenv("OPENAI_CHAT_MODEL_ID", "gpt-4o-mini")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")


async def test_requests_carry_only_the_selected_tools_of_the_named_functions():
    transport = RecordingTransport([tool_call_reply(("BookingPlugin-book_table", {"people": 4})), text_reply("Done.")])
    async with await load_agent(
        SPEC, kernel=kernel_with_plugins(), chat_service=offline_chat_service(transport)
    ) as loaded:
        response = await loaded.agent.get_response(messages="Please book a table for 4 people")
    assert str(response.message.content) == "Done."
    offered = [n for n in transport.tool_names(0) if not n.startswith("ToolSearch-")]
    # The 4 functions the spec names fit one request's budget (max(top_k, agent_loop.max_tools)): all sent.
    assert "BookingPlugin-book_table" in offered and len(offered) == 4
    assert "MenuPlugin-delete_menu" not in transport.tool_names(0)  # not named in the spec: hidden
    assert transport.requests[1]["messages"][-1]["content"] == "booked for 4"
    assert transport.requests[0]["temperature"] == 0.4
    assert loaded.spec.model.name == "gpt-4o-mini"  # ${OpenAI:ChatModelId} → $OPENAI_CHAT_MODEL_ID


async def test_a_function_the_kernel_lacks_is_an_error_naming_the_closest():
    kernel = Kernel()
    kernel.add_plugin(MenuPlugin(), "MenuPlugin")
    with pytest.raises(ConfigError, match=r"function 'BookingPlugin.book_table' is not in the kernel"):
        await load_agent(SPEC, kernel=kernel, chat_service=offline_chat_service(RecordingTransport()))


def test_sk_settings_placeholders_name_the_environment_variables_sk_reads():
    assert settings_variable("OpenAI", "ChatModelId") == "OPENAI_CHAT_MODEL_ID"
    assert settings_variable("AzureOpenAI", "ChatDeploymentName") == "AZURE_OPENAI_CHAT_DEPLOYMENT_NAME"


async def test_a_spec_loads_without_the_models_variables_when_the_model_is_not_called(monkeypatch):
    """validate, search, report and eval never call the model: OPENAI_API_KEY and the model id may be unset."""
    from sk_toolfilter.agents.agent_file import load_agent_file

    monkeypatch.delenv("OPENAI_CHAT_MODEL_ID")
    monkeypatch.delenv("OPENAI_API_KEY")
    spec = load_agent_file(SPEC)
    assert spec.model.api_key is None
    async with await load_agent(
        spec, kernel=kernel_with_plugins(), chat_service=offline_chat_service(RecordingTransport())
    ) as loaded:
        assert "BookingPlugin-book_table" in await loaded.manager.filter_tools("book a table for two")
