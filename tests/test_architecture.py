"""The package layout is a contract: lower layers never reach up into agents or MCP.

import-linter (run by .ci/run, configured in pyproject.toml) checks the layers between our own
packages; it sees external packages only at their top level, so this test covers the parts of
Semantic Kernel the ranking core must not depend on.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "sk_toolfilter"
FORBIDDEN_FOR_CORE = ("semantic_kernel.agents", "semantic_kernel.connectors.mcp", "mcp", "httpx", "yaml")


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("layer", ["retrieval", "selection"])
def test_ranking_and_selection_never_import_agents_or_mcp(layer):
    offenders = {
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in (PACKAGE / layer).rglob("*.py")
        for name in imported_modules(path)
        if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN_FOR_CORE)
    }
    assert not offenders


def test_every_layer_is_a_package_with_a_docstring():
    for layer in ("retrieval", "selection", "integration", "agents", "measure"):
        init = PACKAGE / layer / "__init__.py"
        assert ast.get_docstring(ast.parse(init.read_text())), f"{layer}/__init__.py needs a docstring"


def test_old_flat_module_paths_still_import_with_a_deprecation_warning():
    import importlib
    import sys

    sys.modules.pop("sk_toolfilter.service", None)
    with pytest.warns(DeprecationWarning, match="sk_toolfilter.integration.service"):
        old = importlib.import_module("sk_toolfilter.service")
    from sk_toolfilter.integration import service

    # A view of the new module that also has the 0.1 names that moved elsewhere (tests/test_old_import_paths.py).
    assert old.wrap_chat_service is service.wrap_chat_service
    assert old.FilteredChatCompletion is service.FilteredChatCompletion


def test_every_library_log_line_goes_through_the_redaction_filter():
    """Modules log through ``library_logger`` (which scrubs secrets), never a bare ``logging.getLogger``."""
    offenders = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path.name != "redaction.py" and "getLogger(__name__)" in path.read_text()
    ]
    assert not offenders


def test_the_package_has_no_import_cycle():
    import grimp

    graph = grimp.build_graph("sk_toolfilter", cache_dir=None)
    cycles = sorted(
        {
            tuple(sorted((module, imported)))
            for module in graph.modules
            for imported in graph.find_modules_directly_imported_by(module)
            if imported.startswith("sk_toolfilter") and graph.chain_exists(importer=imported, imported=module)
        }
    )
    assert cycles == []


MAX_FUNCTION_LINES = 60


def test_no_function_of_the_library_is_longer_than_sixty_lines():
    # One step per function: a function that grows past a screen is split into named steps.
    long = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []


def test_the_public_names_are_written_once_beside_their_home_and_type_checkers_see_the_same():
    import sk_toolfilter

    init = ast.parse((PACKAGE / "__init__.py").read_text())
    checked = {
        alias.name: node.module
        for block in ast.walk(init)
        if isinstance(block, ast.If) and getattr(block.test, "id", "") == "TYPE_CHECKING"
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert checked == sk_toolfilter._HOME  # every public name, from the module that defines it
    for name, module in checked.items():
        value = getattr(sk_toolfilter, name)
        assert getattr(value, "__module__", module) == module, name
    assert sorted(sk_toolfilter.__all__) == sorted([*checked, "__version__"])


def test_every_benchmark_script_has_a_row_in_the_benchmarks_index():
    folder = PACKAGE.parent / "benchmarks"
    index = (folder / "README.md").read_text()
    assert [p.name for p in folder.glob("*.py") if f"`{p.name}`" not in index] == []


def test_the_manager_keeps_construction_lifecycle_and_thin_verbs_only():
    # One request is read top to bottom in selection/request_path.py; the manager stays small.
    tree = ast.parse((PACKAGE / "selection" / "manager.py").read_text())
    (manager,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ToolFilterManager"]
    assert manager.end_lineno - manager.lineno + 1 <= 250  # type: ignore[operator]
    path = ast.parse((PACKAGE / "selection" / "request_path.py").read_text())
    steps = {n.name for n in ast.walk(path) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    assert {"offer", "read", "learn_from_turns", "select"} <= steps
