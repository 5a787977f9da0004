"""The optimisation steps every training script shares (torch only: no sk_toolfilter import, so a
script that runs where only torch is installed can use them)."""

from __future__ import annotations

import random
from collections.abc import Iterator

import torch


def shuffled_batches(count: int, batch_size: int, total: int, rng: random.Random) -> Iterator[list[int]]:
    """`total` batches of positions in ``range(count)``: pass after pass over a fresh shuffle (by `rng`),
    each pass cut into batches of `batch_size` (a pass's last batch may be shorter)."""
    step = 0
    while step < total:
        order = list(range(count))
        rng.shuffle(order)
        for start in range(0, count, batch_size):
            if step >= total:
                return
            yield order[start : start + batch_size]
            step += 1


def warmup_then_decay(optimizer, total: int, warmup: int):
    """Linear warm-up over `warmup` steps, then linear decay to 0 at step `total`."""
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (total - s) / max(1, total - warmup)))
    )


def optimizer_step(loss: torch.Tensor, trainable: list, optimizer, scheduler) -> float:
    """Backpropagate `loss`, clip gradients at norm 1, step; the loss value."""
    loss.backward()
    torch.nn.utils.clip_grad_norm_(trainable, 1.0)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    return loss.item()
