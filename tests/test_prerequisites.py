"""Lookup tools that give another tool's required parameter, read from the schemas."""

from sk_toolfilter.retrieval.metadata import ParameterMetadata, ToolMetadata
from sk_toolfilter.retrieval.prerequisites import MAX_PLUGIN_TOOLS, find_providers, lookup_object, providers_of


def tool(plugin: str, function: str, description: str, **required: str) -> ToolMetadata:
    parameters = tuple(ParameterMetadata(n, "str", d, required=True) for n, d in required.items())
    return ToolMetadata(plugin, function, f"{plugin}-{function}", description, parameters)


VEHICLE = [
    tool(
        "Vehicle",
        "estimate_distance",
        "Estimates the distance between two cities.",
        cityA="The zipcode of the first city.",
        cityB="The zipcode of the second city.",
    ),
    tool("Vehicle", "get_zipcode_based_on_city", "Gets the zipcode based on the city.", city="The name of the city."),
    tool("Vehicle", "startEngine", "Starts the engine.", ignitionMode="The ignition mode."),
]
ORDERS = [
    tool("Trading", "cancel_order", "Cancel an order.", order_id="ID of the order to cancel."),
    tool("Trading", "get_order_history", "Get the stock order ID history."),
    tool("Trading", "get_order_details", "Get the details of an order.", order_id="ID of the order."),
    tool(
        "Trading",
        "place_order",
        "Place an order.",
        order_type="Type of the order (Buy/Sell).",
        symbol="Symbol of the stock to trade.",
    ),
    tool("Trading", "get_symbol_by_name", "Get the symbol of a stock by company name.", name="Company name."),
    tool("Trading", "search_orders", "Search orders by keyword.", query="Words to search for in order notes."),
]


def provided(tools: list[ToolMetadata]) -> dict[str, list[tuple[str, str]]]:
    return {k: [(p.name, p.parameter) for p in v] for k, v in find_providers(tools).items()}


def test_a_lookup_whose_object_the_parameter_names_provides_it():
    links = provided(VEHICLE)
    assert links == {"Vehicle-estimate_distance": [("Vehicle-get_zipcode_based_on_city", "cityA")]}


def test_a_lookup_that_needs_the_same_parameter_does_not_provide_it():
    links = provided(ORDERS)
    # get_order_details needs an order id itself; the history and a search of orders give one.
    history_and_search = [("Trading-get_order_history", "order_id"), ("Trading-search_orders", "order_id")]
    assert links["Trading-cancel_order"] == history_and_search
    assert links["Trading-get_order_details"] == history_and_search


def test_free_text_and_kinds_have_no_provider_but_references_do():
    links = provided(ORDERS)
    # order_type is Buy/Sell (a kind), so no order lookup is linked to it; the symbol is a reference.
    assert links["Trading-place_order"] == [("Trading-get_symbol_by_name", "symbol")]
    assert "Trading-search_orders" not in links  # a query is free text: nothing looks it up


def test_tools_of_another_plugin_are_never_linked():
    other = tool("Maps", "get_zipcode", "Gets a zipcode.", city="City name.")
    links = provided([VEHICLE[0], other])
    assert links == {}


def test_only_lookup_names_give_values():
    assert lookup_object(VEHICLE[1]) == lookup_object(tool("X", "getZipcodeBasedOnCity", ""))
    assert lookup_object(VEHICLE[0]) == frozenset()  # estimate is no lookup verb
    assert lookup_object(tool("X", "get_info", "")) == frozenset()  # nothing named


def test_providers_of_lists_each_provider_once_in_the_consumers_order():
    links = find_providers(ORDERS)
    pairs = providers_of(["Trading-cancel_order", "Trading-get_order_details", "Trading-place_order"], links)
    assert [(consumer, p.name) for consumer, p in pairs] == [
        ("Trading-cancel_order", "Trading-get_order_history"),
        ("Trading-cancel_order", "Trading-search_orders"),
        ("Trading-place_order", "Trading-get_symbol_by_name"),
    ]


def test_a_plugin_the_size_of_a_catalog_is_not_linked():
    filler = [
        tool("Vehicle", f"set_option_{i}", "Sets an option.", value="The value.") for i in range(MAX_PLUGIN_TOOLS)
    ]
    assert find_providers(VEHICLE + filler) == {}
    assert find_providers(VEHICLE + filler[: MAX_PLUGIN_TOOLS - len(VEHICLE)]) != {}
