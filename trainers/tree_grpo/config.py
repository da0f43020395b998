"""TreeGRPOConfig: TRL's GRPOConfig plus only what tree training through harnesses needs.

Every TRL field keeps its meaning where the tree trainer uses it (``trainers/tree_grpo/fields.py`` lists
them; ``tests/trainers/test_trl_conformance.py`` checks the loss against TRL's ``GRPOTrainer``):
``learning_rate``, ``max_grad_norm``, ``adam_*``, ``weight_decay``, ``num_generations`` (rollouts per
(task, harness) group), ``loss_type``, ``epsilon``/``epsilon_high``/``delta``, ``beta``,
``scale_rewards``, ``num_iterations``, ``gradient_accumulation_steps`` (micro-batches of a step),
``temperature`` (sampling and the trainer's logprobs)/``top_p``, ``max_completion_length`` (max new
tokens per model call, and Dr. GRPO's per-rollout constant), the ``vllm_importance_sampling_*``
correction (every rollout is served, so it applies to every backend), ``max_steps``,
``logging_steps``, ``save_steps``, ``output_dir``, ``seed``, ``report_to``. The generation/vLLM/
batch-size fields of GRPOConfig are not read: a step is ``pairs_per_step`` groups sampled through
real harnesses.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from trl import GRPOConfig

from clawgym_env.errors import ConfigError
from trainers.core.cpus import parse_cpus
from trainers.core.losses import IS_MODES, LOSS_TYPES
from trainers.rollout import CRASHED_POLICIES, TASK_SAMPLING
from trainers.tree_grpo.fields import refuse_unused

__all__ = ["TreeGRPOConfig"]


_TRL_FIELDS = frozenset(f.name for f in dataclasses.fields(GRPOConfig))


def _split(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    items = value if isinstance(value, list) else str(value).split(",")
    return [s.strip() for s in items if str(s).strip()]


@dataclass
class TreeGRPOConfig(GRPOConfig):
    """GRPO on prefix trees of real harness episodes; field help lives in ``metadata`` only."""

    # Parameters that control what is sampled
    suite: str = field(default="", metadata={"help": "Task suite: a folder path or a suite name under tasks/."})
    tasks: str | None = field(default=None, metadata={"help": "Comma-separated task ids of the suite to train on (default: all)."})
    harness: str = field(default="custom", metadata={"help": "Comma-separated harness names, e.g. 'custom,claude-code'."})
    mix_weights: str | None = field(default=None, metadata={"help": "Comma-separated sampling weights, one per harness (default: equal)."})
    pairs_per_step: int = field(default=2, metadata={"help": "(task, harness) groups sampled per training step."})
    task_sampling: str = field(
        default="uniform",
        metadata={
            "help": "'uniform': each group's task drawn uniformly; 'stratified': in rounds that cover "
            "every task category once (pairs_per_step = the category count: every step trains "
            "on every template)."
        },
    )
    rollout_backend: str | None = field(
        default=None,
        metadata={
            "help": "Policy backend spec for rollouts, e.g. 'vllm:http://gpu:8000#policy' (weights reloaded from a "
            "saved folder after each update); None: the in-process hf backend on the trainer's device."
        },
    )
    sandbox: str = field(default="bwrap", metadata={"help": "Sandbox backend the episodes run in (bwrap, docker)."})
    executor: str = field(
        default="local",
        metadata={
            "help": "Where episodes run, as for `clawgym bench run`: 'local' (this process) or 'ray' "
            "(one worker per node of the Ray cluster, each with its own sandboxes and proxy)."
        },
    )
    ray_address: str | None = field(default=None, metadata={"help": "Ray cluster to join with --executor ray (default: start one)."})
    weight_sync: str = field(
        default="auto",
        metadata={
            "help": "'auto': copy into an in-process backend, reload a vLLM server from a saved folder; "
            "'broadcast': send the tensors over a process group to the rollout processes (the "
            "--rollout_process child, or a vLLM server's GPU workers): NCCL on CUDA, gloo on CPU."
        },
    )
    async_rollouts: bool = field(
        default=False,
        metadata={"help": "Keep sampling the next max_staleness steps' groups with the newest weights while the trainer steps."},
    )
    rollout_process: bool = field(
        default=False,
        metadata={
            "help": "Run the hf rollout policy in a child process (local executor): its decoding then "
            "does not share the trainer's GIL (async rollouts on CPU)."
        },
    )
    trainer_cpus: str | None = field(
        default=None,
        metadata={
            "help": "CPU ids the training thread runs on while it trains, e.g. '0' (Linux; "
            "trainers/core/cpus.py); None: any. With --rollout_cpus: async rollouts on shared "
            "CPUs then never take the trainer's cores."
        },
    )
    rollout_cpus: str | None = field(
        default=None,
        metadata={
            "help": "CPU ids the rollout side runs on, e.g. '1-3': its event loop (executor, proxy), the "
            "--rollout_process child, harness and sandbox processes (local executor); None: any."
        },
    )
    max_concurrent_episodes: int = field(default=8, metadata={"help": "Episodes run at the same time during a rollout."})
    episode_wall_time_s: float | None = field(
        default=None, metadata={"help": "Wall-time limit per episode in seconds (default: the task's)."}
    )
    # Branching (trainers/branching.py): a group is a tree of rollouts, not num_generations chains
    branching: bool = field(
        default=False,
        metadata={
            "help": "Sample each group as num_generations root rollouts plus branches replayed from "
            "their calls (ReplayBackend) and sampled from call k on; advantages are TreeRL's per "
            "node (PPO: returns are subtree means), replayed tokens train once."
        },
    )
    branch_points: int = field(default=2, metadata={"help": "With --branching: calls per group to branch at (spread over the roots)."})
    branches_per_point: int = field(default=1, metadata={"help": "With --branching: continuations sampled at each branch point."})
    branch_strategy: str = field(
        default="uniform",
        metadata={
            "help": "With --branching: 'uniform' (any call after the first) or 'entropy' (the calls "
            "whose sampled tokens had the highest mean surprisal)."
        },
    )
    # Parameters that control which rollouts train
    max_leaves: int | None = field(default=None, metadata={"help": "Drop episodes whose prefix tree has more leaves."})
    drop_retries: bool = field(default=True, metadata={"help": "Drop retry subtrees and other dead leaves."})
    exclude_subagents: bool = field(default=False, metadata={"help": "Leave subagent and compaction branches out of the loss."})
    drop_zero_variance_from_loss: bool = field(
        default=False,
        metadata={
            "help": "Changes the loss: leave groups whose rewards are all equal out of the step, so "
            "their tokens leave every loss_type normaliser, their KL term and the 'batch' "
            "reward std. Default False keeps them with advantage 0, as TRL does (with beta=0 "
            "they are not forwarded: they add nothing but their token counts)."
        },
    )
    max_staleness: int = field(
        default=0,
        metadata={
            "help": "Drop a group sampled by weights more than this many versions behind the trainer "
            "(counted as groups_stale); the rest are corrected by the truncated IS weights."
        },
    )
    crashed_episodes: str = field(
        default="penalize",
        metadata={
            "help": "Episodes whose harness crashed (status 'crashed': non-zero exit, e.g. Claude Code "
            "exit 1, a harness the agent's command killed, a prompt past the context): "
            "'penalize' (default) trains them with reward crashed_reward, as bench run never "
            "passes a crash and a mask would let the agent dodge a failing grade by crashing; "
            "'mask' leaves them out of baseline and loss (counted as crashed_masked). A harness "
            "stopped at a sandbox limit (memory, pids, output flood) trains on its verdict."
        },
    )
    crashed_reward: float = field(default=0.0, metadata={"help": "Reward of a crashed episode under crashed_episodes='penalize'."})
    logprob_chunk_size: int = field(
        default=1024,
        metadata={
            "help": "Rows of the output head computed at a time for the loss tokens' logprobs (never the "
            "full [N, vocab] logits); 0: full logits for every token (the former path)."
        },
    )
    pack_max_tokens: int | None = field(
        default=None, metadata={"help": "Split a group's tree into packs of at most this many tokens (default: one pack)."}
    )
    routing_replay: bool = field(
        default=True,
        metadata={
            "help": "Mixture-of-experts policies: forward every token through the experts the rollout "
            "engine routed it to (R3, from the captured routing; gate weights from the trainer's "
            "router). No effect on dense models."
        },
    )
    log_unreplayed_mismatch: bool = field(
        default=True,
        metadata={
            "help": "Mixture-of-experts policies: also log the trainer/sampler gap and top-k disagreement "
            "without replay (one more forward per pack, without gradient)."
        },
    )
    # LoRA, with TRL's ModelConfig names
    use_peft: bool = field(default=False, metadata={"help": "Train a LoRA adapter (peft) instead of every weight."})
    lora_r: int = field(default=16, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA alpha (scaling alpha / r, or alpha / sqrt(r) with use_rslora)."})
    lora_dropout: float = field(
        default=0.0, metadata={"help": "LoRA dropout (TRL's default is 0.05; 0 keeps the trainer's logprobs equal to the sampler's)."}
    )
    lora_target_modules: list[str] | None = field(
        default=None, metadata={"help": "Module names to adapt (default: all linear layers but the output head)."}
    )
    use_rslora: bool = field(default=False, metadata={"help": "Rank-stabilised LoRA scaling."})
    # Parameters that control evaluation
    eval_suite: str | None = field(
        default=None, metadata={"help": "Held-out suite (folder or name) evaluated every eval_every_steps; None: no eval."}
    )
    eval_tasks: str | None = field(default=None, metadata={"help": "Comma-separated task ids of eval_suite (default: all)."})
    eval_every_steps: int = field(default=0, metadata={"help": "Evaluate every N steps (0: never)."})
    eval_episodes: int = field(default=1, metadata={"help": "Episodes per (eval task, harness) pair."})
    # TRL defaults changed for tree training on CPU-sized models and long agent episodes
    num_generations: int | None = field(default=4, metadata={"help": "Rollouts per (task, harness) group."})
    vllm_importance_sampling_mode: str = field(
        default="token_truncate",
        metadata={
            "help": "TRL's importance sampling of served rollouts against the captured "
            "logprobs: token_truncate (default here), token_mask, sequence_truncate "
            "or sequence_mask (TRL's default; a sequence is a whole episode)."
        },
    )
    vllm_importance_sampling_clip_max: float | None = field(
        default=2.0,
        metadata={"help": "Upper bound C_max of the importance ratio (truncate: clamp; mask: zero above); TRL's default is 3.0."},
    )
    gradient_checkpointing: bool | None = field(  # type: ignore[assignment]  # None: not given (old name)
        default=None, metadata={"help": "Old name of activation_checkpointing (off by default for tree packs)."}
    )
    logging_steps: float = field(default=1, metadata={"help": "Log every X steps."})
    report_to: None | str | list[str] = field(default="none", metadata={"help": "'tensorboard', 'wandb' or 'none'."})

    def __post_init__(self) -> None:
        if self.bf16 is None:  # None means: bf16 where a GPU runs it, fp32 on CPU
            import torch

            self.bf16 = bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
        self._check_tree_fields()
        refuse_unused(self, _TRL_FIELDS)
        # never read (a step is pairs_per_step groups), but GRPOConfig requires its generation batch (8 by default)
        # to be a multiple of num_generations: make it one group, so any group size passes
        self.per_device_train_batch_size = self.num_generations  # type: ignore[assignment]  # set: TRL defaults it to 8
        super().__post_init__()

    @property
    def harness_names(self) -> list[str]:
        """The harnesses to sample, in the order given."""
        return _split(self.harness)

    @property
    def harness_weights(self) -> list[float]:
        """One sampling weight per harness."""
        if not self.mix_weights:
            return [1.0] * len(self.harness_names)
        return [float(w) for w in _split(self.mix_weights)]

    @property
    def eval_task_ids(self) -> list[str]:
        """Eval task ids; empty means every task of ``eval_suite``."""
        return _split(self.eval_tasks)

    @property
    def task_ids(self) -> list[str]:
        """Task ids to train on; empty means every task of the suite."""
        return _split(self.tasks)

    def _check_branching(self) -> None:
        if self.branch_strategy not in ("uniform", "entropy"):
            raise ConfigError(f"branch_strategy={self.branch_strategy!r}: set 'uniform' or 'entropy'")
        if self.branch_points < 1 or self.branches_per_point < 1:
            raise ConfigError(f"branch_points={self.branch_points}, branches_per_point={self.branches_per_point}: set both >= 1")
        if not self.branching:
            given = (
                ("branch_points", self.branch_points, 2),
                ("branches_per_point", self.branches_per_point, 1),
                ("branch_strategy", self.branch_strategy, "uniform"),
            )
            changed = [f"{k}={v!r}" for k, v, default in given if v != default]
            if changed:
                raise ConfigError(f"{', '.join(changed)} only act with branching; set --branching true (or drop them)")
            return
        if self.async_rollouts:
            raise ConfigError("branching samples a group's branches after its roots finish, within the step; set --async_rollouts false")
        if self.executor != "local":
            raise ConfigError(
                "branching replays root captures written on the trainer's machine, which Ray workers on other "
                "nodes cannot read; set --executor local"
            )

    def _check_tree_fields(self) -> None:
        names = self.harness_names
        if not names:
            raise ConfigError("TreeGRPOConfig.harness is empty; set --harness custom (or a comma list)")
        try:
            weights = self.harness_weights
        except ValueError:
            raise ConfigError(f"TreeGRPOConfig.mix_weights={self.mix_weights!r}: set comma-separated numbers, e.g. 1,1") from None
        if len(weights) != len(names):
            raise ConfigError(
                f"TreeGRPOConfig.mix_weights has {len(weights)} values for {len(names)} harnesses {names}; set one weight per harness"
            )
        if any(w < 0 for w in weights) or sum(weights) <= 0:
            raise ConfigError(f"TreeGRPOConfig.mix_weights={weights}: set non-negative weights with a positive sum")
        self._check_branching()
        if self.num_generations is None or self.num_generations < 2:
            raise ConfigError(
                f"num_generations={self.num_generations}: set num_generations >= 2 (a group needs a baseline; "
                "with --branching these are the roots)"
            )
        if self.loss_type not in LOSS_TYPES:
            raise ConfigError(f"loss_type={self.loss_type!r}: set loss_type to one of {list(LOSS_TYPES)}")
        if self.importance_sampling_level != "token":
            raise ConfigError("importance_sampling_level must be 'token' for tree training; set importance_sampling_level='token'")
        if self.vllm_importance_sampling_mode not in IS_MODES:
            raise ConfigError(f"vllm_importance_sampling_mode={self.vllm_importance_sampling_mode!r}: set one of {list(IS_MODES)}")
        if not self.temperature > 0:
            raise ConfigError(
                f"temperature={self.temperature}: set a positive sampling temperature (the trainer's logprobs "
                "are log_softmax(logits / temperature))"
            )
        if self.crashed_episodes not in CRASHED_POLICIES:
            raise ConfigError(f"crashed_episodes={self.crashed_episodes!r}: set one of {list(CRASHED_POLICIES)}")
        if self.logprob_chunk_size < 0:
            raise ConfigError(f"logprob_chunk_size={self.logprob_chunk_size}: set a positive row count, or 0 for full logits")
        if self.max_leaves is not None and self.max_leaves < 1:
            raise ConfigError(f"max_leaves={self.max_leaves}: set a positive count, or None to keep every episode")
        if self.max_staleness < 0:
            raise ConfigError(f"max_staleness={self.max_staleness}: set 0 (strictly on-policy) or a positive number of versions")
        if self.weight_sync not in ("auto", "broadcast"):
            raise ConfigError(f"weight_sync={self.weight_sync!r}: set 'auto' or 'broadcast' (NCCL on GPUs, gloo on CPU)")
        if self.async_rollouts and self.max_staleness < 1:
            raise ConfigError(
                "async_rollouts samples the next groups while the trainer steps, so they are at least one version "
                "behind; set --max_staleness 1 (or more)"
            )
        if self.executor not in ("local", "ray"):
            raise ConfigError(f"executor={self.executor!r}: set 'local' or 'ray'")
        if self.executor == "ray" and (self.rollout_backend or "").startswith("vllm:"):
            raise ConfigError(
                "executor='ray' with a vLLM rollout backend: the server already spreads generation; "
                "set --executor local (or an hf: policy to run one per node)"
            )
        if self.executor == "ray" and self.eval_every_steps:
            raise ConfigError(
                "eval_every_steps with executor='ray' is not supported; set --eval_every_steps 0 and run "
                "`clawgym bench run --executor ray --model hf:<checkpoint>/model` on a saved checkpoint"
            )
        if self.rollout_process and (self.executor != "local" or not (self.rollout_backend or "hf:").startswith("hf:")):
            raise ConfigError(
                "rollout_process runs the local executor's hf: policy in a child process; drop it for "
                f"executor={self.executor!r}, rollout_backend={self.rollout_backend!r} (already out of process)"
            )
        for name, cpus in (("trainer_cpus", self.trainer_cpus), ("rollout_cpus", self.rollout_cpus)):
            if cpus is not None:
                parse_cpus(cpus, name)
        if self.rollout_cpus is not None and self.executor != "local":
            raise ConfigError(
                f"rollout_cpus places the local executor's rollout side; with executor={self.executor!r} the "
                "workers are placed by Ray (set their resources there); drop --rollout_cpus"
            )
        if self.task_sampling not in TASK_SAMPLING:
            raise ConfigError(f"task_sampling={self.task_sampling!r}: set one of {list(TASK_SAMPLING)}")
        if self.pairs_per_step < 1:
            raise ConfigError(f"pairs_per_step={self.pairs_per_step}: set at least 1 group per step")
        if self.max_concurrent_episodes < 1:
            raise ConfigError(f"max_concurrent_episodes={self.max_concurrent_episodes}: set at least 1")
        if self.max_steps is None or self.max_steps < 1:
            raise ConfigError(f"max_steps={self.max_steps}: set --max_steps (tree trainers count steps; there are no epochs)")
        if self.eval_every_steps < 0 or self.eval_episodes < 1:
            raise ConfigError("eval_every_steps must be >= 0 and eval_episodes >= 1; set e.g. --eval_every_steps 10 --eval_episodes 1")
        if self.eval_every_steps and not self.eval_suite:
            raise ConfigError(f"eval_every_steps={self.eval_every_steps} needs a held-out suite; set --eval_suite")
        if self.num_iterations < 1:
            raise ConfigError(f"num_iterations={self.num_iterations}: set at least 1")
        if self.gradient_accumulation_steps < 1 or self.pairs_per_step % self.gradient_accumulation_steps:
            raise ConfigError(
                f"gradient_accumulation_steps={self.gradient_accumulation_steps} splits a step's "
                f"pairs_per_step={self.pairs_per_step} groups into micro-batches of whole groups; set a "
                "divisor of pairs_per_step"
            )
        if self.save_steps is not None and self.save_steps < 0:
            raise ConfigError(f"save_steps={self.save_steps}: set 0 (never), a step count, or a fraction of max_steps (< 1)")
        if self.use_peft and (self.lora_r < 1 or self.lora_alpha <= 0 or not 0 <= self.lora_dropout < 1):
            raise ConfigError("use_peft: set lora_r >= 1, lora_alpha > 0 and 0 <= lora_dropout < 1")
        if self.use_vllm:
            raise ConfigError(
                "use_vllm=True is TRL's own vLLM path, which the tree trainers do not use; set use_vllm=False and "
                "--rollout_backend vllm:http://HOST:PORT#MODEL to sample from a vLLM server"
            )
        if self.rollout_backend is not None and self.rollout_backend.split(":", 1)[0] not in ("hf", "vllm", "scripted"):
            raise ConfigError(
                f"rollout_backend={self.rollout_backend!r}: training needs sampled token ids and a weight sync; "
                "set an 'hf:PATH' or 'vllm:URL' spec (or 'scripted:FILE?tokenizer=PATH', a fixed policy), or None"
            )
        if not self.suite:
            raise ConfigError("TreeGRPOConfig.suite is empty; set --suite to a suite folder or name (e.g. trainers/toy_suite)")

    def cpu_sets(self) -> tuple[frozenset[int] | None, frozenset[int] | None]:
        """``(trainer_cpus, rollout_cpus)`` as CPU id sets (None: not pinned)."""
        t, r = self.trainer_cpus, self.rollout_cpus
        return None if t is None else parse_cpus(t, "trainer_cpus"), None if r is None else parse_cpus(r, "rollout_cpus")
