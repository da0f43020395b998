"""The loop both tree trainers share: sample through harnesses, one packed forward per tree,
clipped loss on sampled tokens, AdamW step, weight sync, logging, checkpoints.

What is TRL: the config (``GRPOConfig`` fields and their meaning), the script parser, and the
loss definitions re-stated in ``trainers/core/losses.py``. What is ours: this loop, with the packing of a
step (``trainers/core/slots.py``) and its policy update (``trainers/core/policy_step.py``).
TRL's ``GRPOTrainer`` pads one row per completion; an agent episode is a tree of calls sharing
prefixes, so here each group's prefix tree is packed into one sequence with a 4D tree mask and
forwarded once (``clawgym_env.tree.PackedTree``), and every (token, rollout) pair gets its loss.
Subclasses supply the advantage of each pair (``TreeGRPOTrainer``: group baseline;
``TreePPOTrainer``: ``R - V(s_t)``).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from clawgym_env.errors import ConfigError
from clawgym_env.tree import TREE_ATTENTION, TREE_FLEX, PackedTree, register_tree_attention, register_tree_flex
from trainers.core.cpus import on_cpus
from trainers.core.distributed import (
    broadcast,
    leave_process_group,
    make_accelerator,
    seed_everything,
    trackers,
)
from trainers.core.logprobs import pack_logprobs
from trainers.core.policy_step import policy_update
from trainers.core.rollout_side import TrainingRollouts
from trainers.core.routing import RoutingReplay, router_aux_coef, unreplayed_metrics
from trainers.core.slots import PackSlot, build_slots, mismatch_metrics, rank_share
from trainers.core.weight_sync import PolicyWeights
from trainers.rollout import RolloutBatch
from trainers.tree_grpo.config import TreeGRPOConfig

__all__ = ["PackSlot", "TreeTrainerBase", "mask_kind_for"]

_MASKS = {"eager": "additive", "sdpa": "bool", "flex_attention": "block", TREE_ATTENTION: "tree", TREE_FLEX: "block"}


def mask_kind_for(model: Any) -> str:
    """The tree-mask form the model's attention implementation takes."""
    impl = getattr(model.config, "_attn_implementation", None) or "eager"
    if impl not in _MASKS:
        raise ConfigError(f"attn_implementation={impl!r} cannot take a tree mask; load the model with one of {list(_MASKS)}")
    return _MASKS[impl]


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
        from transformers import AutoTokenizer

        from clawgym_env.harness_registry import load_harness_class
        from trainers.core.lora import load_base, load_reference, tokenizer_folder, with_adapter

        for name in config.harness_names:  # a typo fails here, not as one traceback per rollout task
            if name not in (harness_adapters or {}):
                load_harness_class(name)
        self.config = config
        self.model_path = Path(model_path)
        self.accelerator = make_accelerator(config)
        self.device = self.accelerator.device
        seed_everything(config.seed)
        self.rng = random.Random(config.seed)
        """The sampler's RNG (pairs to sample); only the main process samples."""
        self.tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder(self.model_path))
        init_kwargs = config.model_init_kwargs if isinstance(config.model_init_kwargs, dict) else {}
        register_tree_flex()  # attn_implementation="tree_flex": FlexAttention over the pack's BlockMask
        attn = init_kwargs.get("attn_implementation", register_tree_attention())  # GRPOConfig.model_init_kwargs
        load = {"dtype": torch.float32, "attn_implementation": attn}  # fp32 master weights; bf16/fp16 is autocast
        model = load_base(self.model_path, **load).to(self.device)  # an adapter folder: its base (trainers.core.lora)
        if config.activation_checkpointing or config.gradient_checkpointing:
            kw = config.activation_checkpointing_kwargs or config.gradient_checkpointing_kwargs
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kw or None)
        if config.disable_dropout:
            for m in model.modules():
                if isinstance(m, torch.nn.Dropout):
                    m.p = 0.0
        model = with_adapter(model, self.model_path, config)
        model.train()
        self.sharded = bool(config.fsdp)
        """--fsdp: the policy's parameters are sharded over the processes (``trainers.core.fsdp``)."""
        if self.sharded:
            from trainers.core.fsdp import shard_policy

            model = shard_policy(model, bf16=bool(config.bf16))
        self.ref_model = None
        if config.beta != 0.0:
            self.ref_model = load_reference(self.model_path, **load).to(self.device).eval()
            self.ref_model.requires_grad_(False)
        self.mask_kind = mask_kind_for(model)
        optimizer = torch.optim.AdamW(
            [p for p in model.parameters() if p.requires_grad],
            lr=config.learning_rate,
            betas=(config.adam_beta1, config.adam_beta2),
            eps=config.adam_epsilon,
            weight_decay=config.weight_decay,
        )
        self.scheduler = self._scheduler(optimizer)
        # a sharded policy is not prepare-d: accelerate would wrap it in DDP on CPU (trainers.core.fsdp)
        self.optimizer: torch.optim.Optimizer
        self.model, self.optimizer = (model, optimizer) if self.sharded else self.accelerator.prepare(model, optimizer)
        self.accelerator.register_for_checkpointing(self.scheduler)
        self.router_aux_coef = router_aux_coef(config.router_aux_loss_coef, model)
        """TRL's rule: the weight of a mixture-of-experts policy's load-balancing loss (0 for a dense policy)."""
        self.routing_replays = {
            id(m): r
            for m in (self.model, self.ref_model)
            if m is not None and (r := RoutingReplay.attach(self.accelerator.unwrap_model(m))) is not None
        }
        """id(model) -> routing replay hooks (``trainers.core.routing``) of a mixture-of-experts policy and its reference."""
        if self.routing_replays and config.branching:
            raise ConfigError(
                "--branching with a mixture-of-experts policy: the routing split of a group's tree "
                "(clawgym_env.tree.routing) would change the per-node values TreeRL credits; drop --branching"
            )
        self._gathered: PolicyWeights | None = None
        self.harness_adapters = dict(harness_adapters or {})
        """Harness name -> adapter instance, for harnesses not in the registry (or built with options)."""
        self.rollouts = TrainingRollouts(
            config,
            self.model_path,
            device=str(self.device),
            backend=backend,
            tasks=tasks,
            harness_adapters=self.harness_adapters,
            rng=self.rng,
        )
        self.step = 0
        self.policy_version = 0
        self.history: list[dict[str, float]] = []
        self._trackers_on = False
        self.setup_models()
        if resume_from_checkpoint is not None:
            self.load_checkpoint(resume_from_checkpoint)
        elif self.sharded:
            self.sync_weights()  # gathers what the first rollout reads (at version 0 nothing is pushed)

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

        c = self.config  # optimizer steps, as TRL counts them: one per pass over a step's micro-batches
        steps = c.max_steps * max(1, c.num_iterations)
        warmup = c.get_warmup_steps(steps)
        return get_scheduler(
            c.lr_scheduler_type,
            optimizer,
            num_warmup_steps=warmup,
            num_training_steps=steps,
            scheduler_specific_kwargs=c.lr_scheduler_kwargs or None,  # type: ignore[arg-type]  # a dict once TRL parsed it
        )

    @property
    def policy(self) -> Any:
        """The policy model itself (the DDP wrapper removed)."""
        return self.accelerator.unwrap_model(self.model)

    def policy_weights(self) -> PolicyWeights:
        """The policy as the weight sync reads it: plain Hugging Face names, a LoRA adapter merged in.

        A sharded policy: the weights gathered at the last ``sync_weights`` (gathering is collective)."""
        if self.sharded:
            if self._gathered is None:
                raise RuntimeError("a sharded policy's weights are read after sync_weights gathers them")
            return self._gathered
        if self.config.use_peft:
            from trainers.core.lora import merged_weights

            return merged_weights(self.policy, self.tokenizer)

        def save(folder: Path) -> None:
            self.policy.save_pretrained(folder)
            self.tokenizer.save_pretrained(folder)

        return PolicyWeights(state_dict=self.policy.state_dict, save_pretrained=save)

    def sync_weights(self) -> None:
        """Give the rollout side the policy's weights (``trainers.core.weight_sync``); later captures carry the version.

        Every process calls it: a sharded policy is first gathered (collectively); only the main process samples.
        """
        if self.sharded:
            from trainers.core.fsdp import gather_policy

            self._gathered = gather_policy(self.model, self.tokenizer, merge_lora=self.config.use_peft)
        if self.accelerator.is_main_process:
            self.rollouts.push(self.policy_weights(), self.policy_version)

    # -- one step -------------------------------------------------------------------------------

    def rollout(self) -> RolloutBatch:
        """``pairs_per_step`` groups of ``num_generations`` episodes through the harnesses, no staler than ``max_staleness``."""
        return self.rollouts.next_batch(self.policy_version, self.policy_weights())

    def slots(self, batch: RolloutBatch) -> tuple[list[PackSlot], list[tuple[int, str]]]:
        """The step's packs and pairs, rollouts numbered globally (``trainers.core.slots.build_slots``)."""
        return build_slots(batch, self.config.pack_max_tokens, self.config.branching)

    def forward_logprobs(self, model: Any, pack: PackedTree) -> torch.Tensor:
        """Logprob of the pack's loss tokens under ``model`` ([N], 0 elsewhere): one forward with the tree mask.

        A mixture-of-experts model routes each token to the experts the rollout did (``--routing_replay``)."""
        replay = self.routing_replays.get(id(model))
        if replay is not None:
            replay.load(pack.routing, replay=self.config.routing_replay)
        return self.pack_logprobs(model, pack)

    def pack_logprobs(self, model: Any, pack: PackedTree) -> torch.Tensor:
        """``forward_logprobs`` with the routing ``model``'s replay hooks hold now (a MoE policy) or none."""
        return pack_logprobs(
            model,
            pack,
            mask_kind=self.mask_kind,
            device=self.device,
            dtype=next(model.parameters()).dtype,
            chunk_size=self.config.logprob_chunk_size,
            inner=self.accelerator.unwrap_model(model),
            temperature=self.config.temperature,
        )

    def train_step(self, batch: RolloutBatch) -> dict[str, float]:
        """Update on one batch (no sampling): advantages, ``num_iterations`` AdamW steps, weight sync."""
        t0, c0 = time.perf_counter(), time.thread_time()
        metrics: dict[str, float] = dict(batch.metrics)
        slots, rollouts = self.slots(batch)
        if not any(len(s.pair_token) for s in slots):  # nothing sampled by the policy (e.g. a scripted, re-tokenized policy)
            metrics.update({"loss": 0.0, "skipped_step": 1.0, "trainable_tokens": 0.0, "policy_version": float(self.policy_version)})
            return metrics
        metrics.update(self.pair_advantages(slots, batch, rollouts))
        if self.policy_enabled():
            metrics.update(unreplayed_metrics(self, slots))
            metrics.update(policy_update(self, slots, rollouts))
            if metrics["optimizer_step"]:
                self.policy_version += 1
                t_sync = time.perf_counter()
                self.sync_weights()
                metrics["sync_s"] = time.perf_counter() - t_sync
        else:
            metrics.update(unreplayed_metrics(self, slots))
            metrics.update(self._measure_mismatch(*self.my_slots(slots)))
        metrics["policy_version"] = float(self.policy_version)
        metrics["train_s"] = time.perf_counter() - t0
        metrics["train_cpu_s"] = time.thread_time() - c0  # this thread's CPU: wall above it is waiting for a core or the GIL
        return metrics

    def _measure_mismatch(self, slots: list[PackSlot], own: int) -> dict[str, float]:
        with torch.no_grad():
            pairs = [(s, self.forward_logprobs(self.model, s.pack)) for s in slots]
        return mismatch_metrics(self.accelerator, pairs[:own])

    def my_slots(self, slots: list[PackSlot]) -> tuple[list[PackSlot], int]:
        """The packs this rank forwards, and how many are its own (``trainers.core.slots.rank_share``)."""
        return rank_share(self.accelerator, slots, equal_counts=self.sharded)

    # -- loop, logging, checkpoints ---------------------------------------------------------------

    def every(self, value: float | None) -> int:
        """A ``*_steps`` setting as a step count: TrainingArguments' fractions (< 1) are of ``max_steps``."""
        if not value:
            return 0
        return max(1, math.ceil(value * self.config.max_steps)) if value < 1 else int(value)

    def train(self, steps: int | None = None, on_step: Callable[[dict[str, float]], None] | None = None) -> list[dict[str, float]]:
        """Run until ``max_steps`` (or ``steps`` more); log every step, checkpoint every ``save_steps``.

        Only the main process samples; every process trains on the broadcast batch.
        """
        target = self.step + steps if steps is not None else self.config.max_steps
        if target <= self.step:
            raise ConfigError(f"nothing to train: step {self.step} >= max_steps {target}; set --max_steps higher")
        with on_cpus(self.config.cpu_sets()[0]):  # --trainer_cpus: this thread trains there (trainers/core/cpus.py)
            return self._train_until(target, on_step)

    def _train_until(self, target: int, on_step: Callable[[dict[str, float]], None] | None) -> list[dict[str, float]]:
        acc = self.accelerator
        save_every, eval_every = self.every(self.config.save_steps), self.every(self.config.eval_every_steps)
        while self.step < target:
            t0 = time.perf_counter()
            batch = broadcast(acc, self.rollout() if acc.is_main_process else None)
            t_roll = time.perf_counter() - t0
            metrics = self.train_step(batch)
            self.step += 1
            metrics["rollout_s"] = t_roll
            metrics["step"] = float(self.step)
            self.history.append(metrics)
            self.log(metrics)
            if on_step is not None:
                on_step(metrics)
            if eval_every and self.step % eval_every == 0 and acc.is_main_process:
                evaluation = self.evaluate()
                metrics.update(evaluation)
                print(f"eval @ step {self.step}: " + "  ".join(f"{k}={v:.3f}" for k, v in sorted(evaluation.items())), flush=True)
                self.report(evaluation)
            if save_every and self.step % save_every == 0:
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
        """One console line per step (every ``logging_steps``, main process), and the trackers ``report_to`` names."""
        every = self.every(self.config.logging_steps) or 1
        if self.step % every == 0 and self.accelerator.is_main_process:
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
        """Send metrics to accelerate's trackers (TensorBoard under ``<output_dir>/runs/clawgym``, W&B)."""
        if not trackers(self.config):
            return
        if not self._trackers_on:
            self.accelerator.init_trackers("clawgym", config={"model": str(self.model_path), "seed": self.config.seed})
            self._trackers_on = True
        self.accelerator.log(metrics, step=self.step)

    def close_logging(self) -> None:
        """Finish the trackers (not ``end_training``: that also destroys the process group, which ``close`` does)."""
        if self._trackers_on:
            for tracker in self.accelerator.trackers:
                tracker.finish()
            self._trackers_on = False

    def close(self) -> None:
        """Close the logger, the rollout side (stream, executor, backend) and the process group (idempotent).

        Every process calls it, as ``save_checkpoint``: the ranks meet (a bounded wait) before the
        process group is destroyed.
        """
        self.close_logging()
        self.rollouts.close()
        leave_process_group()

    def extra_state(self) -> dict[str, Any]:
        """More state a subclass checkpoints (tensors and state dicts)."""
        return {}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        """Restore what ``extra_state`` saved."""

    def save_checkpoint(self, path: str | Path | None = None) -> Path:
        """``<output_dir>/checkpoint-<step>`` (``trainers.core.checkpoint``); every process calls it."""
        from trainers.core.checkpoint import save_checkpoint

        out = self.config.output_dir
        return save_checkpoint(self, Path(path) if path is not None else Path(out) / f"checkpoint-{self.step}")  # type: ignore[arg-type]  # TrainingArguments always sets output_dir

    def load_checkpoint(self, path: str | Path) -> None:
        """Continue the run saved at ``path``: weights, optimizer, scheduler, RNG, step, version."""
        from trainers.core.checkpoint import load_checkpoint

        load_checkpoint(self, Path(path))
        self.sync_weights()
