"""Every public name of 0.1 imports through its 0.1 module path (until 0.3), or is listed as removed."""

import importlib
import sys
import warnings

import pytest

from sk_toolfilter._compat import MOVED, REMOVED_NAMES

# The public names (top-level functions, classes and constants) of each 0.1 module, read from the
# 0.1 sources (git show 1c29d53^:sk_toolfilter/<module>.py).
PUBLIC_NAMES_0_1 = {
    "agent": ("Toolset", "LoadedAgent", "create_chat_service", "execution_settings", "open_toolset", "load_agent"),
    "agent_file": (
        "SECRET_KEYS",
        "ModelSpec",
        "InstructionsFile",
        "PluginSource",
        "MCPSource",
        "CatalogSource",
        "ToolSource",
        "SampleQuery",
        "AgentSpec",
        "substitute_env",
        "parse_agent",
        "load_agent_file",
    ),
    "batching": ("EmbedFunction", "QueryBatcher"),
    "bm25": ("tool_tokens", "query_tokens", "tool_key", "BM25Index"),
    "cache": ("FORMAT_VERSION", "default_cache_dir", "text_key", "EmbeddingCache", "CachedEmbeddings", "cached"),
    "catalog": ("load_catalog",),
    "cutoff": ("ToolDecision", "apply_cutoff"),
    "discovery": (
        "TIERS",
        "TIER_LIMITS",
        "MIN_MATCH_SCORE",
        "one_line_summary",
        "signature",
        "render_full",
        "coerce_limit",
        "render_matches",
        "DiscoveryPlugin",
        "discovered_in",
    ),
    "embeddings": (
        "LOCAL_MODEL_ID",
        "LocalEmbeddingGenerator",
        "create_embedding_service",
        "embedding_model_id",
        "embed_texts",
    ),
    "eval_run": ("COLUMNS", "render_table", "render_markdown", "run_eval"),
    "evaluation": ("LabelledQuery", "MethodResult", "load_queries", "evaluate_method", "results_to_json"),
    "faults": ("CircuitOpenError", "EmbeddingCircuit"),
    "fusion": (
        "normalize_by_max",
        "normalize_cosine",
        "rank_order",
        "reciprocal_rank_fusion",
        "zscore",
        "zscore_blend",
    ),
    "guard": ("refusal_reason", "attach_execution_guard"),
    "index": ("ProgressCallback", "MAX_EMBED_CHARS", "ToolIndex"),
    "manager": ("SettingsT", "DISCOVERY_FUNCTIONS", "kernel_fingerprint", "Selection", "ToolFilterManager"),
    "metadata": ("ParameterMetadata", "ToolMetadata", "tool_from_function", "crawl_kernel", "openai_tool_definition"),
    "metrics": ("recall_at_k", "complete_at_k", "ndcg_at_k", "reciprocal_rank"),
    "names": ("NameMatcher",),
    "query": ("QueryStrategy", "MAX_QUERY_CHARS", "build_query", "split_query_parts"),
    "report": (
        "QueryReport",
        "prefix_stable_share",
        "ConversationReport",
        "TokenReport",
        "build_token_report",
        "render_terminal",
        "render_markdown",
        "render_chart_svg",
        "write_report",
    ),
    "search": ("MAX_QUERY_CHARS", "MAX_QUERY_PARTS", "ScoredTool", "Ranking", "rank_tools"),
    "service": ("NO_FUNCTION", "tool_name", "FilteredChatCompletion", "wrap_chat_service", "enable_tool_filtering"),
    "settings": ("SettingsT", "allowed_by_behavior", "clone_with_functions"),
    "sources": ("DEFINITION_ONLY", "SafeMCPStdioPlugin", "add_native_plugin", "catalog_plugins", "add_sources"),
    "sticky": ("MAX_CONVERSATIONS", "conversation_key", "StickyLists"),
    "text": ("STOPWORDS", "split_identifier", "humanize_identifier", "tokenize"),
    "tokens": ("ENCODINGS", "count_tokens", "compact_json", "count_json_tokens"),
    "usage": ("UsageTracker",),
    "visibility": ("ToolPolicy",),
    "wire": ("DEFAULT_MODEL", "text_reply", "tool_call_reply", "RecordingTransport", "offline_chat_service"),
}


@pytest.mark.parametrize("module", sorted(PUBLIC_NAMES_0_1))
def test_every_0_1_name_imports_through_its_old_path_with_a_deprecation_warning(module):
    assert module in MOVED
    fresh = f"sk_toolfilter.{module}" not in sys.modules  # the warning comes with the first import
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = importlib.import_module(f"sk_toolfilter.{module}")
    removed = REMOVED_NAMES.get(module, {})
    missing = [n for n in PUBLIC_NAMES_0_1[module] if n not in removed and not hasattr(old, n)]
    assert not missing, f"sk_toolfilter.{module} lost {missing}"
    assert not fresh or any(issubclass(w.category, DeprecationWarning) for w in caught)


def test_the_names_reported_in_the_issue():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from sk_toolfilter.service import create_tool_filter, enable_tool_filtering, wrap_chat_service

    from sk_toolfilter import create_tool_filter as new_create, enable_tool_filtering as new_enable

    assert enable_tool_filtering is new_enable and create_tool_filter is new_create and callable(wrap_chat_service)


def test_the_warning_of_an_old_path_names_where_each_moved_name_can_be_imported():
    import importlib
    import sys
    import warnings

    from sk_toolfilter._compat import MOVED_NAMES

    for old, names in MOVED_NAMES.items():
        sys.modules.pop(f"sk_toolfilter.{old}", None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            importlib.import_module(f"sk_toolfilter.{old}")
        message = str(caught[0].message)
        for name, home in names.items():
            module = home.partition(":")[0]
            if module == "_compat":
                continue
            assert f"sk_toolfilter.{module}" in message, (old, message)
            assert hasattr(importlib.import_module(f"sk_toolfilter.{module}"), name), (module, name)


def test_load_agent_is_a_public_name():
    import sk_toolfilter
    from sk_toolfilter import load_agent
    from sk_toolfilter.agents.agent import load_agent as where_it_lives

    assert load_agent is where_it_lives and "load_agent" in sk_toolfilter.__all__


def test_the_package_keeps_its_top_level_small_and_the_basics_keep_their_old_paths():
    import importlib
    import sys
    import warnings
    from pathlib import Path

    import sk_toolfilter

    top = sorted(p.stem for p in Path(sk_toolfilter.__file__).parent.glob("*.py"))
    assert len(top) <= 8, top
    for name in ("progress", "input_files", "redaction", "wire_json", "tokenizer", "errors"):
        sys.modules.pop(f"sk_toolfilter.{name}", None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            old = importlib.import_module(f"sk_toolfilter.{name}")
        assert old is importlib.import_module(f"sk_toolfilter.basics.{name}")
        # (a ResourceWarning of an earlier test's garbage may be recorded too: only the deprecation counts)
        moved = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
        assert moved and f"sk_toolfilter.basics.{name}" in moved[0]


def test_an_old_path_warns_at_the_users_own_line_under_pythons_default_filters(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "user_script.py"
    script.write_text(
        "import importlib\n"
        "import sk_toolfilter.progress\n"
        "from sk_toolfilter.manager import ToolFilterManager\n"
        "importlib.import_module('sk_toolfilter.service')\n"
    )
    # No -W flag: Python's default filters show a DeprecationWarning only when it points at __main__.
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True)
    for line, old in ((2, "progress"), (3, "manager"), (4, "service")):
        assert f"user_script.py:{line}: DeprecationWarning: sk_toolfilter.{old} moved to" in result.stderr, old


def test_every_moved_name_and_nested_path_warns_at_the_users_own_line(tmp_path):
    """The rows of MOVED_ATTRIBUTES (names a module kept for its callers) and the nested old paths
    (``measure.tokens``) warn like the flat ones: at the importing line, under default filters."""
    import subprocess
    import sys

    from sk_toolfilter._compat import MOVED, MOVED_ATTRIBUTES

    lines = [
        f"from sk_toolfilter.{module} import {name}" for module, names in MOVED_ATTRIBUTES.items() for name in names
    ]
    nested = [old for old in MOVED if "." in old]
    lines += [f"import sk_toolfilter.{old}" for old in nested]
    script = tmp_path / "user_script.py"
    script.write_text("\n".join(lines) + "\n")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True)
    number = 0
    for module, names in MOVED_ATTRIBUTES.items():
        for name, home in names.items():
            number += 1
            expected = f"user_script.py:{number}: DeprecationWarning: sk_toolfilter.{module}.{name} moved to "
            assert f"{expected}sk_toolfilter.{home}.{name}" in result.stderr, (module, name, result.stderr)
    for old in nested:
        number += 1
        assert f"user_script.py:{number}: DeprecationWarning: sk_toolfilter.{old} moved to" in result.stderr, old


def test_a_removed_name_says_what_replaced_it():
    for module, names in REMOVED_NAMES.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            old = importlib.import_module(f"sk_toolfilter.{module}")
        for name, replacement in names.items():
            with pytest.raises(AttributeError, match=r"was removed in 0\.2; use ") as info:
                getattr(old, name)
            assert replacement in str(info.value)


def test_compat_imports_no_layer_above_it():
    import ast
    from pathlib import Path

    source = (Path(importlib.import_module("sk_toolfilter._compat").__file__)).read_text()
    strings = [n.value for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    assert not [s for s in strings if s.startswith("sk_toolfilter.integration")]  # no import by string either
