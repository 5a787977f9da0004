"""Does the first stage gain from training on the six multi-tool catalogs? Leave one family out
(issue 58 item 4).

Each fold trains the request encoder with the shipped recipe (``training.train``: frozen tool side,
full-catalog InfoNCE, mined hard negatives) on the dev halves' pairs plus the pairs of five of the six
multi-tool families (:data:`training.sources.MULTI_TOOL_SETS`), and is measured on the sixth, which it
never saw. The control is the same recipe on the dev halves' pairs alone (what ships). Both are
measured the same way: their request vectors go through the product's own hybrid ranking
(``rank_many``, default configuration) against the shipped tool vectors.

Three steps, so the training can run where there is an accelerator and nothing else installed:

    # here: pairs (training.build_pairs, once for the dev halves, once for --root MULTI), tool vectors,
    # the texts to measure on (recorded from the product), start weights (fp16, the vocabulary used)
    python -m training.experiments.first_stage_folds prepare \\
        --pairs training/out/fs/pairs_dev.jsonl training/out/fs/pairs_multi.jsonl \\
        --multi training/out/multi --base PATH/TO/all-MiniLM-L6-v2 --out .gpu/fs
    # torch only (no sk_toolfilter): a GPU takes minutes, 2 CPU cores about 6 hours
    python -m training.experiments.first_stage_folds train --data .gpu/fs --out training/out/fs/vectors
    # here: the product's ranking with each run's request vectors
    python -m training.experiments.first_stage_folds measure --data .gpu/fs --vectors training/out/fs/vectors \\
        --multi training/out/multi

``train`` also trains on everything (the dev halves and all six families) and writes that run's
trained layers (``all_layers_*.npz``), which ``training.export`` can turn into a model if the folds pay.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import numpy as np

RECIPE = {"epochs": 2.0, "batch_size": 32, "lr": 3e-5, "scale": 20.0, "hard_margin": 0.05, "freeze_layers": 2}
MAX_QUERY_TOKENS = 96  # training (training.train's --max-query-tokens)
MAX_TOKENS = 256  # measuring: the runtime's max_length (model.json)
SEED = 13


# ---------------------------------------------------------------- prepare (here, with the product)


def _families(multi: Path) -> dict[str, str]:
    families = json.loads((multi / "families.json").read_text())
    return {name: family for family, names in families.items() for name in names}


class _Recorder:
    """Stands in for the request encoder: delegates, and remembers every text it was asked for."""

    def __init__(self, encoder: object) -> None:
        self.encoder, self.texts = encoder, {}
        self.loaded = True

    def embed(self, texts: list[str], alone: bool = False) -> np.ndarray:
        self.texts.update(dict.fromkeys(texts))
        return self.encoder.embed(texts, alone=alone)  # type: ignore[attr-defined]


class _Lookup:
    """Stands in for the request encoder with vectors computed elsewhere (by text)."""

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors, self.loaded = vectors, True

    def embed(self, texts: list[str], alone: bool = False) -> np.ndarray:
        missing = [t for t in texts if t not in self.vectors]
        if missing:
            raise KeyError(f"no vector for {len(missing)} texts (first: {missing[0][:80]!r}); run prepare again")
        return np.stack([self.vectors[t] for t in texts]).astype(np.float32)


def _requests(folder: Path) -> list[tuple[str, list[str]]]:
    from sk_toolfilter.measure.evaluation import load_queries

    return [(q.query, list(q.gold)) for q in load_queries(folder / "dev.jsonl")]


async def _rank_catalog(folder: Path, encoder: object | None, depth: int = 30) -> tuple[list[list[str]], object]:
    """The product's first stage (default configuration) over the catalog's requests; the request
    encoder replaced by `encoder` when given. Returns the rankings (names) and the encoder used."""
    from sk_toolfilter.agents.catalog import load_catalog
    from sk_toolfilter.config import ToolFilterConfig
    from sk_toolfilter.retrieval import search
    from sk_toolfilter.retrieval.embeddings import LocalEmbeddingGenerator
    from sk_toolfilter.retrieval.index import ToolIndex

    service = LocalEmbeddingGenerator()
    service.query_encoder.encoder.load()
    if encoder is None:
        encoder = _Recorder(service.query_encoder.encoder)
    service.query_encoder.encoder = encoder
    index = await ToolIndex.build([t for t, _ in load_catalog(folder / "tools.jsonl")], service)
    queries = [q for q, _ in _requests(folder)]
    rankings = await search.rank_many(index, queries, ToolFilterConfig(), limit=depth)
    return [[s.tool.full_name for s in r.tools] for r in rankings], encoder


def _tool_vectors(folder: Path, cache: object) -> tuple[list[str], np.ndarray]:
    """Every tool's vector as training.train's Catalogs computes it (the general model, the index's texts)."""
    import asyncio

    from sk_toolfilter.agents.catalog import load_catalog
    from sk_toolfilter.retrieval.embeddings import LocalEmbeddingGenerator
    from sk_toolfilter.retrieval.index import embed_catalog, embedding_texts
    from sk_toolfilter.retrieval.local_models import GENERAL_MODEL_ID

    tools = [t for t, _ in load_catalog(folder / "tools.jsonl")]
    service = LocalEmbeddingGenerator(model=GENERAL_MODEL_ID)
    vectors, _ = asyncio.run(embed_catalog(service, embedding_texts(tools), cache=cache))  # type: ignore[arg-type]
    return [t.full_name for t in tools], vectors.astype(np.float16)


def _read_safetensors(path: Path) -> dict[str, np.ndarray]:
    raw = path.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + size])
    out = {}
    for name, meta in header.items():
        if name == "__metadata__" or meta["dtype"] != "F32":  # position_ids (I64) are rebuilt by the model
            continue
        start, end = meta["data_offsets"]
        out[name] = np.frombuffer(raw[8 + size + start : 8 + size + end], dtype=np.float32).reshape(meta["shape"])
    return out


def prepare(pair_files: list[Path], multi: Path, base: Path, out: Path, cache_dir: Path | None) -> None:
    import asyncio

    from tokenizers import Tokenizer

    from sk_toolfilter.retrieval.cache import EmbeddingCache
    from sk_toolfilter.retrieval.gloss import with_english_gloss
    from training.sources import BENCHMARKS, MULTI_TOOL_SETS

    out.mkdir(parents=True, exist_ok=True)
    family_of = _families(multi)
    assert set(family_of.values()) == {s.name for s in MULTI_TOOL_SETS}, "families.json and sources.py disagree"
    pairs = [json.loads(line) for f in pair_files for line in f.read_text().splitlines() if line.strip()]
    tokenizer = Tokenizer.from_file(str(base / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(MAX_QUERY_TOKENS)
    sources = sorted({p["source"] for p in pairs})
    names, vectors = {}, {}
    for source in sources:
        folder = multi / source if source in family_of else BENCHMARKS / source
        names[source], vectors[source] = _tool_vectors(folder, EmbeddingCache(cache_dir) if cache_dir else None)
        print(f"tool vectors: {source} ({len(names[source])})", file=sys.stderr, flush=True)
    np.savez(out / "tool_vectors.npz", **vectors)
    used: set[int] = set()
    with (out / "pairs.jsonl").open("w") as f:
        for p in pairs:
            position = {n: i for i, n in enumerate(names[p["source"]])}
            if p["positive_id"] not in position:
                continue
            ids = tokenizer.encode(with_english_gloss(p["query"])).ids
            used.update(ids)
            row = {
                "source": p["source"],
                "family": family_of.get(p["source"], "dev"),
                "ids": ids,
                "positive": position[p["positive_id"]],
                "gold": [position[g] for g in p["gold_ids"] if g in position],
                "negatives": [position[n] for n in p.get("negative_ids", []) if n in position],
            }
            f.write(json.dumps(row) + "\n")
    # The texts to measure on: what the product asks the request encoder for, recorded; and the
    # shipped model's rankings of them (the baseline, int8 as it ships).
    tokenizer.enable_truncation(MAX_TOKENS)
    texts: dict[str, list[str]] = {}
    shipped: dict[str, list[list[str]]] = {}
    for catalog, family in sorted(family_of.items()):
        rankings, recorder = asyncio.run(_rank_catalog(multi / catalog, None))
        shipped[catalog] = rankings
        texts.setdefault(family, [])
        texts[family] += [t for t in recorder.texts if t not in texts[family]]
        print(f"recorded: {catalog} ({len(recorder.texts)} texts)", file=sys.stderr, flush=True)
    measured = {family: [tokenizer.encode(t).ids for t in family_texts] for family, family_texts in texts.items()}
    for ids in measured.values():
        for row in ids:
            used.update(row)
    (out / "measure_texts.json").write_text(json.dumps({"texts": texts, "ids": measured}))
    (out / "shipped_rankings.json").write_text(json.dumps(shipped))
    # Start weights in fp16 (both runs of a comparison start from the same), the word embeddings only
    # for the token ids any text here uses (the rest of the vocabulary is never looked up).
    weights = _read_safetensors(base / "model.safetensors")
    word = next(k for k in weights if k.endswith("word_embeddings.weight"))
    rows = np.array(sorted(used | {0, 100, 101, 102}), dtype=np.int64)
    kept = {k: v.astype(np.float16) for k, v in weights.items() if k != word}
    np.savez(out / "base.npz", word_ids=rows, word_rows=weights[word][rows].astype(np.float16), **kept)
    config = json.loads((base / "config.json").read_text())
    (out / "config.json").write_text(json.dumps(config))
    print(f"{len(pairs)} pairs, {len(rows)} of {weights[word].shape[0]} word rows -> {out}", file=sys.stderr)


# ---------------------------------------------------------------- train (torch only)


def _model(data: Path, device: str):
    import torch
    from transformers import BertConfig, BertModel

    config = BertConfig.from_dict(json.loads((data / "config.json").read_text()))
    model = BertModel(config, add_pooling_layer=False)
    saved = np.load(data / "base.npz")
    state = {}
    for key in saved.files:
        if key in ("word_ids", "word_rows"):
            continue
        state[key.removeprefix("bert.")] = torch.from_numpy(saved[key].astype(np.float32))
    word = torch.zeros(config.vocab_size, config.hidden_size)
    word[torch.from_numpy(saved["word_ids"])] = torch.from_numpy(saved["word_rows"].astype(np.float32))
    state["embeddings.word_embeddings.weight"] = word
    missing, _ = model.load_state_dict(state, strict=False)
    missing = [m for m in missing if "position_ids" not in m]
    assert not missing, missing
    return model.to(device)


def _batch(ids: list[list[int]], device: str):
    import torch

    longest = max(len(r) for r in ids)
    input_ids = torch.zeros(len(ids), longest, dtype=torch.long)
    mask = torch.zeros(len(ids), longest, dtype=torch.long)
    for i, r in enumerate(ids):
        input_ids[i, : len(r)] = torch.tensor(r)
        mask[i, : len(r)] = 1
    return input_ids.to(device), mask.to(device)


def _encode(model, ids: list[list[int]], device: str):
    from training.tool_side import unit_mean

    input_ids, mask = _batch(ids, device)
    return unit_mean(
        model(input_ids=input_ids, attention_mask=mask, token_type_ids=input_ids * 0).last_hidden_state, mask
    )


class _Tools:
    """Every catalog's tool vectors in one matrix (catalogs in contiguous blocks), so a batch's loss is
    one product: each row's softmax runs over its own catalog's block only."""

    def __init__(self, vectors: dict[str, np.ndarray], device: str) -> None:
        import torch

        self.offset, self.size, start = {}, {}, 0
        for source in sorted(vectors):
            self.offset[source], self.size[source] = start, len(vectors[source])
            start += len(vectors[source])
        self.matrix = torch.from_numpy(np.concatenate([vectors[s] for s in sorted(vectors)]).astype(np.float32))
        self.matrix = self.matrix.to(device)
        self.device = device


def _loss(model, rows: list[dict], tools: _Tools):
    """training.train's loss, batched: each row against every tool of its catalog (InfoNCE, scale 20),
    its mined negatives with an additive margin, its other gold tools masked."""
    import torch
    import torch.nn.functional as F

    device = tools.device
    q = _encode(model, [r["ids"] for r in rows], device)
    starts = torch.tensor([tools.offset[r["source"]] for r in rows], device=device)
    ends = starts + torch.tensor([tools.size[r["source"]] for r in rows], device=device)
    columns = torch.arange(tools.matrix.shape[0], device=device)
    masked = (columns[None] < starts[:, None]) | (columns[None] >= ends[:, None])
    bonus = torch.zeros(len(rows), tools.matrix.shape[0], device=device)
    negative_rows, negative_columns, gold_rows, gold_columns = [], [], [], []
    for i, r in enumerate(rows):
        base = tools.offset[r["source"]]
        negative_rows += [i] * len(r["negatives"])
        negative_columns += [base + n for n in r["negatives"]]
        others = [g for g in r["gold"] if g != r["positive"]]
        gold_rows += [i] * len(others)
        gold_columns += [base + g for g in others]
    bonus[negative_rows, negative_columns] = RECIPE["hard_margin"]
    masked[gold_rows, gold_columns] = True
    targets = torch.tensor([tools.offset[r["source"]] + r["positive"] for r in rows], device=device)
    logits = (RECIPE["scale"] * (q @ tools.matrix.T + bonus)).masked_fill(masked, -1e4)
    return F.cross_entropy(logits, targets)


def train_run(data: Path, pairs: list[dict], tools: _Tools, device: str, label: str, seed: int = SEED):
    import torch

    from training.optim import optimizer_step, shuffled_batches, warmup_then_decay

    torch.manual_seed(seed)
    rng = random.Random(seed)
    model = _model(data, device)
    model.train()
    for module in [model.embeddings, *model.encoder.layer[: RECIPE["freeze_layers"]]]:
        for parameter in module.parameters():
            parameter.requires_grad_(False)
    trainable = [p for p in model.parameters() if p.requires_grad]
    total = max(1, int(math.ceil(len(pairs) / RECIPE["batch_size"]) * RECIPE["epochs"]))
    optimizer = torch.optim.AdamW(trainable, lr=RECIPE["lr"], weight_decay=0.01)
    scheduler = warmup_then_decay(optimizer, total, max(1, int(0.1 * total)))
    started, losses = time.perf_counter(), []
    for step, batch in enumerate(shuffled_batches(len(pairs), RECIPE["batch_size"], total, rng), 1):
        loss = _loss(model, [pairs[i] for i in batch], tools)
        losses.append(optimizer_step(loss, trainable, optimizer, scheduler))
        if step % 200 == 0 or step == total:
            elapsed = time.perf_counter() - started
            print(
                f"{label}: step {step}/{total} loss {np.mean(losses[-200:]):.4f} "
                f"{step / elapsed:.1f} steps/s, {(total - step) * elapsed / step:.0f} s left",
                file=sys.stderr,
                flush=True,
            )
    model.eval()
    return model, {"pairs": len(pairs), "steps": total, "seconds": round(time.perf_counter() - started, 1)}


def encode_texts(model, ids: list[list[int]], device: str) -> np.ndarray:
    import torch

    out = []
    with torch.no_grad():
        for start in range(0, len(ids), 256):
            out.append(_encode(model, ids[start : start + 256], device).float().cpu().numpy())
    return np.concatenate(out).astype(np.float16)


def train(data: Path, out: Path, runs: list[str], limit: int | None = None, seed: int = SEED) -> None:
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    out.mkdir(parents=True, exist_ok=True)
    pairs = [json.loads(line) for line in (data / "pairs.jsonl").read_text().splitlines()]
    saved = np.load(data / "tool_vectors.npz")
    tools = _Tools({s: saved[s] for s in saved.files}, device)
    measure = json.loads((data / "measure_texts.json").read_text())["ids"]
    log = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "runs": {}}
    folds: dict[str, np.ndarray] = {}
    for run in runs:
        if run == "control":
            chosen = [p for p in pairs if p["family"] == "dev"]
        elif run == "all":
            chosen = pairs
        else:
            chosen = [p for p in pairs if p["family"] != run]
        if limit:  # a smoke test of the pipeline, not a model
            chosen = random.Random(SEED).sample(chosen, min(limit, len(chosen)))
        model, log["runs"][run] = train_run(data, chosen, tools, device, run, seed)
        if run == "control":
            np.savez(out / "control.npz", **{f: encode_texts(model, ids, device) for f, ids in measure.items()})
        elif run == "all":
            state = {k: v.detach().float().cpu().numpy() for k, v in model.state_dict().items()}
            for half, layers in (("a", (2, 3)), ("b", (4, 5))):
                part = {k: v for k, v in state.items() if any(f"layer.{n}." in k for n in layers)}
                np.savez(out / f"all_layers_{half}.npz", **part)
        else:
            folds[run] = encode_texts(model, measure[run], device)
            np.savez(out / "folds.npz", **folds)
        (out / "train_log.json").write_text(json.dumps(log, indent=2))
        del model
    print(json.dumps(log, indent=2))


# ---------------------------------------------------------------- measure (here, with the product)


def _metrics(rankings: list[list[str]], requests: list[tuple[str, list[str]]]) -> dict[str, float]:
    from sk_toolfilter.measure.metrics import complete_at_k, recall_at_k

    rows = list(zip(rankings, [g for _, g in requests], strict=True))
    many = [(r, g) for r, g in rows if len(set(g)) >= 3]
    return {
        "requests": len(rows),
        "recall@5": float(np.mean([recall_at_k(r, g, 5) for r, g in rows])),
        "complete@5": float(np.mean([complete_at_k(r, g, 5) for r, g in rows])),
        "complete@5 3+": float(np.mean([complete_at_k(r, g, 5) for r, g in many])) if many else float("nan"),
        "recall@20": float(np.mean([recall_at_k(r, g, 20) for r, g in rows])),
        "3+ requests": len(many),
    }


def measure(data: Path, vectors: Path, multi: Path) -> dict:
    import asyncio

    family_of = _families(multi)
    texts = json.loads((data / "measure_texts.json").read_text())["texts"]
    shipped = json.loads((data / "shipped_rankings.json").read_text())
    control, folds = np.load(vectors / "control.npz"), np.load(vectors / "folds.npz")
    results: dict[str, dict] = {}
    for catalog, family in sorted(family_of.items()):
        requests = _requests(multi / catalog)
        row = {"family": family, "shipped": _metrics(shipped[catalog], requests)}
        for label, table in (("control", control), ("with the other five", folds)):
            if family not in table.files:
                continue
            lookup = _Lookup(dict(zip(texts[family], table[family].astype(np.float32), strict=True)))
            rankings, _ = asyncio.run(_rank_catalog(multi / catalog, lookup))
            row[label] = _metrics(rankings, requests)
        results[catalog] = row
        print(f"{catalog:28} " + "  ".join(f"{k} {v['complete@5']:.3f}" for k, v in row.items() if k != "family"))
    return results


def family_table(results: dict) -> str:
    """Per family (its catalogs' requests pooled), first stage as shipped / retrained without the family."""
    metrics = ("recall@5", "complete@5", "complete@5 3+", "recall@20")
    labels = ("shipped", "control", "with the other five")
    by_family: dict[str, list[dict]] = {}
    for row in results.values():
        by_family.setdefault(row["family"], []).append(row)
    lines = [
        "| held-out family | requests | " + " | ".join(f"{m}: {' / '.join(labels)}" for m in metrics) + " |",
        "|---|---|" + "---|" * len(metrics),
    ]
    means = {(m, lab): [] for m in metrics for lab in labels}
    for family, rows in sorted(by_family.items()):
        cells = []
        for m in metrics:
            values = []
            for lab in labels:
                weights = [r[lab]["3+ requests" if m.endswith("3+") else "requests"] for r in rows if lab in r]
                scores = [r[lab][m] for r in rows if lab in r]
                pairs = [(s, w) for s, w in zip(scores, weights, strict=True) if w]
                value = sum(s * w for s, w in pairs) / sum(w for _, w in pairs) if pairs else float("nan")
                values.append(value)
                means[(m, lab)].append(value)
            cells.append(" / ".join(f"{v:.3f}" for v in values))
        lines.append(f"| {family} | {sum(r['shipped']['requests'] for r in rows)} | " + " | ".join(cells) + " |")
    mean_cells = [" / ".join(f"{np.nanmean(means[(m, lab)]):.3f}" for lab in labels) for m in metrics]
    lines.append("| mean of families | | " + " | ".join(mean_cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("prepare")
    p.add_argument("--pairs", type=Path, nargs="+", required=True)
    p.add_argument("--multi", type=Path, required=True)
    p.add_argument("--base", type=Path, required=True, help="all-MiniLM-L6-v2 fp32 (model.safetensors, tokenizer.json)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--cache-dir", type=Path, default=None)
    t = commands.add_parser("train")
    t.add_argument("--data", type=Path, required=True)
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--runs", default="control,callnavi,nestful,restbench,acebench,tooltalk,apibank,all")
    t.add_argument("--limit", type=int, default=None, help="at most N pairs per run (a smoke test)")
    t.add_argument("--seed", type=int, default=SEED, help="the order of the pairs and dropout (the shipped run: 13)")
    m = commands.add_parser("measure")
    m.add_argument("--data", type=Path, required=True)
    m.add_argument("--vectors", type=Path, required=True)
    m.add_argument("--multi", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "prepare":
        prepare(args.pairs, args.multi, args.base, args.out, args.cache_dir)
    elif args.command == "train":
        train(args.data, args.out, [r for r in args.runs.split(",") if r], args.limit, args.seed)
    else:
        results = measure(args.data, args.vectors, args.multi)
        (args.vectors / "measure.json").write_text(json.dumps(results, indent=2))
        table = family_table(results)
        (args.vectors / "measure.md").write_text(table)
        print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
