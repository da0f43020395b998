"""TreeSFTTrainer: next-token NLL on the policy tokens of captured episodes, packed as prefix trees.

The same layout as the RL trainers (``clawgym_env.tree``: one forest per harness, so the harness's
system prompt is forwarded once per pack; pre-order packs under a 4D tree mask; depth positions),
and the same forward (``tree_sft.forward.tree_logprobs``, which the GRPO stage of the Pass@1
experiment uses too). Loss: mean NLL over the sampled (policy) tokens of the calls in a step's packs,
each token counted once per call that sampled it (``pack_nll``), so it equals per-episode SFT;
prompt, tool-result and harness tokens never train. Each epoch reshuffles episodes into new packs.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from clawgym_env.capture.records import CallRecord
from clawgym_env.errors import ConfigError
from clawgym_env.tree import PackedTree, build_forest, pack_trees
from trainers.tree_sft.config import TreeSFTConfig
from trainers.tree_sft.expert import load_episodes
from trainers.tree_sft.forward import TrunkCache, tree_logprobs
from trainers.tree_sft.frozen import FrozenBottomForward, freeze_bottom

__all__ = ["TreeSFTTrainer", "pack_nll"]


def _as_target(call: CallRecord) -> CallRecord:
    """The expert's completion ids are the policy slot's tokens (spliced into later prompts as they are):
    SFT targets, though a scripted backend tokenized them rather than sampled them."""
    if call.token_source == "tokenized" and call.completion_ids:
        return call.model_copy(update={"token_source": "sampled", "logprobs": [0.0] * len(call.completion_ids)})
    return call


def pack_nll(pack: PackedTree, logprobs: torch.Tensor) -> tuple[torch.Tensor, int]:
    """``(summed NLL, token count)`` of a pack, each loss token weighted by the calls that sampled it.

    Identical completions of several episodes (same prompt, same command: a template whose instruction
    never varies) are one path of the tree. Counted once, such a path weighs 1/k of what per-episode SFT
    gives it, and the templates that vary in their parameters drown it out.
    """
    weights = torch.bincount(pack.sampler_token, minlength=len(pack)).to(logprobs.device, logprobs.dtype)
    mask = pack.loss_mask.to(logprobs.device)
    return -(logprobs[mask] * weights[mask]).sum(), int(pack.sampler_token.numel())


class TreeSFTTrainer:
    """``TreeSFTTrainer(config, model_path).train()``, then ``save(path)``."""

    def __init__(self, config: TreeSFTConfig, model_path: str | Path) -> None:
        from transformers import AutoTokenizer, get_scheduler

        from clawgym_env.models.adapter import adapter_base, is_adapter
        from trainers.core.lora import load_base, tokenizer_folder, with_adapter

        self.config = config
        self.device = "cuda" if torch.cuda.is_available() and not config.use_cpu else "cpu"
        random.seed(config.seed)
        torch.manual_seed(config.seed)
        self.rng = random.Random(config.seed)
        self.tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder(model_path))
        dtype = torch.bfloat16 if config.bf16 else torch.float32
        self.base_path = adapter_base(model_path) if is_adapter(model_path) else Path(model_path)
        """The full model under the adapter (``use_peft``), or the model trained."""
        model = load_base(model_path, dtype=dtype, attn_implementation="sdpa").to(self.device)
        above = list(range(config.frozen_layers, len(model.get_decoder().layers)))  # a fresh adapter: trainable layers only
        self.model = with_adapter(model, model_path, config, above)  # an adapter folder keeps training (trainers.core.lora)
        self.model.train()
        freeze_bottom(self.model, config.frozen_layers)
        episodes = load_episodes(config.dataset_path)
        keep = set(config.harness_names)
        self.episodes = [e for e in episodes if not keep or e[1] in keep]
        if not self.episodes:
            raise ConfigError(f"{config.dataset_path}: no episode of harnesses {sorted(keep)}; check --harness")
        # frozen bottom layers: fixed packs (their bottom outputs are computed once), reordered each epoch
        self.frozen = FrozenBottomForward(self.model, config.frozen_layers) if config.frozen_layers and config.detach_prefix else None
        self.fixed = list(enumerate(self._packs())) if self.frozen else None
        self.packs_per_epoch = len(self.fixed) if self.fixed is not None else len(self._packs())
        steps = self.total_steps
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            trainable,
            lr=config.learning_rate,
            betas=(config.adam_beta1, config.adam_beta2),
            eps=config.adam_epsilon,
            weight_decay=config.weight_decay,
        )
        self.scheduler = get_scheduler(
            config.lr_scheduler_type, self.optimizer, num_warmup_steps=config.get_warmup_steps(steps), num_training_steps=steps
        )
        self.step = 0
        self.history: list[dict[str, float]] = []

    @property
    def total_steps(self) -> int:
        """``max_steps`` if set, else ``num_train_epochs`` passes over the packs."""
        c = self.config
        if c.max_steps and c.max_steps > 0:
            return int(c.max_steps)
        return max(1, math.ceil(c.num_train_epochs * self.packs_per_epoch / c.packs_per_step))

    def _packs(self) -> list[tuple[str, PackedTree]]:
        """One forest per harness over the episodes in a fresh random order, cut into packs of ``max_length``."""
        by_harness: dict[str, list[list[Any]]] = defaultdict(list)
        order = list(self.episodes)
        self.rng.shuffle(order)
        for _, harness, calls in order:
            by_harness[harness].append([_as_target(c) for c in calls])
        out: list[tuple[str, PackedTree]] = []
        for harness, eps in sorted(by_harness.items()):
            # trunk + branch_tokens: a long shared system prompt gets a big pack, a short one small packs (mask rows x N)
            budget = min(int(self.config.max_length or 0), max(len(e[0].prompt_ids or []) for e in eps) + self.config.branch_tokens)
            out.extend((harness, p) for p in pack_trees(build_forest(eps), budget) if p.num_loss_tokens)
        self.rng.shuffle(out)
        return out

    def _epoch(self) -> list[tuple[str, PackedTree, int]]:
        """The next epoch's packs (harness, pack, key of the pack's kept bottom outputs or -1)."""
        if self.fixed is None:
            return [(h, p, -1) for h, p in self._packs()]
        order = list(self.fixed)
        self.rng.shuffle(order)
        return [(h, p, key) for key, (h, p) in order]

    def _pack_loss(self, pack: PackedTree, key: int, trunk: TrunkCache) -> tuple[torch.Tensor, int]:
        if self.frozen is not None:
            lp = self.frozen.logprobs(key, pack, trunk)
        else:
            lp = tree_logprobs(self.model, pack, device=self.device, detach_prefix=self.config.detach_prefix, trunk=trunk)
        return pack_nll(pack, lp)

    def train(self, on_step: Callable[[dict[str, float]], None] | None = None) -> list[dict[str, float]]:
        """Run ``total_steps`` optimizer steps, ``packs_per_step`` packs each; log every ``logging_steps``."""
        c = self.config
        queue: list[tuple[str, PackedTree, int]] = []
        while self.step < self.total_steps:
            t0 = time.perf_counter()
            batch: list[tuple[str, PackedTree, int]] = []
            while len(batch) < c.packs_per_step:
                if not queue:
                    queue = self._epoch()
                batch.append(queue.pop())
            self.optimizer.zero_grad(set_to_none=True)
            tokens = sum(int(p.sampler_token.numel()) for _, p, _ in batch)  # per call, as pack_nll counts
            total = 0.0
            per_h: defaultdict[str, list[float]] = defaultdict(lambda: [0.0, 0])
            trunk = TrunkCache()  # the step's packs of one harness share its trunk's forward
            batch.sort(key=lambda hp: hp[0])
            for harness, pack, key in batch:
                nll, n = self._pack_loss(pack, key, trunk)
                (nll / tokens).backward()
                total += float(nll.detach())
                per_h[harness][0] += float(nll.detach())
                per_h[harness][1] += n
            grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), c.max_grad_norm)
            self.optimizer.step()
            self.scheduler.step()
            self.step += 1
            m = {
                "step": float(self.step),
                "loss": total / tokens,
                "grad_norm": float(grad_norm),
                "tokens": float(tokens),
                "pack_tokens": float(sum(len(p) for _, p, _ in batch)),
                "learning_rate": self.scheduler.get_last_lr()[0],
                "trunk_forwards": float(trunk.forwards),
                "step_s": time.perf_counter() - t0,
            }
            m.update({f"loss/{h}": v[0] / max(1, v[1]) for h, v in per_h.items()})
            self.history.append(m)
            if self.step % max(1, int(c.logging_steps or 1)) == 0:
                print(
                    f"sft step {self.step:4d}/{self.total_steps}  loss {m['loss']:.4f}  grad {m['grad_norm']:.2f}  "
                    f"tokens {int(tokens)}/{int(m['pack_tokens'])}  packs {len(batch)} (trunk x{trunk.forwards})  "
                    f"{m['step_s']:.1f}s",
                    flush=True,
                )
            if on_step is not None:
                on_step(m)
        return self.history

    def save(self, path: str | Path | None = None) -> Path:
        """Model + tokenizer, or with ``use_peft`` the adapter alone (folders ``hf:`` backends and ``bench run`` load),
        and the log history."""
        out = Path(path) if path is not None else Path(self.config.output_dir) / "final"  # type: ignore[arg-type]  # TrainingArguments always sets output_dir
        out.mkdir(parents=True, exist_ok=True)
        if self.config.use_peft:
            from trainers.core.lora import save_adapter

            save_adapter(self.model, out, self.base_path)
        else:
            self.model.save_pretrained(out)
            self.tokenizer.save_pretrained(out)
        (out / "sft_state.json").write_text(json.dumps({"step": self.step, "log_history": self.history}, indent=1))
        return out
