"""The loop both tree trainers share: sample through harnesses, one packed forward per tree,
clipped loss on sampled tokens, AdamW step, weight sync, logging, checkpoints.

What is TRL: the config (``GRPOConfig`` fields and their meaning), the script parser, and the
loss definitions re-stated in ``trainers/core/losses.py``. What is ours: everything in this file.
TRL's ``GRPOTrainer`` pads one row per completion; an agent episode is a tree of calls sharing
prefixes, so here each group's prefix tree is packed into one sequence with a 4D tree mask and
forwarded once (``clawgym_env.tree.PackedTree``), and every (token, rollout) pair gets its loss.
Subclasses supply the advantage of each pair (``TreeGRPOTrainer``: group baseline;
``TreePPOTrainer``: ``R - V(s_t)``).
"""

from __future__ import annotations

import json
import random
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from clawgym_env.errors import ConfigError
from clawgym_env.tree import TREE_ATTENTION, PackedTree, pack_trees, register_tree_attention
from trainers.core.logprobs import pack_logprobs
from trainers.core.losses import (
    clipped_policy_loss,
    mismatch,
    pair_weights,
    truncated_is_weights,
)
from trainers.core.rollout_side import TrainingRollouts
from trainers.core.weight_sync import PolicyWeights
from trainers.rollout import Group, RolloutBatch
from trainers.tree_grpo.config import TreeGRPOConfig

__all__ = ["PackSlot", "TreeTrainerBase", "mask_kind_for"]

_MASKS = {"eager": "additive", "sdpa": "bool", "flex_attention": "block", TREE_ATTENTION: "tree"}


def mask_kind_for(model: Any) -> str:
    """The tree-mask form the model's attention implementation takes."""
    impl = getattr(model.config, "_attn_implementation", None) or "eager"
    if impl not in _MASKS:
        raise ConfigError(f"attn_implementation={impl!r} cannot take a tree mask; load the model with one of {list(_MASKS)}")
    return _MASKS[impl]


@dataclass
class PackSlot:
    """One pack of a step and its pairs mapped onto the batch's global rollout numbering."""

    pack: PackedTree
    group: Group
    pair_token: torch.Tensor  # [P] token index in the pack
    pair_rollout: torch.Tensor  # [P] global rollout index
    old_logp: torch.Tensor | None = None  # [P] logprob at the first iteration (TRL's old_per_token_logps)
    advantages: torch.Tensor | None = None  # [P]
    extra: dict[str, torch.Tensor] = field(default_factory=dict)


class TreeTrainerBase:
    """Shared machinery; ``pair_advantages`` (and optionally ``before_policy``) is what a subclass adds."""

    def __init__(
        self,
        config: TreeGRPOConfig,
        model_path: str | Path,
        *,
        backend: Any | None = None,
        tasks: list[Any] | None = None,
        harness_adapters: dict[str, Any] | None = None,
        resume_from_checkpoint: str | Path | None = None,
    ) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from clawgym_env.harness_registry import load_harness_class

        for name in config.harness_names:  # a typo fails here, not as one traceback per rollout task
            if name not in (harness_adapters or {}):
                load_harness_class(name)
        self.config = config
        self.model_path = Path(model_path)
        self.device = "cuda" if torch.cuda.is_available() and not config.use_cpu else "cpu"
        dtype = torch.bfloat16 if config.bf16 else torch.float32
        random.seed(config.seed)
        torch.manual_seed(config.seed)
        self.rng = random.Random(config.seed)
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_path)
        init_kwargs = config.model_init_kwargs if isinstance(config.model_init_kwargs, dict) else {}
        attn = init_kwargs.get("attn_implementation", register_tree_attention())  # GRPOConfig.model_init_kwargs
        load = {"dtype": dtype, "attn_implementation": attn}
        self.model = AutoModelForCausalLM.from_pretrained(self.model_path, **load).to(self.device)
        self.model.train()
        if getattr(config, "activation_checkpointing", None) or config.gradient_checkpointing:
            self.model.gradient_checkpointing_enable()
        self.ref_model = None
        if config.beta != 0.0:
            self.ref_model = AutoModelForCausalLM.from_pretrained(self.model_path, **load).to(self.device).eval()
            self.ref_model.requires_grad_(False)
        self.mask_kind = mask_kind_for(self.model)
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=config.learning_rate, betas=(config.adam_beta1, config.adam_beta2),
            eps=config.adam_epsilon, weight_decay=config.weight_decay,
        )
        self.scheduler = self._scheduler(self.optimizer)
        self.harness_adapters = dict(harness_adapters or {})
        """Harness name -> adapter instance, for harnesses not in the registry (or built with options)."""
        self.rollouts = TrainingRollouts(config, self.model_path, device=self.device, backend=backend, tasks=tasks,
                                         harness_adapters=self.harness_adapters, rng=self.rng)
        self.step = 0
        self.policy_version = 0
        self.history: list[dict[str, float]] = []
        self._writer: Any = None
        self.setup_models()
        if resume_from_checkpoint is not None:
            self.load_checkpoint(resume_from_checkpoint)

    # -- pieces a subclass overrides ------------------------------------------------------------

    def pair_advantages(self, slots: list[PackSlot], batch: RolloutBatch, rollouts: list[tuple[int, str]]) -> dict[str, float]:
        """Fill ``slot.advantages`` for every slot; return metrics."""
        raise NotImplementedError

    def setup_models(self) -> None:
        """Build models beyond the policy (PPO: the value model) before a checkpoint is loaded."""

    def policy_enabled(self) -> bool:
        """Whether this step updates the policy (PPO's value warm-up says no)."""
        return True

    # -- resources ------------------------------------------------------------------------------

    @property
    def backend(self) -> Any:
        """The policy backend of the local executor (created on first use)."""
        return self.rollouts.backend

    @property
    def tasks(self) -> list[Any]:
        """The tasks to sample from: ``config.suite`` narrowed to ``config.tasks``."""
        return self.rollouts.tasks

    def _scheduler(self, optimizer: torch.optim.Optimizer) -> Any:
        from transformers import get_scheduler

        steps = max(1, self.config.max_steps) * max(1, self.config.num_iterations)  # optimizer steps, as TRL counts them
        warmup = self.config.get_warmup_steps(steps) if hasattr(self.config, "get_warmup_steps") else 0
        return get_scheduler(self.config.lr_scheduler_type, optimizer, num_warmup_steps=warmup, num_training_steps=steps)

    def policy_weights(self) -> PolicyWeights:
        """The policy as the weight sync reads it (plain Hugging Face names)."""

        def save(folder: Path) -> None:
            self.model.save_pretrained(folder)
            self.tokenizer.save_pretrained(folder)

        return PolicyWeights(state_dict=self.model.state_dict, save_pretrained=save)

    def sync_weights(self) -> None:
        """Give the rollout side the policy's weights (``trainers.core.weight_sync``); later captures carry the version."""
        self.rollouts.push(self.policy_weights(), self.policy_version)

    # -- one step -------------------------------------------------------------------------------

    def rollout(self) -> RolloutBatch:
        """``pairs_per_step`` groups of ``num_generations`` episodes through the harnesses, no staler than ``max_staleness``."""
        return self.rollouts.next_batch(self.policy_version, self.policy_weights())

    def slots(self, batch: RolloutBatch) -> tuple[list[PackSlot], list[tuple[int, str]]]:
        """Pack every trained group's tree; number rollouts globally as (group index, session id)."""
        rollouts: list[tuple[int, str]] = []
        index: dict[tuple[int, str], int] = {}
        out: list[PackSlot] = []
        for gi, group in enumerate(batch.groups):
            if group.tree is None:
                continue
            for ep in group.tree.episodes:
                index[(gi, ep)] = len(rollouts)
                rollouts.append((gi, ep))
            for pack in pack_trees(group.tree, self.config.pack_max_tokens):
                local = torch.tensor([index[(gi, r)] for r in pack.rollout_ids], dtype=torch.long)
                out.append(PackSlot(pack, group, pack.sampler_token.clone(), local[pack.sampler_rollout]))
        return out, rollouts

    def forward_logprobs(self, model: Any, pack: PackedTree) -> torch.Tensor:
        """Logprob of the pack's loss tokens under ``model`` ([N], 0 elsewhere): one forward with the tree mask."""
        return pack_logprobs(model, pack, mask_kind=self.mask_kind, device=self.device, dtype=next(model.parameters()).dtype,
                             chunk_size=self.config.logprob_chunk_size)

    def train_step(self, batch: RolloutBatch) -> dict[str, float]:
        """Update on one batch (no sampling): advantages, ``num_iterations`` AdamW steps, weight sync."""
        t0 = time.perf_counter()
        metrics: dict[str, float] = dict(batch.metrics)
        slots, rollouts = self.slots(batch)
        if not any(len(s.pair_token) for s in slots):  # nothing sampled by the policy (e.g. a scripted, re-tokenized policy)
            metrics.update({"loss": 0.0, "skipped_step": 1.0, "trainable_tokens": 0.0, "policy_version": float(self.policy_version)})
            return metrics
        metrics.update(self.pair_advantages(slots, batch, rollouts))
        if self.policy_enabled():
            metrics.update(self._policy_update(slots, rollouts))
            self.policy_version += 1
            self.sync_weights()
        else:
            metrics.update(self._measure_mismatch(slots))
        metrics["policy_version"] = float(self.policy_version)
        metrics["train_s"] = time.perf_counter() - t0
        return metrics

    def _measure_mismatch(self, slots: list[PackSlot]) -> dict[str, float]:
        with torch.no_grad():
            return self._mismatch_metrics([(s, self.forward_logprobs(self.model, s.pack)) for s in slots])

    def _mismatch_metrics(self, pairs: list[tuple[PackSlot, torch.Tensor]]) -> dict[str, float]:
        total: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for slot, lp in pairs:
            m = slot.pack.loss_mask.to(lp.device)
            n = float(m.sum())
            if not n:
                continue
            d = mismatch(lp[m].cpu(), slot.pack.rollout_logprobs[m.cpu()]) * n
            for key in ("mismatch", f"mismatch/{slot.group.harness}"):
                total[key][0] += d
                total[key][1] += n
        out = {k: v[0] / v[1] for k, v in total.items()}
        out["trainable_tokens"] = total["mismatch"][1]
        for key, (_, n) in total.items():
            if "/" in key:
                out["trainable_tokens/" + key.split("/", 1)[1]] = n
        return out

    def _policy_update(self, slots: list[PackSlot], rollouts: list[tuple[int, str]]) -> dict[str, float]:
        c = self.config
        counts = torch.zeros(len(rollouts), dtype=torch.long)
        for s in slots:
            counts.index_add_(0, s.pair_rollout, torch.ones_like(s.pair_rollout))
        num_rollouts = int((counts > 0).sum())
        agg: dict[str, float] = defaultdict(float)
        mism: dict[str, float] = {}
        for it in range(c.num_iterations):
            self.optimizer.zero_grad(set_to_none=True)
            first: list[tuple[PackSlot, torch.Tensor]] = []
            for s in slots:
                lp = self.forward_logprobs(self.model, s.pack)
                if it == 0:
                    first.append((s, lp.detach()))
                logp = lp[s.pair_token.to(lp.device)]
                if s.old_logp is None:
                    s.old_logp = logp.detach()
                old = s.old_logp
                rollout_lp = s.pack.rollout_logprobs[s.pair_token].to(lp.device)
                w = truncated_is_weights(old, rollout_lp, c.is_cap)
                ref = None
                if self.ref_model is not None:
                    with torch.no_grad():
                        ref = self.forward_logprobs(self.ref_model, s.pack)[s.pair_token.to(lp.device)]
                assert s.advantages is not None
                loss_pairs, diag = clipped_policy_loss(
                    logp, old, s.advantages.to(lp.device), epsilon_low=c.epsilon, epsilon_high=c.epsilon_high,
                    delta=c.delta, is_weights=w, beta=c.beta, ref_logp=ref, bias_correction_kl=c.use_bias_correction_kl,
                )
                weights = pair_weights(c.loss_type, s.pair_rollout, tokens_per_rollout=counts, num_rollouts=num_rollouts,
                                       max_completion_length=int(c.max_completion_length or 1)).to(lp.device)
                loss = (loss_pairs * weights).sum()
                loss.backward()
                if it == 0:
                    agg["loss"] += float(loss.detach())
                    agg["is_weight_sum"] += float(w.sum())
                    agg["clip_sum"] += float(diag["clipped"].sum())
                    agg["kl_sum"] += float(diag["kl"].sum())
                    agg["pairs"] += float(len(logp))
            if it == 0:
                mism = self._mismatch_metrics(first)
            params = [p for p in self.model.parameters() if p.grad is not None]
            grad_norm = torch.nn.utils.clip_grad_norm_(params, c.max_grad_norm)
            self.optimizer.step()
            self.scheduler.step()
            if it == 0:
                agg["grad_norm"] = float(grad_norm)
        pairs = max(1.0, agg.pop("pairs"))
        out = {"loss": agg["loss"], "grad_norm": agg["grad_norm"], "is_weight/mean": agg["is_weight_sum"] / pairs,
               "clip_ratio": agg["clip_sum"] / pairs, "kl": agg["kl_sum"] / pairs, "learning_rate": self.scheduler.get_last_lr()[0],
               "rollouts_trained": float(num_rollouts)}
        out.update(mism)
        return out

    # -- loop, logging, checkpoints ---------------------------------------------------------------

    def train(self, steps: int | None = None, on_step: Callable[[dict[str, float]], None] | None = None) -> list[dict[str, float]]:
        """Run until ``max_steps`` (or ``steps`` more); log every step, checkpoint every ``save_steps``."""
        target = self.step + steps if steps is not None else self.config.max_steps
        if target <= self.step:
            raise ConfigError(f"nothing to train: step {self.step} >= max_steps {target}; set --max_steps higher")
        while self.step < target:
            t0 = time.perf_counter()
            batch = self.rollout()
            t_roll = time.perf_counter() - t0
            metrics = self.train_step(batch)
            self.step += 1
            metrics["rollout_s"] = t_roll
            metrics["step"] = float(self.step)
            self.history.append(metrics)
            self.log(metrics)
            if on_step is not None:
                on_step(metrics)
            every = self.config.eval_every_steps
            if every and self.step % every == 0:
                evaluation = self.evaluate()
                metrics.update(evaluation)
                print(f"eval @ step {self.step}: " + "  ".join(f"{k}={v:.3f}" for k, v in sorted(evaluation.items())), flush=True)
                self.report(evaluation)
            if self.config.save_steps and self.step % int(self.config.save_steps) == 0:
                self.save_checkpoint()
        self.close_logging()
        return self.history

    def evaluate(self) -> dict[str, float]:
        """Run ``eval_episodes`` episodes of every held-out (task, harness) pair with the current policy.

        Same path as a benchmark run (``run_episode``: sandbox, unmodified harness, proxy, hidden
        verifier), without writing a results folder. Returns ``eval/reward``, ``eval/pass_rate`` and
        the same per harness.
        """
        from clawgym_env.task import load_suite

        c = self.config
        suite = load_suite(str(c.eval_suite))
        scores = self.rollouts.evaluate(c.eval_episodes)
        out: dict[str, float] = {}
        every = [s for v in scores.values() for s in v]
        for key, vals in [("", every), *((f"/{h}", v) for h, v in scores.items())]:
            out[f"eval/reward{key}"] = sum(vals) / max(1, len(vals))
            out[f"eval/pass_rate{key}"] = sum(suite.passed(v) for v in vals) / max(1, len(vals))
        out["eval/episodes"] = float(len(every))
        return out

    def log(self, metrics: dict[str, float]) -> None:
        """One console line per step (every ``logging_steps``), and TensorBoard / W&B when asked."""
        every = max(1, int(self.config.logging_steps or 1))
        if self.step % every == 0:
            per_h = " ".join(f"{k.split('/', 1)[1]}={v:.3f}" for k, v in sorted(metrics.items()) if k.startswith("reward/"))
            print(
                f"step {self.step:4d}  reward {metrics.get('reward', 0.0):.3f} [{per_h}]  loss {metrics.get('loss', 0.0):+.4f}  "
                f"mismatch {metrics.get('mismatch', float('nan')):.2e}  grad {metrics.get('grad_norm', 0.0):.3f}  "
                f"tokens {int(metrics.get('trainable_tokens', 0))}  rollout {metrics.get('rollout_s', 0.0):.1f}s  "
                f"train {metrics.get('train_s', 0.0):.1f}s",
                flush=True,
            )
        self.report(metrics)

    def report(self, metrics: dict[str, float]) -> None:
        """Send metrics to TensorBoard (``<output_dir>/runs``) and W&B, as ``report_to`` asks."""
        report = self.config.report_to or []
        if "tensorboard" in report:
            if self._writer is None:
                from torch.utils.tensorboard import SummaryWriter

                self._writer = SummaryWriter(str(Path(self.config.output_dir) / "runs"))
            for k, v in metrics.items():
                self._writer.add_scalar(k, v, self.step)
        if "wandb" in report:
            import wandb  # type: ignore[import-not-found]  # only when asked for; not a dependency

            wandb.log(metrics, step=self.step)

    def close_logging(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def close(self) -> None:
        """Close the logger and the rollout side: stream, executor, backend (idempotent)."""
        self.close_logging()
        self.rollouts.close()

    def extra_state(self) -> dict[str, Any]:
        """More state a subclass checkpoints (tensors and state dicts)."""
        return {}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        """Restore what ``extra_state`` saved."""

    def save_checkpoint(self, path: str | Path | None = None) -> Path:
        """``<output_dir>/checkpoint-<step>``: model + tokenizer, optimizer, scheduler, RNG, step, version, history."""
        ckpt = Path(path) if path is not None else Path(self.config.output_dir) / f"checkpoint-{self.step}"
        ckpt.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(ckpt / "model")
        self.tokenizer.save_pretrained(ckpt / "model")
        torch.save(
            {
                "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(),
                "rng": {"sampler": self.rng.getstate(), "python": random.getstate(), "torch": torch.get_rng_state()},
                "extra": self.extra_state(),
            },
            ckpt / "trainer.pt",
        )
        (ckpt / "trainer_state.json").write_text(
            json.dumps({"step": self.step, "policy_version": self.policy_version, "log_history": self.history}, indent=1)
        )
        return ckpt

    def load_checkpoint(self, path: str | Path) -> None:
        """Continue the run saved at ``path``: weights, optimizer, scheduler, RNG, step, version."""
        from transformers import AutoModelForCausalLM

        ckpt = Path(path)
        if not (ckpt / "trainer_state.json").is_file():
            raise ConfigError(f"{ckpt}: not a tree-trainer checkpoint (no trainer_state.json); pass a checkpoint-<step> folder")
        saved = AutoModelForCausalLM.from_pretrained(ckpt / "model", dtype=next(self.model.parameters()).dtype)
        self.model.load_state_dict(saved.state_dict())
        state = torch.load(ckpt / "trainer.pt", weights_only=False)  # our own file
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.rng.setstate(state["rng"]["sampler"])
        random.setstate(state["rng"]["python"])
        torch.set_rng_state(state["rng"]["torch"])
        self.load_extra_state(state.get("extra", {}))
        meta = json.loads((ckpt / "trainer_state.json").read_text())
        self.step, self.policy_version, self.history = int(meta["step"]), int(meta["policy_version"]), list(meta["log_history"])
        self.sync_weights()
