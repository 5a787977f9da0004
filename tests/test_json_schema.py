"""Tool input schemas from the wild, made valid for SK and the model (agents/json_schema.py)."""

import json

from hypothesis import given, settings, strategies as st
from semantic_kernel.functions.kernel_parameter_metadata import KernelParameterMetadata

from sk_toolfilter.agents.json_schema import resolve_refs, tool_parameters, type_label

PYDANTIC_STYLE = {
    "type": "object",
    "$defs": {
        "Address": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        "Tree": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}}},
    },
    "properties": {
        "home": {"$ref": "#/$defs/Address", "description": "Where you live"},
        "work": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}]},
        "tree": {"$ref": "#/$defs/Tree"},
        "flag": {"type": ["boolean", "string"]},
    },
    "required": ["home"],
}


def test_refs_are_inlined_and_sibling_keys_win():
    params = {p["name"]: p for p in tool_parameters(PYDANTIC_STYLE).dicts}
    assert params["home"]["schema_data"] == {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "description": "Where you live",
    }
    assert params["home"]["is_required"] and not params["work"]["is_required"]
    assert params["work"]["schema_data"]["anyOf"][0]["properties"] == {"city": {"type": "string"}}
    assert "$ref" not in json.dumps([p["schema_data"] for p in params.values()])


def test_a_recursive_model_is_cut_at_its_first_repeat():
    tree = tool_parameters(PYDANTIC_STYLE).dicts[2]["schema_data"]
    assert tree == {"type": "object", "properties": {"kids": {"type": "array", "items": {"type": "object"}}}}


def test_combinators_and_list_types_stay_as_written_with_readable_labels():
    params = {p["name"]: p for p in tool_parameters(PYDANTIC_STYLE).dicts}
    assert params["flag"]["schema_data"] == {"type": ["boolean", "string"]}
    assert {name: p["type"] for name, p in params.items()} == {
        "home": "object",
        "work": "object|null",
        "tree": "object",
        "flag": "boolean|string",
    }


def test_every_parameter_is_accepted_by_semantic_kernel():
    for p in tool_parameters(PYDANTIC_STYLE).dicts:
        KernelParameterMetadata(**p)  # raised a ValidationError for list-valued types before


def test_names_sk_would_swallow_or_reject_are_renamed_and_mapped_back():
    schema = {
        "type": "object",
        "properties": {"arguments": {"type": "string"}, "settings": {}, "café.name": {}, "cafe_name": {}},
    }
    params = tool_parameters(schema)
    names = [p["name"] for p in params.dicts]
    assert names == ["arguments_", "settings_", "cafe_name", "cafe_name_"]
    assert params.original_names == {
        "arguments_": "arguments",
        "settings_": "settings",
        "cafe_name": "café.name",
        "cafe_name_": "cafe_name",
    }


def test_double_encoded_and_odd_property_schemas_do_not_fail():
    schema = {"properties": {"a": json.dumps({"type": "integer"}), "b": 7, "c": None}, "required": "a"}
    params = {p["name"]: p for p in tool_parameters(schema).dicts}
    assert params["a"]["type"] == "integer"
    assert params["b"]["schema_data"] == {} and params["b"]["type"] == "any"
    assert tool_parameters("not a schema").dicts == []


def test_type_labels():
    assert type_label({"type": "array", "items": {"type": "string"}}) == "array[string]"
    assert type_label({"oneOf": [{"const": "c"}, {"const": 1}]}) == "string|integer"
    assert type_label({"allOf": [{"description": "x"}, {"type": "integer"}]}) == "integer"
    assert type_label({"enum": ["a", "b"]}) == "string"
    assert type_label({}) == "any"


def test_unresolvable_and_remote_refs_become_objects():
    schema = {"properties": {"a": {"$ref": "#/$defs/Missing"}, "b": {"$ref": "https://example.com/s.json"}}}
    assert resolve_refs(schema)["properties"] == {"a": {"type": "object"}, "b": {"type": "object"}}


# Random reference graphs: any mix of definitions pointing at each other, cycles included.
_names = st.sampled_from(["A", "B", "C", "D"])
_leaf = st.one_of(
    st.just({"type": "string"}),
    st.builds(lambda n: {"$ref": f"#/$defs/{n}"}, _names),
)
_node = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.builds(lambda p: {"type": "object", "properties": p}, st.dictionaries(_names, inner, max_size=3)),
        st.builds(lambda items: {"type": "array", "items": items}, inner),
        st.builds(lambda branches: {"anyOf": branches}, st.lists(inner, min_size=1, max_size=3)),
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(defs=st.dictionaries(_names, _node, min_size=1, max_size=4), root=_node)
def test_any_reference_graph_resolves_to_a_finite_schema_without_refs(defs, root):
    schema = {"type": "object", "$defs": defs, "properties": {"x": root}}
    text = json.dumps(tool_parameters(schema).dicts)
    assert "$ref" not in text and "$defs" not in text
    assert len(text) < 5_000_000


def test_a_billion_laughs_of_references_stays_small():
    defs = {
        f"L{i}": {"type": "object", "properties": {k: {"$ref": f"#/$defs/L{i + 1}"} for k in "abcd"}} for i in range(15)
    }
    defs["L15"] = {"type": "string"}
    schema = {"$defs": defs, "properties": {"x": {"$ref": "#/$defs/L0"}}}
    assert len(json.dumps(tool_parameters(schema).dicts)) < 1_000_000
