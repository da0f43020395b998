"""Token logprobs of a packed tree without the full ``[N, vocab]`` logits.

A forward that returns logits for every position costs ``N x vocab x 4`` bytes (fp32), plus as
much again for autograd: 39 GB at 64K tokens with a 151K vocabulary. The loss needs logprobs
only at tokens that train (or whose train/rollout mismatch is measured), and the logit of token
``i`` sits at its parent position ``prev_index[i]``. So the model returns only its final hidden
states (``logits_to_keep`` empty), the rows of the needed parents are gathered, and the output
head runs over them ``chunk_size`` rows at a time under activation checkpointing: autograd keeps
the ``[M, hidden]`` rows, and one chunk's ``[chunk, vocab]`` logits exist at a time (recomputed
in backward). The call goes through the top-level module, so wrappers (PEFT, DDP) see a forward.

``temperature`` divides the logits first, as TRL does: the loss scores the distribution the rollouts
were sampled from (``log_softmax(logits / T)``), and so do the reference and the mismatch metrics.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.checkpoint import checkpoint

from clawgym_env.errors import ConfigError
from clawgym_env.tree import PackedTree

__all__ = ["head_logprobs", "pack_logprobs"]


def _chunk_logprobs(hidden: torch.Tensor, targets: torch.Tensor, head: torch.nn.Module, temperature: float) -> torch.Tensor:
    logits = head(hidden).float() / temperature
    return logits.gather(-1, targets[:, None])[:, 0] - torch.logsumexp(logits, dim=-1)


def head_logprobs(
    hidden: torch.Tensor, head: torch.nn.Module, targets: torch.Tensor, chunk_size: int = 1024, temperature: float = 1.0
) -> torch.Tensor:
    """``log_softmax(head(hidden) / temperature)[targets]`` for ``[M, H]`` rows, ``chunk_size`` rows at a time (fp32)."""
    if chunk_size < 1:
        raise ConfigError(f"logprob chunk_size={chunk_size}: set a positive number of rows (e.g. 1024)")
    if not temperature > 0:
        raise ConfigError(f"temperature={temperature}: set a positive sampling temperature (e.g. 1.0)")
    grad = torch.is_grad_enabled() and (hidden.requires_grad or any(p.requires_grad for p in head.parameters()))
    out = []
    for lo in range(0, int(hidden.shape[0]), chunk_size):
        h, t = hidden[lo : lo + chunk_size], targets[lo : lo + chunk_size]
        out.append(
            checkpoint(_chunk_logprobs, h, t, head, temperature, use_reentrant=False) if grad else _chunk_logprobs(h, t, head, temperature)
        )
    return torch.cat(out) if out else hidden.new_zeros(0, dtype=torch.float32)


def _check_plain_head(config: Any) -> None:
    for attr in ("final_logit_softcapping", "logit_scale"):
        if getattr(config, attr, None) not in (None, 1.0):
            raise ConfigError(
                f"model config sets {attr}={getattr(config, attr)!r}: chunked logprobs apply the output "
                "head only; set logprob_chunk_size=0 (full logits) for this model"
            )


def pack_logprobs(
    model: Any,
    pack: PackedTree,
    *,
    mask_kind: str,
    device: torch.device | str,
    dtype: torch.dtype,
    tokens: torch.Tensor | None = None,
    chunk_size: int = 1024,
    inner: Any | None = None,
    temperature: float = 1.0,
) -> torch.Tensor:
    """Logprob of ``tokens`` (default: the pack's loss tokens) at ``temperature``, as an ``[N]`` tensor, 0 elsewhere.

    ``chunk_size=0`` is the former path, kept for comparison: full ``[N, vocab]`` logits, every token.
    ``inner`` is the model itself when ``model`` is a wrapper that only forwards (DDP).
    """
    inner = model if inner is None else inner
    inputs = pack.model_inputs(mask_kind, dtype=dtype, device=device)  # type: ignore[arg-type]  # a dtype, not a str
    if chunk_size == 0:
        return pack.token_logprobs(model(**inputs).logits[0].float() / temperature)
    _check_plain_head(inner.config)
    if tokens is None:
        tokens = pack.loss_mask.nonzero()[:, 0]
    tokens = tokens.to(device)
    parents = pack.prev_index.to(device)[tokens]
    if bool((parents < 0).any()):
        raise ConfigError("pack_logprobs: a requested token has no parent (a tree's first token has no logprob)")
    out = model(**inputs, output_hidden_states=True, logits_to_keep=torch.zeros(0, dtype=torch.long, device=device))
    hidden = out.hidden_states[-1][0]  # after the final norm: what the output head reads
    lp = head_logprobs(hidden[parents], inner.get_output_embeddings(), pack.input_ids.to(device)[tokens], chunk_size, temperature)
    full = torch.zeros(len(pack), dtype=lp.dtype, device=device)
    return full.index_put((tokens,), lp)
