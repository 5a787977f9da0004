"""The training pipeline end to end on a tiny dev set: pairs, fine-tuning, int8 ONNX, evaluation, card.

It checks the pipeline, not the model (a handful of pairs and steps). Needs the ``train`` extra; CI
installs it (SK_TOOLFILTER_REQUIRE_TRAINING=1 turns a missing extra into a failure).
"""

import json
import os
from pathlib import Path

import numpy as np
import pytest

if os.environ.get("SK_TOOLFILTER_REQUIRE_TRAINING") != "1":
    pytest.importorskip("torch")
    pytest.importorskip("transformers")

TOY = Path(__file__).parent / "fixtures" / "tiny_benchmark"


def test_the_pipeline_rebuilds_a_loadable_int8_model_with_a_card(tmp_path):
    import torch

    from sk_toolfilter.retrieval.embeddings import LocalEmbeddingGenerator
    from sk_toolfilter.retrieval.local_models import TOOL_SIDE_MODEL_ID, read_manifest, sha256_of
    from training import rebuild

    out, model_dir = tmp_path / "run", tmp_path / "model"
    argv = ["--tiny", "--root", str(TOY), "--sources", "toy", "--out", str(out), "--model-dir", str(model_dir)]
    # The manifest a rebuild replaces carries the turn blend the conversation folds chose: it is kept.
    model_dir.mkdir()
    (model_dir / "model.json").write_text(
        json.dumps({"id": "old", "loop_hybrid_weights": {"semantic": 0.9, "bm25": 0.1}})
    )
    # A second round's negatives: mined with a trained model (the shipped one) instead of the general one.
    assert rebuild.main([*argv, "--id", "toy-model", "--threads", "1", "--mining-model", "minilm-l6-tools-v1"]) == 0

    pairs = [json.loads(line) for line in (out / "pairs.jsonl").read_text().splitlines()]
    assert pairs and {p["kind"] for p in pairs} == {"query", "pseudo"}
    assert all(p["positive_id"] in p["gold_ids"] and not set(p["negative_ids"]) & set(p["gold_ids"]) for p in pairs)

    manifest = read_manifest(model_dir)
    assert manifest.documents == TOOL_SIDE_MODEL_ID  # asymmetric: the general model's weights embed the tools
    written = json.loads((model_dir / "model.json").read_text())
    assert written["id"] == "toy-model" and written["loop_hybrid_weights"] == {"semantic": 0.9, "bm25": 0.1}
    assert sha256_of(manifest.model_file) == manifest.model_sha256
    assert manifest.model_file.stat().st_size < 30_000_000  # int8

    model = LocalEmbeddingGenerator(model=str(model_dir))
    assert model.query_encoder.ai_model_id.startswith("toy-model@")  # a folder model is keyed by its content
    assert model.ai_model_id == TOOL_SIDE_MODEL_ID  # tool vectors: shared with the shipped models
    queries = model.embed_queries_sync(["check the price of NVDA", "hello"])
    assert queries.shape == (2, 384) and np.allclose(np.linalg.norm(queries, axis=1), 1.0, atol=1e-4)

    metrics = json.loads((out / "eval.json").read_text())
    assert 0.0 <= metrics["toy"]["hybrid"]["recall@5"] <= 1.0
    card = (model_dir / "MODEL_CARD.md").read_text()
    assert "## Sources" in card and "| toy | (a local dev set)" in card

    # A student of this model (a leave-one-out teacher, say) starts from its layers, not the shipped model's.
    from training import distill
    from training.teacher_weights import teacher_model

    student = distill.student_model([0, 5], "teacher", str(model_dir)).state_dict()
    rebuilt = teacher_model(model_dir / "model.onnx").state_dict()
    shipped = teacher_model().state_dict()
    key = "encoder.layer.1.attention.self.query.weight"  # the student's second layer: the teacher's sixth
    assert torch.equal(student[key], rebuilt[key.replace("layer.1", "layer.5")])
    assert not torch.equal(student[key], shipped[key.replace("layer.1", "layer.5")])


def test_a_student_distilled_from_the_shipped_teacher_loads_with_the_same_tool_vectors(tmp_path):
    from sk_toolfilter.retrieval.embeddings import LocalEmbeddingGenerator
    from training import distill
    from training.teacher_weights import check, teacher_model

    # The teacher rebuilt in fp32 from its int8 file reads requests as the file does (up to int8 error).
    assert check(teacher_model(), ["check the price of NVDA", "send an email to Bob"]) > 0.97

    argv = ["--out", str(tmp_path), "--root", str(TOY), "--sources", "toy", "--max-texts", "24", "--epochs", "1"]
    onnx = distill.distill(distill.parse_args([*argv, "--batch-size", "8", "--threads", "1", "--id", "toy-student"]))
    student = LocalEmbeddingGenerator(model=str(onnx))
    shipped = LocalEmbeddingGenerator()
    tool = "get stock info: Current price and volume of a stock symbol. Parameters: symbol"
    assert np.allclose(student.embed_sync([tool]), shipped.embed_sync([tool]), atol=1e-6)  # the same tool side
    requests = student.embed_queries_sync(["check the price of NVDA"])
    assert requests.shape == (1, 384) and np.isclose(np.linalg.norm(requests), 1.0, atol=1e-4)
    assert json.loads((tmp_path / "distill_log.json").read_text())["texts"] == 24


def test_intent_pairs_pair_each_step_of_a_request_with_the_tool_it_asks_for():
    import asyncio

    from training.experiments.intent_pairs import intent_pairs

    def pair(tool: str, text: str) -> dict:
        return {
            "source": "toy",
            "kind": "query",
            "query": "Book a flight to Paris for Friday, then reserve a hotel room near the Louvre",
            "positive": text,
            "positive_id": tool,
            "gold_ids": ["Travel-book_flight", "Travel-reserve_hotel"],
            "negatives": [],
            "negative_ids": ["Travel-rent_car"],
        }

    pairs = [
        pair("Travel-book_flight", "book_flight: Book a plane ticket between two airports on a date."),
        pair("Travel-reserve_hotel", "reserve_hotel: Reserve a hotel room in a city for some nights."),
        {**pair("Travel-book_flight", "x"), "kind": "pseudo", "query": "Book a plane ticket", "gold_ids": ["x"]},
    ]
    made = asyncio.run(intent_pairs(pairs, min_gap=0.05, min_query_parts=3))
    assert [(p["kind"], p["query"], p["positive_id"]) for p in made] == [
        ("intent", "Book a flight to Paris for Friday", "Travel-book_flight"),
        ("intent", "reserve a hotel room near the Louvre", "Travel-reserve_hotel"),
    ]
    assert all(p["negative_ids"] == ["Travel-rent_car"] and len(p["gold_ids"]) == 2 for p in made)


def test_a_trained_tool_side_ships_as_its_own_model_named_by_the_request_encoder(tmp_path):
    import torch
    from transformers import AutoModel, AutoTokenizer

    from sk_toolfilter.retrieval.embeddings import LocalEmbeddingGenerator
    from sk_toolfilter.retrieval.local_models import read_manifest
    from training import train
    from training.leave_one_out import train_and_export
    from training.tool_side import ToolTower

    # The tool side's cached lower layers plus its top layers read a tool text as the whole network does.
    base = str(train.base_model_dir())
    tokenizer = AutoTokenizer.from_pretrained(base)
    texts = ["send_email: Send an email to a recipient.", "get_forecast: Get the weather forecast for a city. " * 9]
    tower = ToolTower(base, tokenizer, {"toy": texts}, 2, 256)
    whole = train.encode(AutoModel.from_pretrained(base).eval(), tokenizer, texts, 256)
    assert torch.all((tower.catalog_vectors("toy") * whole).sum(1) > 0.9999)

    folder = tmp_path / "run"
    folder.mkdir()
    gold = {"tell Bob the meeting moved": "Mail-send_email", "will it rain in Oslo?": "Weather-get_forecast"}
    rows = [
        {"source": "toy", "kind": "query", "query": q, "positive_id": t, "gold_ids": [t], "negative_ids": []}
        for q, t in gold.items()
    ]
    (folder / "pairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    train_and_export(folder, 1.0, TOY, None, "toy-tt", tool_layers=1)

    trained = AutoModel.from_pretrained(str(folder / "model" / "tool_hf")).state_dict()
    start = AutoModel.from_pretrained(base).state_dict()
    top, below = "encoder.layer.5.output.dense.weight", "encoder.layer.4.output.dense.weight"
    assert not torch.equal(trained[top], start[top]) and torch.equal(trained[below], start[below])
    # The request encoder names the trained tool side, which embeds its own documents.
    assert Path(read_manifest(folder / "onnx").documents) == (folder / "tool_onnx").resolve()
    assert read_manifest(folder / "tool_onnx").documents is None
    model = LocalEmbeddingGenerator(model=str(folder / "onnx"))
    assert model.ai_model_id.startswith("toy-tt-tools@")  # tool vectors cached apart from the general model's
    assert model.query_encoder.ai_model_id.startswith("toy-tt@")


def _write(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))


def test_the_second_stage_pipeline_converts_trains_measures_and_exports_a_loadable_reranker(tmp_path):
    from sk_toolfilter.retrieval.rerank import CrossEncoder, resolve_reranker
    from training import multi_tool_sets
    from training.experiments import export_reranker, rerank_folds, train_reranker

    # 1. A CallNavi-shaped checkout and a RestBench-shaped one: catalogs and labelled requests.
    callnavi = tmp_path / "callnavi"
    apis = [
        {"name": "getAccountBalance", "parameters": {"accountID": "string"}, "description": "Balance of an account."},
        {"name": "initiateTransfer", "parameters": ["fromAccountID", "toAccountID"], "description": "Send money."},
        {"name": "getBranches", "parameters": {}, "description": "Bank branches near a city."},
    ]
    _write(callnavi / "Dataset" / "APIs" / "bank.json", {"api_ports": apis})
    questions = [
        {"id": "b1", "question": [{"role": "user", "content": "what is my balance"}],
         "ground_truth": {"API": ["getAccountBalance"]}},
        {"id": "b2", "question": [{"role": "user", "content": "check my balance then send 5 to Bob"}],
         "ground_truth": {"API": ["getAccountBalance", "initiateTransfer"]}},
        {"id": "b3", "question": [{"role": "user", "content": "close my account"}],
         "ground_truth": {"API": ["closeAccount"]}},  # not in the catalog: dropped
    ]  # fmt: skip
    _write(callnavi / "Dataset" / "Questions" / "bank.json", questions)
    restbench = tmp_path / "restbench"
    for api in ("tmdb", "spotify"):
        paths = {"/search/movie": {"get": {"summary": "Search movies", "parameters": [{"name": "query"}]}},
                 "/movie/{movie_id}/credits": {"get": {"summary": "Credits of a movie"}},
                 "/tv/popular": {"get": {"summary": "Popular TV shows"}}}  # fmt: skip
        _write(restbench / "specs" / f"{api}_oas.json", {"paths": paths})
        solution = ["GET /search/movie", "GET /movie/{movie_id}/credits"]
        _write(restbench / "datasets" / f"{api}.json", [{"query": "who acted in Heat", "solution": solution}])
    multi = tmp_path / "multi"
    families = multi_tool_sets.convert({"callnavi": callnavi, "restbench": restbench}, multi, TOY.parent.parent)
    assert families == {"callnavi": ["callnavi_bank"], "restbench": ["restbench_tmdb", "restbench_spotify"]}
    bank = [json.loads(line) for line in (multi / "callnavi_bank" / "dev.jsonl").read_text().splitlines()]
    assert [q["gold"] for q in bank] == [
        ["callnavi_bank-getAccountBalance"],
        ["callnavi_bank-getAccountBalance", "callnavi_bank-initiateTransfer"],
    ]
    tools = [json.loads(line) for line in (multi / "restbench_tmdb" / "tools.jsonl").read_text().splitlines()]
    assert {t["name"] for t in tools} == {"GET_search_movie", "GET_movie_movie_id_credits", "GET_tv_popular"}

    # 2. Shortlists (what the first stage ranks), a reranker trained without one family, its scores.
    data = tmp_path / "data"
    for catalog in ("callnavi_bank", "restbench_tmdb", "restbench_spotify"):
        names = [
            f"{catalog}-{json.loads(t)['name']}" for t in (multi / catalog / "tools.jsonl").read_text().split("\n") if t
        ]
        _write(data / "tools" / f"{catalog}.json", {n: n.split("-", 1)[1].replace("_", " ") for n in names})
    rows = []
    for family, catalogs in families.items():
        for catalog in catalogs:
            texts = json.loads((data / "tools" / f"{catalog}.json").read_text())
            for q in (multi / catalog / "dev.jsonl").read_text().splitlines():
                q = json.loads(q)
                rows.append({**q, "family": family, "catalog": catalog, "shortlist": list(texts)})
    (data / "shortlists.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    fold = tmp_path / "folds" / "callnavi"
    argv = ["--data", str(data), "--out", str(fold), "--hold-out", "callnavi", "--epochs", "1", "--batch", "2"]
    assert train_reranker.main([*argv, "--threads", "1", "--no-prior"]) == 0
    scored = [json.loads(line) for line in (fold / "scores.jsonl").read_text().splitlines()]
    assert [r["id"] for r in scored] == ["b1", "b2"] and all(len(r["scores"]) == len(r["shortlist"]) for r in scored)
    result = rerank_folds.evaluate(rerank_folds.load_folds(tmp_path / "folds"))
    assert set(result["first"]) == {"callnavi"} and result["first"]["callnavi"]["recall@5"] == 1.0

    # 3. The int8 export loads through rerank.model (a folder) and scores a request's shortlist in one batch.
    out = tmp_path / "reranker"
    export_reranker.export(fold, out, "toy-reranker")
    model = resolve_reranker(str(out))
    assert model.kind == "cross-encoder" and model.id.startswith("toy-reranker@")
    scores = CrossEncoder(model).score("what is my balance", ["get account balance", "get branches"])
    assert scores.shape == (2,) and np.isfinite(scores).all()
