"""Runnable offline: index a kernel, select tools, clone settings, and filter a real SK request.

python examples/quickstart.py
"""

import asyncio

from semantic_kernel import Kernel
from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
from semantic_kernel.connectors.ai.open_ai import OpenAIChatPromptExecutionSettings
from semantic_kernel.functions import KernelArguments

from sk_toolfilter import (
    ToolFilterConfig,
    create_tool_filter,
    enable_tool_filtering,
)
from sk_toolfilter.demo import MathPlugin, TextPlugin, TimePlugin
from sk_toolfilter.measure.wire import RecordingTransport, offline_chat_service


async def main() -> None:
    kernel = Kernel()
    kernel.add_plugin(MathPlugin(), "Math")
    kernel.add_plugin(TimePlugin(), "Time")
    kernel.add_plugin(TextPlugin(), "Text")

    config = ToolFilterConfig(top_k=3)  # hybrid search with the offline embedding model
    manager = await create_tool_filter(kernel, config)

    print(await manager.filter_tools("what time is it in Tokyo?"))

    base = OpenAIChatPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())
    settings = await manager.prepare_execution_settings("convert 5 km to miles", base)
    print(settings.function_choice_behavior.filters)

    # Drop-in: wrap the kernel's chat service once; existing invoke code is unchanged.
    transport = RecordingTransport()  # a real OpenAIChatCompletion, HTTP answered offline
    kernel.add_service(offline_chat_service(transport))
    enable_tool_filtering(kernel, manager)
    arguments = KernelArguments(settings=base, input="reverse the text stressed")
    await kernel.invoke_prompt("{{$input}}", arguments=arguments)
    print("tools on the wire:", transport.tool_names())
    await manager.aclose()  # finish what it is learning in the background, write learning.file if set


if __name__ == "__main__":
    asyncio.run(main())
