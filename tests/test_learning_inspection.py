"""Learning from use you can inspect without losing it: the same tools in code and in an agent file are
one catalog, a file of another catalog is never overwritten, the inspecting commands never write, and
`learn` says when it could not keep what it learned."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import pytest
import yaml

from sk_toolfilter import ToolFilterConfig, create_tool_filter
from sk_toolfilter.cli import main
from sk_toolfilter.selection.learning import learning_context
from tests.conftest import build_demo_kernel

ROOT = Path(__file__).resolve().parents[1]
CALLED = "Messaging-post_to_channel"
PAST = [f"let the ops crew know the nightly backup finished on day {i}" for i in range(6)]


def agent_file(tmp_path: Path, learning: dict[str, object], name: str = "deskbot") -> Path:
    """The bundled agent (the demo's 46 tools) under another name, with `learning`."""
    spec = yaml.safe_load((ROOT / "agent.yaml").read_text().replace("root: sandbox", f"root: {tmp_path / 'sandbox'}"))
    spec["name"] = name
    spec["tool_filtering"]["learning"] = learning
    (tmp_path / "instructions").mkdir(exist_ok=True)
    (tmp_path / "instructions" / "assistant.md").write_text("Be helpful.")
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


async def app_learns(tmp_path: Path, file: Path, **learning: object) -> None:
    """An SK app of its own (code, not an agent file) over the demo tools learns PAST into `file`."""
    kernel = build_demo_kernel(str(tmp_path / "sandbox"))
    manager = await create_tool_filter(kernel, ToolFilterConfig(learning={"file": str(file), **learning}))
    for i, request in enumerate(PAST):
        with learning_context(conversation=f"c{i}"):
            assert await manager.record(request, [CALLED]) == 1
    await manager.aclose()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_inspecting_an_apps_learning_from_an_agent_file_of_another_name_reads_it_and_changes_no_byte(tmp_path, capsys):
    learned = tmp_path / "state" / "learned.npz"
    asyncio.run(app_learns(tmp_path, learned))
    before = digest(learned)
    agent = agent_file(tmp_path, {"file": str(learned)})
    assert main(["learned", str(agent), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["requests"] == len(PAST)  # one catalog: the agent file reads what the app learned
    assert summary["learned_tools"] == {CALLED: len(PAST)}
    assert summary["file"]["state"] == "read"
    assert main(["learned", str(agent)]) == 0
    assert f"{CALLED}: {len(PAST)}" in capsys.readouterr().out
    assert main(["search", str(agent), "tell the ops crew the restore finished"]) == 0
    assert main(["explain", str(agent), "tell the ops crew the restore finished"]) == 0
    assert digest(learned) == before


def test_learn_refuses_a_file_of_another_catalog_and_leaves_it_byte_identical(tmp_path, capsys):
    learned = tmp_path / "learned.npz"
    asyncio.run(app_learns(tmp_path, learned, catalog="crm"))  # the app named its catalog
    before = digest(learned)
    calls = tmp_path / "calls.jsonl"
    calls.write_text(json.dumps({"query": "email the team the minutes", "tools": ["Messaging-send_email"]}) + "\n")
    agent = agent_file(tmp_path, {"file": str(learned)})
    assert main(["learn", str(agent), "--calls", str(calls)]) == 2
    err = capsys.readouterr().err
    assert "'crm'" in err and "'default'" in err and "learning.catalog" in err  # both catalogs, and the fix
    assert digest(learned) == before
    # The inspecting commands say the same and write nothing either.
    assert main(["learned", str(agent)]) == 2
    assert "'crm'" in capsys.readouterr().err
    assert digest(learned) == before
    # With the fix the message names, the agent file reads the app's rows.
    fixed = agent_file(tmp_path, {"file": str(learned), "catalog": "crm"}, name="fixed")
    assert main(["learn", str(fixed), "--calls", str(calls)]) == 0
    capsys.readouterr()
    assert main(["learned", str(fixed), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["requests"] == len(PAST) + 1


def test_forget_refuses_a_file_of_another_catalog_and_wipes_it_under_its_own(tmp_path, capsys):
    learned = tmp_path / "learned.npz"
    asyncio.run(app_learns(tmp_path, learned, catalog="crm"))
    before = digest(learned)
    assert main(["forget", str(agent_file(tmp_path, {"file": str(learned)}))]) == 2
    err = capsys.readouterr().err
    assert "'crm'" in err and "'default'" in err and f"{len(PAST)} rows were not wiped" in err
    assert digest(learned) == before
    assert main(["forget", str(agent_file(tmp_path, {"file": str(learned), "catalog": "crm"}, name="crm"))]) == 0
    assert f"{len(PAST)} learned requests forgotten" in capsys.readouterr().out
    assert main(["learned", "--file", str(learned), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["requests"] == 0


@pytest.mark.parametrize("content", [b"my notes\n", b"PK\x03\x04 a zip, not ours", b""], ids=["text", "zip", "empty"])
def test_forget_never_overwrites_a_file_that_is_not_a_learning_file(tmp_path, capsys, content):
    mistaken = tmp_path / "notes.txt"  # learning.file pointed at the wrong file
    mistaken.write_bytes(content)
    assert main(["forget", str(agent_file(tmp_path, {"file": str(mistaken)}))]) == 2
    assert "not a learning file" in capsys.readouterr().err
    assert mistaken.read_bytes() == content


def test_an_app_never_overwrites_a_learning_file_of_another_catalog(tmp_path, caplog):
    learned = tmp_path / "learned.npz"
    asyncio.run(app_learns(tmp_path, learned, catalog="crm"))
    before = digest(learned)
    asyncio.run(app_learns(tmp_path, learned, catalog="billing"))  # learns in memory, one warning, no write
    assert digest(learned) == before
    assert any("never overwritten" in r.getMessage() for r in caplog.records)

    async def forget_in_code() -> int:
        kernel = build_demo_kernel(str(tmp_path / "sandbox"))
        manager = await create_tool_filter(kernel, ToolFilterConfig(learning={"file": str(learned), "catalog": "x"}))
        with learning_context(conversation="c"):
            await manager.record(PAST[0], [CALLED])
        await manager.learning.forget()  # its own memory; the other catalog's file stays as it is
        held = len(manager.learning.memory)
        await manager.aclose()
        return held

    assert asyncio.run(forget_in_code()) == 0
    assert digest(learned) == before


@pytest.mark.parametrize("where", ["a directory", "under a file"])
def test_learn_exits_non_zero_when_it_cannot_keep_what_it_learned(tmp_path, capsys, where):
    if where == "a directory":
        target = tmp_path / "learned.npz"
        target.mkdir()
    else:
        (tmp_path / "plain.txt").write_text("not a folder")
        target = tmp_path / "plain.txt" / "learned.npz"
    calls = tmp_path / "calls.jsonl"
    calls.write_text(json.dumps({"query": "email the team the minutes", "tools": ["Messaging-send_email"]}) + "\n")
    agent = agent_file(tmp_path, {"file": str(target)})
    assert main(["learn", str(agent), "--calls", str(calls)]) == 2
    err = capsys.readouterr().err
    assert str(target) in err
    assert "remembered" not in capsys.readouterr().out


def test_learned_tells_a_missing_file_from_an_empty_memory(tmp_path, capsys):
    missing = tmp_path / "nowhere" / "learned.npz"
    agent = agent_file(tmp_path, {"file": str(missing)})
    assert main(["learned", str(agent)]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "missing" in err
    assert not missing.parent.exists()  # looking created nothing


def test_learned_reads_a_file_alone_and_one_tenant_by_its_value_never_printing_it(tmp_path, capsys):
    learned = tmp_path / "learned.npz"

    async def two_tenants() -> None:
        kernel = build_demo_kernel(str(tmp_path / "sandbox"))
        config = ToolFilterConfig(learning={"file": str(learned), "scope": "tenant_id"})
        manager = await create_tool_filter(kernel, config)
        for tenant, count in (("acme-corp", 4), ("globex-inc", 2)):
            for i in range(count):
                with learning_context(scope=tenant, conversation=f"{tenant}{i}"):
                    assert await manager.record(PAST[i], [CALLED]) == 1
        await manager.aclose()

    asyncio.run(two_tenants())
    before = digest(learned)
    assert main(["learned", "--file", str(learned), "--json"]) == 0
    every = json.loads(capsys.readouterr().out)
    assert every["requests"] == 6 and len(every["scopes"]) == 2
    assert main(["learned", "--file", str(learned), "--scope", "acme-corp", "--json"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out)["requests"] == 4 and "acme-corp" not in out
    assert main(["learned", "--file", str(tmp_path / "missing.npz")]) == 2
    assert digest(learned) == before
    agent = agent_file(tmp_path, {"file": str(learned), "scope": "tenant_id"})
    assert main(["search", str(agent), "tell the ops crew the restore finished", "--scope", "globex-inc"]) == 0
    assert digest(learned) == before


def test_eval_measures_what_one_tenant_learned_reading_the_apps_file_and_changing_no_byte(tmp_path, capsys):
    learned = tmp_path / "learned.npz"

    async def one_tenant_learns() -> None:
        kernel = build_demo_kernel(str(tmp_path / "sandbox"))
        manager = await create_tool_filter(kernel, ToolFilterConfig(learning={"file": str(learned), "scope": "team"}))
        for i, request in enumerate(PAST):  # six conversations of tenant acme-corp
            with learning_context(scope="acme-corp", conversation=f"c{i}"):
                assert await manager.record(request, [CALLED]) == 1
        await manager.aclose()

    asyncio.run(one_tenant_learns())
    before = digest(learned)
    queries = tmp_path / "queries.jsonl"
    asked = [f"let the ops crew know the weekly backup finished on day {i}" for i in (7, 8, 9)]
    queries.write_text("".join(json.dumps({"query": q, "gold": [CALLED]}) + "\n" for q in asked))
    agent = agent_file(tmp_path, {"file": str(learned), "scope": "team"})
    out = tmp_path / "out"
    command = ["eval", "--agent", str(agent), "--queries", str(queries), "--methods", "hybrid", "--k", "1"]
    assert main([*command, "--scope", "acme-corp", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"the agent's {len(PAST)} requests of scope 'acme-corp'" in printed
    rows = json.loads((out / "eval.json").read_text())["methods"]
    cold, warm = rows["hybrid"], rows["hybrid, learned from use"]
    assert warm["recall@1"] > cold["recall@1"]  # the tenant's calls lift it to first
    assert main([*command, "--scope", "globex-inc"]) == 2  # another tenant learned nothing: said, not measured
    assert "no requests of this scope" in capsys.readouterr().err
    assert main([*command, "--scope", "acme-corp", "--learn", str(queries)]) == 2
    assert main([*command[:-4], "--methods", "bm25", "--scope", "acme-corp"]) == 2
    assert digest(learned) == before


@pytest.mark.parametrize("command", ["search", "explain", "learned", "eval", "serve"])
def test_every_scope_option_refuses_a_shared_agent_alike(tmp_path, capsys, command):
    agent = str(agent_file(tmp_path, {"file": str(tmp_path / "learned.npz")}))  # learning.scope: shared
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"query": "email bob", "gold": ["Messaging-send_email"]}) + "\n")
    argv = {
        "search": ["search", agent, "email bob"],
        "explain": ["explain", agent, "email bob"],
        "learned": ["learned", agent],
        "eval": ["eval", "--agent", agent, "--queries", str(queries)],
        "serve": ["serve", agent],  # refused before it serves
    }[command]
    assert main([*argv, "--scope", "acme-corp"]) == 2  # a shared agent has no tenants: never "as acme-corp"
    assert "learning.scope is 'shared'" in capsys.readouterr().err
    assert not (tmp_path / "learned.npz").exists()
