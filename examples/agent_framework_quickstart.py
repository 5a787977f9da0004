"""Runnable offline: the same filter in Microsoft Agent Framework (the `agent-framework` extra).

python examples/agent_framework_quickstart.py
"""

import asyncio

from agent_framework import Agent, tool

from sk_toolfilter import ToolFilterConfig
from sk_toolfilter.agent_framework import create_agent_framework_filter
from sk_toolfilter.measure.wire import RecordingTransport, offline_agent_framework_client, text_reply, tool_call_reply


@tool
def track_package(tracking_number: str) -> str:
    """Track a package by its tracking number and return where it is and when it arrives."""
    return '{"status": "in transit", "arrives": "Friday"}'


@tool
def convert_currency(amount: float, source: str, target: str) -> str:
    """Convert an amount of money from one currency to another."""
    return f"{amount * 1.1:.2f} {target}"


@tool
def get_weather(city: str) -> str:
    """Current weather of a city."""
    return f"sunny in {city}"


def more_tools() -> list:
    """A catalog big enough to filter: a dozen more tools an assistant might own."""
    described = {
        "send_email": "Send an email to a recipient",
        "create_event": "Create a calendar event",
        "book_flight": "Book a flight between two airports",
        "translate_text": "Translate a text into another language",
        "search_web": "Search the web for pages",
        "play_music": "Play a song or playlist",
        "set_alarm": "Set an alarm for a time",
        "order_food": "Order food from a restaurant",
        "reserve_table": "Reserve a table at a restaurant",
        "call_taxi": "Call a taxi to an address",
        "check_balance": "Check the balance of a bank account",
        "pay_bill": "Pay a bill from a bank account",
    }
    return [tool(lambda text: "done", name=name, description=text) for name, text in described.items()]


async def main() -> None:
    tools = [track_package, convert_currency, get_weather, *more_tools()]
    tool_filter = await create_agent_framework_filter(tools, ToolFilterConfig(top_k=2))
    # Agent Framework's real OpenAI chat client; its HTTP is answered offline by the transport.
    transport = RecordingTransport(
        [tool_call_reply(("track_package", {"tracking_number": "1Z999"})), text_reply("It arrives Friday.")]
    )
    agent = Agent(
        client=offline_agent_framework_client(transport),
        instructions="You are a helpful assistant.",
        tools=tool_filter.tools,  # the agent's tools plus the two discovery tools
        middleware=tool_filter.middleware,  # narrows every model call; guards every tool call
    )
    response = await agent.run("Where is my package 1Z999?")
    print(response.text)
    for number in range(len(transport.requests)):
        print(f"model call {number + 1}: tools on the wire: {transport.tool_names(number)}")
    await tool_filter.aclose()  # finish what it is learning in the background, write learning.file if set


if __name__ == "__main__":
    asyncio.run(main())
