"""Train the second stage: a cross-encoder that reorders the first stage's shortlist (CPU).

Data: :mod:`training.rerank_shortlists` (each labelled request with the first stage's top 30).
Model: the lowest ``--layers`` layers of all-MiniLM-L6-v2 (fp32 start weights, see
:func:`training.train.base_model_dir`) reading ``[CLS] request [SEP] tool [SEP]``, mean-pooled, one
linear output: the pair's score. Loss, per request: its gold tools (up to ``--positives``) each
against the group's negatives — the shortlist's non-gold tools, the first stage's best first
(``--hard``) and random others — softmax cross-entropy (multi-positive InfoNCE): every needed tool
above every tool not needed, whatever the number of tools a request needs.

Leave-one-catalog-out (:data:`FOLDS`): ``--hold-out FAMILY`` trains without that family (its requests
and catalogs) and scores the held-out family's shortlists, written to ``<out>/scores.jsonl`` for
:mod:`training.experiments.rerank_folds`. Without ``--hold-out`` it trains on every family (the shipped model).

    python -m training.experiments.train_reranker --data training/out/rerank --out training/out/rerank/fold-callnavi \\
        --hold-out callnavi
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F
from transformers import AutoModel, AutoTokenizer

from sk_toolfilter.retrieval.gloss import with_english_gloss
from sk_toolfilter.retrieval.rerank import RERANK_MAX_TOKENS
from training.optim import warmup_then_decay
from training.train import base_model_dir

# A fold holds out one family: never in its training, requests or catalogs. tooltalk and apibank are
# small extras, always trained on.
FOLDS: dict[str, tuple[str, ...]] = {
    "metatool": ("metatool",),
    "bfcl": ("bfcl",),  # bfcl_multiturn's turn requests belong to this family (training.rerank_shortlists)
    "seal_tools": ("seal_tools",),
    "livemcpbench": ("livemcpbench",),
    "callnavi": ("callnavi",),
    "nestful_restbench_acebench": ("nestful", "restbench", "acebench"),
}


class CrossEncoder(nn.Module):
    """Score of a (request, tool) pair: mean-pooled encoder output -> one linear unit. The second stage
    ranks by ``score + prior_weight * -log(1 + first-stage position)``: the network learns what the
    first stage's order misses (residual learning: a few thousand requests are enough), and
    ``prior_weight`` is learned with it."""

    def __init__(self, base: Path, layers: int) -> None:
        super().__init__()
        self.encoder = AutoModel.from_pretrained(str(base), num_hidden_layers=layers)
        self.head = nn.Linear(self.encoder.config.hidden_size, 1)
        nn.init.normal_(self.head.weight, std=0.02)
        nn.init.zeros_(self.head.bias)
        self.prior_weight = nn.Parameter(torch.tensor(2.0))

    def forward(self, input_ids, attention_mask, token_type_ids):  # type: ignore[no-untyped-def]
        hidden = self.encoder(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return self.head(pooled).squeeze(-1)


def load(data: Path) -> tuple[list[dict], dict[str, dict[str, str]]]:
    rows = [json.loads(line) for line in (data / "shortlists.jsonl").read_text().splitlines() if line.strip()]
    texts = {p.stem: json.loads(p.read_text()) for p in (data / "tools").glob("*.json")}
    return rows, texts


def score_pairs(model: CrossEncoder, tokenizer, query: str, tools: list[str], batch: int = 64) -> torch.Tensor:
    out = []
    for start in range(0, len(tools), batch):
        chunk = tools[start : start + batch]
        enc = tokenizer(
            [query] * len(chunk),
            chunk,
            padding=True,
            truncation="longest_first",
            max_length=RERANK_MAX_TOKENS,
            return_tensors="pt",
        )
        out.append(model(**enc))
    return torch.cat(out) if out else torch.zeros(0)


def rank_prior(row: dict, name: str) -> float:
    """``-log(1 + position)`` of `name` in the first stage's shortlist (past its end when absent)."""
    shortlist = row["shortlist"]
    return -math.log(1 + (shortlist.index(name) if name in shortlist else len(shortlist)))


def group_of(row: dict, texts: dict[str, str], rng: random.Random, args) -> tuple[list[str], list[float], int] | None:
    """(tool texts, their first-stage rank priors, number of positives first) of one request's group."""
    gold = [g for g in row["gold"] if g in texts]
    if not gold:
        return None
    positives = rng.sample(gold, min(len(gold), args.positives))
    negatives = [n for n in row["shortlist"] if n not in row["gold"] and n in texts]
    hard, rest = negatives[: args.hard], negatives[args.hard :]
    picked = hard + rng.sample(rest, min(len(rest), max(0, args.group - len(positives) - len(hard))))
    if not picked:  # a catalog as small as the request's gold: nothing to rank against
        others = [n for n in texts if n not in row["gold"]]
        picked = rng.sample(others, min(len(others), args.group - len(positives)))
    if not picked:
        return None
    names = positives + picked
    return [texts[n] for n in names], [rank_prior(row, n) for n in names], len(positives)


def group_loss(scores: torch.Tensor, n_positive: int) -> torch.Tensor:
    """Each positive against every negative of its group (softmax cross-entropy)."""
    negatives = scores[n_positive:]
    losses = [
        F.cross_entropy(torch.cat([scores[i : i + 1], negatives])[None], torch.tensor([0])) for i in range(n_positive)
    ]
    return torch.stack(losses).mean()


def train(args: argparse.Namespace) -> None:
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    rng = random.Random(args.seed)
    rows, texts = load(args.data)
    held_out = set(FOLDS[args.hold_out]) if args.hold_out else set()

    def trainable(row: dict) -> bool:  # a needed tool to learn, and a tool not needed to rank it against
        catalog = texts[row["catalog"]]
        return any(g in catalog for g in row["gold"]) and any(n not in row["gold"] for n in catalog)

    training_rows = [r for r in rows if r["family"] not in held_out and trainable(r)]
    if not training_rows:
        raise SystemExit("no trainable request: every request's catalog holds only its own gold tools")
    by_catalog: dict[str, list[dict]] = {}
    for row in training_rows:
        by_catalog.setdefault(row["catalog"], []).append(row)
    training_rows = [r for rs in by_catalog.values() for r in rng.sample(rs, min(len(rs), args.per_catalog))]
    if args.limit:
        rng.shuffle(training_rows)
        training_rows = training_rows[: args.limit]
    base = base_model_dir()
    tokenizer = AutoTokenizer.from_pretrained(str(base))
    model = CrossEncoder(base, args.layers)
    model.train()
    # The embeddings stay frozen: 11.7 M of the 2-layer model's 15 M weights, and most of a step's time.
    for parameter in model.encoder.embeddings.parameters():
        parameter.requires_grad_(False)
    head = [*model.head.parameters(), model.prior_weight]
    body = [p for n, p in model.named_parameters() if n.startswith("encoder.") and p.requires_grad]
    optimizer = torch.optim.AdamW([{"params": body, "lr": args.lr}, {"params": head, "lr": args.head_lr}])
    args.batch = min(args.batch, len(training_rows))
    steps_per_epoch = max(1, len(training_rows) // args.batch)
    total = int(steps_per_epoch * args.epochs)
    scheduler = warmup_then_decay(optimizer, total, max(1, total // 10))
    print(
        f"training on {len(training_rows)} requests ({', '.join(sorted({r['family'] for r in training_rows}))}); "
        f"held out: {args.hold_out or 'none'}; {total} steps",
        file=sys.stderr,
        flush=True,
    )
    started, step, running = time.perf_counter(), 0, 0.0
    while step < total:
        order = list(range(len(training_rows)))
        rng.shuffle(order)
        for first in range(0, len(order) - args.batch + 1, args.batch):
            if step >= total:
                break
            groups = []
            for i in order[first : first + args.batch]:
                row = training_rows[i]
                group = group_of(row, texts[row["catalog"]], rng, args)
                if group is not None:
                    groups.append((with_english_gloss(row["query"]), *group))
            if not groups:
                continue
            queries = [q for q, tools, _, _ in groups for _ in tools]
            tools = [t for _, ts, _, _ in groups for t in ts]
            priors = torch.tensor([p for _, _, ps, _ in groups for p in ps])
            enc = tokenizer(
                queries,
                tools,
                padding=True,
                truncation="longest_first",
                max_length=RERANK_MAX_TOKENS,
                return_tensors="pt",
            )
            scores = model(**enc) + (model.prior_weight * priors if args.prior else 0.0)
            losses, at = [], 0
            for _, ts, _, n_positive in groups:
                losses.append(group_loss(scores[at : at + len(ts)], n_positive))
                at += len(ts)
            loss = torch.stack(losses).mean()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            step += 1
            running += loss.item()
            if step % args.log_every == 0 or step == total:
                elapsed = time.perf_counter() - started
                rate = step / elapsed
                print(
                    f"step {step}/{total}  loss {running / args.log_every:.4f}  prior {model.prior_weight.item():.2f}  "
                    f"{rate:.2f} steps/s  "
                    f"left {(total - step) / rate / 60:.1f} min",
                    file=sys.stderr,
                    flush=True,
                )
                running = 0.0
    args.out.mkdir(parents=True, exist_ok=True)
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k not in ("data", "out")}
    (args.out / "settings.json").write_text(json.dumps({**settings, "requests": len(training_rows), "steps": total}))
    torch.save(
        {"state": model.state_dict(), "layers": args.layers, "prior_weight": model.prior_weight.item()},
        args.out / "reranker.pt",
    )
    tokenizer.save_pretrained(str(args.out / "tokenizer"))
    if held_out:
        evaluated = [r for r in rows if r["family"] in held_out]
        if args.eval_limit and len(evaluated) > args.eval_limit:  # a seeded sample, the same for every run
            evaluated = random.Random(0).sample(evaluated, args.eval_limit)
        write_scores(model, tokenizer, evaluated, texts, args.out / "scores.jsonl", args.eval_depth)


@torch.no_grad()
def write_scores(model: CrossEncoder, tokenizer, rows: list[dict], texts: dict, out: Path, depth: int) -> None:
    """The held-out requests' shortlists (their first `depth` tools) with the reranker's score of each."""
    model.eval()
    started = time.perf_counter()
    with out.open("w") as sink:
        for n, row in enumerate(rows, 1):
            catalog = texts[row["catalog"]]
            shortlist = [t for t in row["shortlist"] if t in catalog][:depth]
            scores = score_pairs(model, tokenizer, with_english_gloss(row["query"]), [catalog[t] for t in shortlist])
            row = {**row, "shortlist": shortlist, "prior_weight": round(model.prior_weight.item(), 4)}
            sink.write(json.dumps({**row, "scores": [round(float(s), 4) for s in scores]}))
            sink.write("\n")
            if n % 200 == 0:
                print(f"scored {n}/{len(rows)}  {n / (time.perf_counter() - started):.1f} requests/s", file=sys.stderr)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="training.rerank_shortlists output")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--hold-out", choices=sorted(FOLDS), default=None)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--batch", type=int, default=8, help="requests per step")
    parser.add_argument("--group", type=int, default=8, help="tools per request")
    parser.add_argument("--per-catalog", type=int, default=500, help="at most this many requests of one catalog")
    parser.add_argument("--positives", type=int, default=4)
    parser.add_argument("--hard", type=int, default=4, help="the first stage's best non-gold tools in each group")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument(
        "--no-prior",
        dest="prior",
        action="store_false",
        help="train the network alone (the first stage's order is blended in at ranking time only)",
    )
    parser.add_argument("--head-lr", type=float, default=1e-3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0, help="train on this many requests (a quick check)")
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument("--eval-depth", type=int, default=20, help="held-out shortlists scored to this depth")
    parser.add_argument("--eval-limit", type=int, default=800, help="at most this many held-out requests (seeded)")
    parser.add_argument("--seed", type=int, default=13)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    train(parse_args(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
