"""Distil the trained request encoder into a smaller, faster student (issue 32).

The model is asymmetric: tools are embedded by the general all-MiniLM-L6-v2 and requests by the
trained encoder (the *teacher*, ``minilm-l6-tools-v1``). Only the request side runs per request,
so only it has to be fast. The student is the same architecture cut to the transformer layers
``--init-layers`` of the teacher (its weights rebuilt from the int8 file, ``training.teacher_weights``;
``--start general`` takes the general model's), trained to put every request where the teacher puts it:

- ``1 - cos(student, teacher)`` on each text, and
- the teacher's ranking of the text's catalog: KL(softmax(scale·teacher·tools) ‖ softmax(scale·student·tools))
  over every tool of the catalog the text belongs to (the frozen general-model tool vectors).

No labels are used: what is learnt is the teacher's reading of requests. The texts (``request_texts``)
are every request shape the product embeds: each dev request, the parts the ranking embeds
separately (``split_request_intents``, ``split_query_parts``, the agent loop's
``split_request_clauses``), requests made from every tool's own texts (``build_pairs.pseudo_queries``),
two-step requests composed of two of them, and small talk the no-tool judgement reads.

    python -m training.distill --out training/out/student [--exclude livemcpbench] [--init-layers 0,5]

Writes ``<out>/hf`` (fp32), ``<out>/onnx`` (int8, the runtime layout) and ``<out>/distill_log.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F
from transformers import AutoModel, AutoTokenizer

from sk_toolfilter.agents.catalog import load_catalog
from sk_toolfilter.retrieval.embeddings import LocalEmbeddingGenerator
from sk_toolfilter.retrieval.gloss import with_english_gloss
from sk_toolfilter.retrieval.local_models import TOOL_SIDE_MODEL_ID, resolve_local_model
from sk_toolfilter.retrieval.text import split_query_parts, split_request_clauses, split_request_intents
from training import export
from training.build_pairs import composed_queries, pseudo_queries, real_queries
from training.optim import optimizer_step, warmup_then_decay
from training.sources import BENCHMARKS, SOURCES
from training.train import Catalogs, base_model_dir, encode

TEACHER = "minilm-l6-tools-v1"

# Requests that need no tool (the small-talk judgement compares them with small-talk descriptions).
# Written here for distillation; none is from the small-talk evaluation set.
SMALL_TALK = (
    "hello", "hey there", "good morning!", "hi, how are you?", "thank you so much", "thanks, that's all",
    "ok great", "bye for now", "who are you?", "what can you help me with?", "nice, appreciate it",
    "sorry, never mind", "lol", "that was helpful", "good night", "are you a bot?", "cool", "see you later",
    "what's up", "you're awesome", "no thanks", "yes please", "how's your day going?", "tell me about yourself",
)  # fmt: skip


def request_texts(source: str, folder: Path, rng: random.Random, composed: int) -> dict[str, list[str]]:
    """Every text of one source the student learns from, with its gold tools where known (a dev
    request's, a pseudo-request's own tool; none for a part of a request). Order fixed by `rng`."""
    tools = [t for t, _ in load_catalog(folder / "tools.jsonl")]
    labelled: list[tuple[str, list[str]]] = []
    for query, gold in real_queries(source, folder):
        labelled.append((query, gold))
        parts = [*split_request_intents(query), *split_query_parts(query)]
        if source == "bfcl_multiturn":
            parts += split_request_clauses(query)
        labelled += [(part, []) for part in parts]
    pseudo = [("pseudo", q, [t.full_name]) for t in tools for q in pseudo_queries(t)]
    labelled += [(q, gold) for _, q, gold in pseudo]
    labelled += [(q, gold) for _, q, gold in composed_queries(pseudo, composed, rng)]
    texts: dict[str, list[str]] = {}
    for text, gold in labelled:
        if text.strip():
            known = texts.setdefault(text.strip(), [])
            known += [g for g in gold if g not in known]
    order = list(texts)
    rng.shuffle(order)
    return {t: texts[t] for t in order}


def teacher_vectors(texts: list[str], teacher: str, log) -> np.ndarray:
    """The teacher's unit vectors of `texts` (already read as the index reads a request: with the gloss)."""
    service = LocalEmbeddingGenerator(model=teacher).query_encoder
    out = []
    started = time.perf_counter()
    for start in range(0, len(texts), 256):
        batch = texts[start : start + 256]
        out.append(np.asarray(asyncio.run(service.generate_embeddings(batch)), dtype=np.float32))
        done = start + len(batch)
        rate = done / (time.perf_counter() - started)
        log(f"teacher vectors {done}/{len(texts)} ({rate:.0f}/s, {(len(texts) - done) / rate / 60:.1f} min left)")
    return np.concatenate(out)


def student_model(layers: list[int], start: str = "teacher", teacher: str = TEACHER):
    """`teacher`'s network (``start="teacher"``, rebuilt from its int8 file) or the general model's
    (``"general"``) cut to `layers` (indices into its six layers, kept in order). A leave-one-out
    student must start from its own teacher's layers: the shipped teacher was trained on every set."""
    if start == "teacher":
        from training.teacher_weights import teacher_model

        # The same model `teacher_vectors` embeds with: a shipped id or a folder with a model.json.
        model = teacher_model(resolve_local_model(teacher).model_file)
    else:
        model = AutoModel.from_pretrained(str(base_model_dir()))
    model.encoder.layer = torch.nn.ModuleList([model.encoder.layer[i] for i in layers])
    model.config.num_hidden_layers = len(layers)
    return model


def gold_loss(student, idx: list[int], rows, gold: dict[int, list[str]], catalogs: Catalogs, scale: float):
    """InfoNCE of the labelled rows against their whole catalog (the teacher's own objective): each
    gold tool a positive, the row's other gold tools masked."""
    losses = []
    for j, i in enumerate(idx):
        positions = catalogs.position[rows[i][0]]
        golds = [positions[g] for g in gold.get(i, ()) if g in positions]
        if not golds:
            continue
        logits = scale * (catalogs.vectors[rows[i][0]] @ student[j])
        for target in golds:
            masked = logits.clone()
            others = [g for g in golds if g != target]
            if others:
                masked[others] = -1e4
            losses.append(F.cross_entropy(masked[None], torch.tensor([target])))
    return torch.stack(losses).mean() if losses else student.sum() * 0.0


def length_buckets(lengths: list[int], batch_size: int, rng: random.Random, pool: int = 50) -> list[list[int]]:
    """One epoch of batches in random order, each drawn from texts of similar length (less padding):
    shuffled, cut into pools of `pool` batches, sorted by length inside a pool."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    batches = []
    for start in range(0, len(order), batch_size * pool):
        chunk = sorted(order[start : start + batch_size * pool], key=lengths.__getitem__)
        batches += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
    rng.shuffle(batches)
    return batches


def distill(args) -> Path:
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    torch.set_num_threads(args.threads)

    def log(text: str) -> None:
        print(f"[{(time.perf_counter() - started) / 60:5.1f} min] {text}", file=sys.stderr, flush=True)

    started = time.perf_counter()
    excluded = {s for s in args.exclude.split(",") if s}
    sources = [s for s in args.sources.split(",") if s and s not in excluded]
    rows: list[tuple[str, str]] = []
    gold: dict[int, list[str]] = {}  # row -> its gold tools (only where known)
    for source in sources:
        texts = request_texts(source, args.root / source, rng, args.composed_per_source)
        for text, tools in texts.items():
            if tools:
                gold[len(rows)] = tools
            rows.append((source, text))
        log(f"{source}: {len(texts)} texts, {sum(1 for t in texts.values() if t)} with gold tools")
    # Small talk is ranked against the general catalog it would meet first: any one works.
    rows += [(sources[0], t) for t in SMALL_TALK]
    if args.max_texts:
        rows = rows[: args.max_texts]
    catalogs = Catalogs(sources, args.root, args.cache_dir)
    # Requests as the index embeds them (Chinese text with its English gloss), glossed once for every epoch.
    read = [with_english_gloss(t) for _, t in rows]
    targets = torch.from_numpy(teacher_vectors(read, args.teacher, log))
    tokenizer = AutoTokenizer.from_pretrained(str(base_model_dir()))
    model = student_model([int(i) for i in args.init_layers.split(",")], args.start, args.teacher)
    model.train()
    if args.freeze_embeddings:
        for parameter in model.embeddings.parameters():
            parameter.requires_grad_(False)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=args.lr, weight_decay=0.01)
    total = max(1, int(math.ceil(len(rows) / args.batch_size) * args.epochs))
    scheduler = warmup_then_decay(optimizer, total, max(1, int(0.05 * total)))
    log(f"{len(rows)} texts, {len(trainable)} trainable tensors, {total} steps of {args.batch_size}")
    step, losses = 0, []
    train_started = time.perf_counter()
    lengths = [len(t) for _, t in rows]
    while step < total:
        for idx in length_buckets(lengths, args.batch_size, rng):
            if step >= total:
                break
            student = encode(model, tokenizer, [read[i] for i in idx], args.max_tokens)
            teacher = targets[idx]
            loss = (1 - (student * teacher).sum(-1)).mean() * args.cos_weight
            by_source: dict[str, list[int]] = {}
            for j, i in enumerate(idx):
                by_source.setdefault(rows[i][0], []).append(j)
            for source, members in by_source.items():  # one matrix product per catalog
                tools = catalogs.vectors[source]
                loss = loss + F.kl_div(
                    F.log_softmax(args.scale * (student[members] @ tools.T), -1),
                    F.log_softmax(args.scale * (teacher[members] @ tools.T), -1),
                    log_target=True,
                    reduction="sum",
                ) / len(idx)
            if args.gold_weight:
                loss = loss + args.gold_weight * gold_loss(student, idx, rows, gold, catalogs, args.scale)
            losses.append(optimizer_step(loss, trainable, optimizer, scheduler))
            step += 1
            if step % args.log_every == 0 or step == total:
                elapsed = time.perf_counter() - train_started
                log(
                    f"step {step}/{total}  loss {np.mean(losses[-args.log_every :]):.4f}  "
                    f"{step / elapsed:.2f} steps/s, {(total - step) * elapsed / step / 60:.1f} min left"
                )
    model.eval()
    hf = args.out / "hf"
    hf.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(hf))
    tokenizer.save_pretrained(str(hf))
    onnx_dir = args.out / "onnx"
    description = f"{len(model.encoder.layer)}-layer student of {args.teacher} (requests); tools: {TOOL_SIDE_MODEL_ID}"
    export.export(hf, onnx_dir, args.id, description=description)
    (args.out / "distill_log.json").write_text(
        json.dumps(
            {
                "texts": len(rows),
                "texts_by_source": {s: sum(1 for r in rows if r[0] == s) for s in sources},
                "steps": total,
                "minutes": round((time.perf_counter() - started) / 60, 1),
                "final_loss": float(np.mean(losses[-50:])) if losses else None,
                "settings": {k: str(v) for k, v in vars(args).items()},
            },
            indent=2,
        )
    )
    log(f"done: {onnx_dir}")
    return onnx_dir


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--id", default="minilm-l2-tools-v1", help="the student's model id")
    parser.add_argument("--teacher", default=TEACHER, help="model id or folder of the request encoder to copy")
    parser.add_argument("--root", type=Path, default=BENCHMARKS)
    parser.add_argument("--sources", default=",".join(s.name for s in SOURCES), help="dev sets (folders of --root)")
    parser.add_argument("--exclude", default="", help="sources left out (leave-one-dataset-out)")
    parser.add_argument("--init-layers", default="0,5", help="layers of the start network the student keeps")
    parser.add_argument("--start", choices=("teacher", "general"), default="teacher", help="start weights")
    parser.add_argument("--composed-per-source", type=int, default=1000)
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--scale", type=float, default=20.0, help="inverse temperature of the ranking KL")
    parser.add_argument("--cos-weight", type=float, default=1.0)
    parser.add_argument("--gold-weight", type=float, default=1.0, help="weight of the gold-tool InfoNCE")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--freeze-embeddings", action="store_true")
    parser.add_argument("--max-texts", type=int, default=0, help="at most N texts (tiny runs)")
    parser.add_argument("--cache-dir", type=Path, default=None, help="embedding cache for the tool side")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--log-every", type=int, default=25)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    distill(parse_args(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
