"""Keys/values of prompt blocks seen before, shared across sessions (automatic prefix caching).

Every episode of one harness opens with the same long system prompt and tool list (Claude Code:
3-12k tokens), and each call of an episode extends the last one. Storing keys/values per block of
``block`` tokens under a hash of the whole prefix up to that block (a chain: a block's key hashes
its parent's key and its own ids, as vLLM's automatic prefix caching does) lets any new prompt
find the longest stored prefix of full blocks, whichever session left it, and share one copy of
it. Keys are 16-byte blake2b digests and each block also keeps its ids and parent, checked on
lookup, so a hit is exact. The store is an LRU bounded in bytes; a chain is touched leaf first,
so leaves are evicted before the prefixes other chains share. For a mixture-of-experts model a block
also keeps the experts its tokens were routed to when its keys and values were computed: a call that
reuses the block was routed so there (``_hf_routing.py``).
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from dataclasses import dataclass
from hashlib import blake2b
from typing import Any

__all__ = ["PrefixCache"]

_ROOT = b"clawgym-prefix-root"


@dataclass
class _Block:
    parent: bytes
    ids: array
    kv: Any
    """(layers, 2, kv_heads, block, head_dim): one tensor, so a block costs one copy and one free."""
    nbytes: int
    routing: Any = None
    """(block, MoE layers, top_k) expert indices of its tokens; None for a dense model."""


class PrefixCache:
    """Hash-chained KV blocks across sessions, LRU-bounded to ``budget`` bytes (0 disables it)."""

    def __init__(self, budget: int, block: int = 32) -> None:
        if block < 1:
            raise ValueError(f"prefix block size must be >= 1, got {block}")
        self.budget = budget
        self.block = block
        self.bytes = 0
        self._blocks: OrderedDict[bytes, _Block] = OrderedDict()

    def __len__(self) -> int:
        return len(self._blocks)

    def _chain(self, ids: list[int], n_blocks: int) -> list[tuple[bytes, bytes, array]]:
        """(key, parent key, ids) of the first ``n_blocks`` full blocks of ``ids``."""
        out, parent, b = [], _ROOT, self.block
        for i in range(n_blocks):
            chunk = array("q", ids[i * b : (i + 1) * b])
            key = blake2b(parent + chunk.tobytes(), digest_size=16).digest()
            out.append((key, parent, chunk))
            parent = key
        return out

    def lookup(self, prompt: list[int], skip: int = 0) -> tuple[int, Any | None, Any | None]:
        """(n, kv, routing) for the longest stored block prefix of ``prompt`` short of its last id, else (skip, None, None).

        ``kv`` is one (layers, 2, kv_heads, n - skip, head_dim) tensor of the tokens ``skip..n`` (``skip``, a multiple
        of the block size, tokens the caller holds already: a trunk, whose blocks need not be stored), ``routing`` the
        (n - skip, MoE layers, top_k) experts of those tokens (None for a dense model). The last prompt id is always
        left to prefill, since its logits are what the next token is sampled from.
        """
        import numpy as np
        import torch

        if self.budget <= 0:
            return skip, None, None
        hits: list[tuple[bytes, _Block]] = []
        for key, parent, chunk in self._chain(prompt, (len(prompt) - 1) // self.block)[skip // self.block :]:
            blk = self._blocks.get(key)
            if blk is None or blk.parent != parent or blk.ids != chunk:
                break
            hits.append((key, blk))
        if not hits:
            return skip, None, None
        self._touch([k for k, _ in hits])
        routed = hits[0][1].routing is not None
        routing = np.concatenate([blk.routing for _, blk in hits]) if routed else None
        return skip + len(hits) * self.block, torch.cat([blk.kv for _, blk in hits], dim=3), routing

    def put(self, ids: list[int], layers: list[tuple[Any, Any]], offset: int = 0, routing: Any = None, start: int = 0) -> None:
        """Store the full blocks of ``ids`` from token ``start`` on (a multiple of the block size) not stored yet; the
        keys/values of ``ids[i]`` are ``layers[j][0|1][row, :, offset + i]`` (``row`` is the leading dimension, size 1
        or indexed before), its experts ``routing[i]`` (MoE models)."""
        import torch

        if self.budget <= 0:
            return
        chain = self._chain(ids, len(ids) // self.block)
        first = start // self.block
        missing = [i for i, (key, _, _) in enumerate(chain) if i >= first and key not in self._blocks]
        if missing:
            b, lo, hi = self.block, missing[0], missing[-1] + 1
            span = slice(offset + lo * b, offset + hi * b)
            whole = torch.stack([torch.stack([k[0, :, span], v[0, :, span]]) for k, v in layers])
            for i in missing:
                key, parent, chunk = chain[i]
                kv = whole[:, :, :, (i - lo) * b : (i - lo + 1) * b].clone()
                rows = None if routing is None else routing[i * b : (i + 1) * b].copy()
                blk = _Block(parent, chunk, kv, kv.numel() * kv.element_size() + (0 if rows is None else rows.nbytes), rows)
                self._blocks[key] = blk
                self.bytes += blk.nbytes
        self._touch([key for key, _, _ in chain])
        while self.bytes > self.budget and self._blocks:
            _, old = self._blocks.popitem(last=False)
            self.bytes -= old.nbytes

    def _touch(self, keys: list[bytes]) -> None:
        for key in reversed(keys):  # leaf first: the shared root ends most recent, evicted last
            if key in self._blocks:
                self._blocks.move_to_end(key)

    def clear(self) -> None:
        """Forget everything (the keys/values belong to weights that were just replaced)."""
        self._blocks.clear()
        self.bytes = 0
