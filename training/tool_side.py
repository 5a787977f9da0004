"""Training the tool side too: the top layers of the tools' encoder, above frozen lower layers.

``train.py --tool-layers N`` makes the tool side a second copy of the start weights whose top ``N``
transformer layers are trained with the request encoder. The frozen layers' output of every tool text
is computed once (each step then runs only the top layers), and the whole catalog's vectors, used as
negatives, are refreshed every ``--refresh-every`` steps; within a step the tools of the batch (each
row's gold tool and mined negatives) are encoded afresh, so the gradient reaches the tool side through
them. The tool side then ships as its own model (``export.py`` writes both; the request encoder's
manifest names it in ``documents``), so every cache keyed by the tool model starts empty.
"""

from __future__ import annotations

import sys
import time

import torch
from torch.nn import functional as F
from transformers import AutoModel


def unit_mean(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean of each text's token states over its real tokens, unit length: the runtime's pooling."""
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return F.normalize((hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9), dim=-1)


class ToolTower:
    """The tools' encoder with its lowest layers' outputs cached per tool text."""

    def __init__(self, base: str, tokenizer, catalogs: dict[str, list[str]], trainable_layers: int, max_length: int):
        self.model = AutoModel.from_pretrained(base)
        layers = self.model.encoder.layer
        if not 0 < trainable_layers <= len(layers):
            raise ValueError(f"--tool-layers must be 1..{len(layers)}, got {trainable_layers}")
        self.split = len(layers) - trainable_layers
        for module in [self.model.embeddings, *layers[: self.split]]:
            for parameter in module.parameters():
                parameter.requires_grad_(False)
        self.model.eval()  # the cached layers' outputs without dropout; train() is set by the caller
        self.hidden: dict[str, list[torch.Tensor]] = {}
        started, done, total = time.perf_counter(), 0, sum(len(t) for t in catalogs.values())
        for source, texts in catalogs.items():
            self.hidden[source] = []
            for start in range(0, len(texts), 64):
                batch = tokenizer(
                    texts[start : start + 64], padding=True, truncation=True, max_length=max_length, return_tensors="pt"
                )
                with torch.no_grad():
                    states = self._lower(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
                for row, length in zip(states, batch["attention_mask"].sum(1).tolist(), strict=True):
                    self.hidden[source].append(row[:length].clone())
                done += len(batch["input_ids"])
            rate = done / (time.perf_counter() - started)
            print(f"tool side: {source} cached ({done}/{total} texts, {rate:.0f}/s)", file=sys.stderr, flush=True)

    def _lower(self, input_ids, attention_mask, token_type_ids) -> torch.Tensor:
        states = self.model.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
        extended = self.model.get_extended_attention_mask(attention_mask, input_ids.shape)
        for layer in self.model.encoder.layer[: self.split]:
            states = layer(states, attention_mask=extended)[0]
        return states

    def encode(self, source: str, positions: list[int]) -> torch.Tensor:
        """Unit vectors of the tools at `positions` of `source`'s catalog (differentiable)."""
        rows = [self.hidden[source][p] for p in positions]
        longest = max(len(r) for r in rows)
        states = torch.zeros(len(rows), longest, rows[0].shape[-1])
        mask = torch.zeros(len(rows), longest, dtype=torch.long)
        for i, r in enumerate(rows):
            states[i, : len(r)] = r
            mask[i, : len(r)] = 1
        extended = self.model.get_extended_attention_mask(mask, mask.shape)
        for layer in self.model.encoder.layer[self.split :]:
            states = layer(states, attention_mask=extended)[0]
        return unit_mean(states, mask)

    def catalog_vectors(self, source: str) -> torch.Tensor:
        """Every tool of `source` with the current weights (no gradient): the step's other negatives."""
        order = sorted(range(len(self.hidden[source])), key=lambda i: len(self.hidden[source][i]))
        out = torch.empty(len(order), self.model.config.hidden_size)
        training = self.model.training
        self.model.eval()
        with torch.no_grad():
            for start in range(0, len(order), 128):
                chosen = order[start : start + 128]
                out[chosen] = self.encode(source, chosen)
        self.model.train(training)
        return out
