"""Tree GRPO against TRL's own ``GRPOTrainer``: TRL is the oracle for the loss and its gradient.

The same fixed rollouts (two groups of three episodes over a shared prompt each, one- and two-call episodes
whose second call follows a tool result, two episodes that sample the same first tokens, one group of equal
rewards, one token whose rollout logprob was not captured) go through both trainers on the tiny random Qwen3:

- TRL 1.16.0: a real ``GRPOTrainer`` whose ``rollout_func`` returns the ids, the rollout logprobs and an
  ``env_mask`` over the tool tokens; ``_generate_and_score_completions`` scores them (advantages, old and
  reference logprobs, importance ratios), TRL's ``split_tensor_dict`` cuts the generation batch into
  ``gradient_accumulation_steps`` micro-batches (without the shuffle ``_prepare_inputs`` adds, so a micro-batch
  holds whole groups as ours do), and each pass runs ``compute_loss`` + backward per micro-batch, TRL's gradient
  clipping and optimizer step, in fp32 (``bf16=False``: TRL's default autocasts to bf16). With importance
  sampling on, ``use_vllm`` is set after construction: the path a vLLM-backed TRL run takes from the rollout
  logprobs on, without starting a vLLM engine.
- ours: ``TreeGRPOTrainer.train_step`` on the same episodes as captured calls, made into a batch as the rollout
  side makes one, with each group's prefix tree in one pack, and again with packs of one call path each
  (``pack_max_tokens``).

Each pass's loss and gradient (after clipping, before the step) must agree within ``TOL``, over a matrix of
``loss_type``, ``beta``, ``scale_rewards``, ``epsilon``/``epsilon_high``/``delta``, ``temperature``, the
importance-sampling modes, ``gradient_accumulation_steps``, ``num_iterations`` and ``use_bias_correction_kl``.

When TRL changes: install the new version, run this file. Where it fails, read that release's
``trl/trainer/grpo_trainer.py`` (``_generate_and_score_completions``, ``_compute_loss``) and ``grpo_config.py``,
change ``trainers/core/losses.py`` / ``policy_step.py`` to the new definition (or refuse the setting in
``trainers/tree_grpo/fields.py`` with what to set), then move ``TRL_VERSION`` and the version named in
``docs/training.md``. A new GRPOConfig field fails ``test_config.py::test_every_grpo_config_field_is_sorted``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from clawgym_env.capture import CallRecord
from tests.trainers.conftest import SUITE, make_config
from trainers.rollout import RolloutBatch
from trainers.tree_grpo.trainer import TreeGRPOTrainer

TRL_VERSION = "1.16.0"
TOL = 1e-6
"""Largest difference allowed in a pass's loss and in any gradient entry (fp32 on CPU; measured over the matrix, 1 to 4
threads: at most 4.5e-7 in a loss of 0.54, 4.1e-7 in a gradient whose largest entry is 0.1)."""
GENERATIONS, MAX_COMPLETION = 3, 16
TRAIN = {"learning_rate": 0.05, "adam_epsilon": 1e-3, "lr_scheduler_type": "constant", "max_grad_norm": 1.0}
"""A step large enough that the second pass clips; Adam's epsilon keeps its update smooth in the gradient."""
BASE = {"loss_type": "grpo", "vllm_importance_sampling_mode": "token_truncate", "vllm_importance_sampling_clip_max": 2.0}
"""Settings every case starts from, given to both sides (TRL's defaults: dapo, sequence_mask, 3.0)."""


@dataclasses.dataclass(frozen=True)
class Episode:
    """One rollout: its group, each call's sampled ids, the tool result after every call but the last, its reward."""

    group: int
    calls: tuple[tuple[int, ...], ...]
    tools: tuple[tuple[int, ...], ...]
    reward: float


def _episodes() -> tuple[list[list[int]], list[Episode]]:
    g = torch.Generator().manual_seed(0)

    def ids(n: int) -> tuple[int, ...]:
        return tuple(torch.randint(10, 800, (n,), generator=g).tolist())  # no pad (0) or eos (2)

    prompts = [list(ids(12)), list(ids(12))]
    shared = ids(2)
    episodes = [
        Episode(0, (shared + ids(4),), (), 1.0),
        Episode(0, (shared + ids(3), ids(5)), (ids(3),), 0.0),
        Episode(0, (ids(6), ids(4)), (ids(2),), 0.25),
        Episode(1, (ids(5), ids(3)), (ids(3),), 0.5),  # group 1: equal rewards, advantage 0 (TRL keeps it)
        Episode(1, (ids(7),), (), 0.5),
        Episode(1, (ids(4),), (), 0.5),
    ]
    return prompts, episodes


PROMPTS, EPISODES = _episodes()


def completion(ep: Episode) -> tuple[list[int], list[int]]:
    """TRL's view of an episode: its calls and tool results as one completion, and the env_mask of its model tokens."""
    ids: list[int] = []
    mask: list[int] = []
    for i, call in enumerate(ep.calls):
        ids += call
        mask += [1] * len(call)
        if i < len(ep.tools):
            ids += ep.tools[i]
            mask += [0] * len(ep.tools[i])
    return ids, mask


@pytest.fixture(scope="module")
def tiny() -> Path:
    from clawgym_env.models import tiny_model_path

    return tiny_model_path()


@pytest.fixture(scope="module")
def rollout_logprobs(tiny: Path) -> dict[float, list[list[float]]]:
    """Per temperature, each episode's completion logprobs as a sampler would report them: the model's at that
    temperature plus noise (a sampler that disagrees), the same for a token two episodes share, one not captured."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny, dtype=torch.float32).eval()
    out: dict[float, list[list[float]]] = {}
    for temperature in (1.0, 0.7):
        noise = torch.Generator().manual_seed(1)
        rows = []
        for ep in EPISODES:
            ids, _ = completion(ep)
            seq = torch.tensor([PROMPTS[ep.group] + ids])
            with torch.no_grad():
                lp = torch.log_softmax(model(input_ids=seq).logits[0, :-1].float() / temperature, -1)
            true = lp[len(PROMPTS[ep.group]) - 1 :].gather(-1, seq[0, len(PROMPTS[ep.group]) :, None])[:, 0]
            rows.append((true + 0.3 * torch.randn(true.shape, generator=noise)).tolist())
        rows[0][3] -= 1.5  # a sampler far below the trainer: a ratio past every cap
        rows[4][2] += 1.0  # and far above it: a ratio below every lower bound
        rows[1][:2] = rows[0][:2]  # the shared first tokens: one context, one logprob
        rows[2][len(EPISODES[2].calls[0]) + len(EPISODES[2].tools[0])] = math.nan  # call 2's first token: not captured
        out[temperature] = rows
    return out


def our_batch(logprobs: list[list[float]], cfg: Any) -> RolloutBatch:
    """The episodes as captured calls (call k's prompt is the episode so far, its logprobs the sampler's), made into
    a batch as the trainer's rollout side makes one (``build_batch`` with the config's filters and flags)."""
    from clawgym_env.episode import EpisodeResult
    from clawgym_env.task import load_suite
    from trainers.rollout import build_batch, tree_filters

    task = load_suite(SUITE).get("say-short")
    groups: list[tuple[Any, str, list[EpisodeResult]]] = [(task, "custom", []), (task, "custom", [])]
    for e, ep in enumerate(EPISODES):
        sid, prompt, lps, calls = f"g{ep.group}e{e}", list(PROMPTS[ep.group]), list(logprobs[e]), []
        for k, call in enumerate(ep.calls):
            calls.append(
                CallRecord(
                    session_id=sid,
                    call_index=k,
                    dialect="anthropic",
                    prompt_ids=list(prompt),
                    completion_ids=list(call),
                    logprobs=lps[: len(call)],
                    policy_version=0,
                )
            )
            tool = ep.tools[k] if k < len(ep.tools) else ()
            prompt += [*call, *tool]
            lps = lps[len(call) + len(tool) :]
        groups[ep.group][2].append(
            EpisodeResult(session_id=sid, task_id=task.full_id, harness="custom", status="completed", score=ep.reward, calls=calls)
        )
    filters = tree_filters(drop_retries=cfg.drop_retries, max_leaves=cfg.max_leaves, exclude_subagents=cfg.exclude_subagents)
    return build_batch(
        groups,
        filters=filters,
        policy_version=0,
        skip_zero_variance=cfg.drop_zero_variance_from_loss,
        crashed=cfg.crashed_episodes,
        crashed_reward=cfg.crashed_reward,
    )


def one_call_per_pack() -> int:
    """``pack_max_tokens`` that fits the longest call path and no more: about one call per pack."""
    return max(len(PROMPTS[ep.group]) + sum(map(len, ep.calls)) + sum(map(len, ep.tools)) for ep in EPISODES)


class RecordedSteps:
    """Wraps an optimizer: keeps every parameter's gradient as ``step`` sees it (after clipping)."""

    def __init__(self, optimizer: Any, model: torch.nn.Module) -> None:
        self.optimizer, self.model, self.grads = optimizer, model, []  # type: list[dict[str, torch.Tensor]]

    def step(self) -> None:
        self.grads.append({n: p.grad.detach().clone() for n, p in self.model.named_parameters() if p.grad is not None})
        self.optimizer.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)


def run_trl(
    tiny: Path, tmp: Path, logprobs: list[list[float]], settings: dict[str, Any]
) -> tuple[list[float], list[dict[str, torch.Tensor]], Any]:
    """TRL's losses and clipped gradients, one per pass, for ``settings`` (GRPOConfig fields)."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer
    from trl.trainer.utils import split_tensor_dict

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        rows = [completion(ep) for ep in EPISODES]
        return {
            "prompt_ids": [PROMPTS[ep.group] for ep in EPISODES],
            "completion_ids": [ids for ids, _ in rows],
            "env_mask": [mask for _, mask in rows],
            "logprobs": [list(lp) for lp in logprobs],
            "reward": [ep.reward for ep in EPISODES],
        }

    def reward(prompts: list[Any], completions: list[Any], reward: list[float], **_: Any) -> list[float]:
        return list(reward)

    steps = int(settings.get("gradient_accumulation_steps", 1))
    served = settings.pop("served", True)
    args = GRPOConfig(
        output_dir=str(tmp),
        per_device_train_batch_size=len(EPISODES) // steps,
        num_generations=GENERATIONS,
        max_completion_length=MAX_COMPLETION,
        report_to="none",
        use_cpu=True,
        bf16=False,
        **TRAIN,
        vllm_importance_sampling_correction=served,
        **settings,
    )
    model = AutoModelForCausalLM.from_pretrained(tiny, dtype=torch.float32, attn_implementation="eager")
    trl = GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=args,
        processing_class=AutoTokenizer.from_pretrained(tiny),
        train_dataset=Dataset.from_dict({"prompt": ["task-0", "task-1"]}),
        rollout_func=rollout_func,
    )
    trl.use_vllm = served  # served rollouts: the importance-sampling path, no vLLM engine
    trl._last_loaded_step = trl.state.global_step
    trl.model.train()
    optimizer = RecordedSteps(trl.create_optimizer(), trl.model)
    scored = trl._generate_and_score_completions([{"prompt": f"task-{ep.group}"} for ep in EPISODES])
    trl.current_gradient_accumulation_steps = steps
    losses = []
    for _ in range(args.num_iterations):
        total = 0.0
        for micro in split_tensor_dict(scored, steps):
            loss = trl.compute_loss(trl.model, micro)
            loss.backward()
            total += float(loss.detach())
        torch.nn.utils.clip_grad_norm_(trl.model.parameters(), args.max_grad_norm)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(total)
    return losses, optimizer.grads, trl


def run_ours(
    tiny: Path, tmp: Path, logprobs: list[list[float]], settings: dict[str, Any], **ours: Any
) -> tuple[list[float], list[dict[str, torch.Tensor]], dict[str, float]]:
    """Our losses and clipped gradients, one per pass, for the same ``settings`` (and ``ours``: tree fields)."""
    settings = dict(settings)
    served = settings.pop("served", True)
    cfg = make_config(
        tmp,
        num_generations=GENERATIONS,
        pairs_per_step=2,
        max_completion_length=MAX_COMPLETION,
        max_steps=1,
        vllm_importance_sampling_correction=served,
        **TRAIN,
        **settings,
        **ours,
    )
    trainer = TreeGRPOTrainer(cfg, tiny)
    recorder = RecordedSteps(trainer.optimizer, trainer.policy)
    trainer.optimizer = recorder  # type: ignore[assignment]
    metrics = trainer.train_step(our_batch(logprobs, cfg))
    passes = cfg.num_iterations
    losses = [metrics[f"loss/pass_{k}"] for k in range(passes)] if passes > 1 else [metrics["loss"]]
    return losses, recorder.grads, metrics


def differences(a: tuple[list[float], list[dict[str, torch.Tensor]]], b: tuple[list[float], list[dict[str, torch.Tensor]]]) -> list[str]:
    """What differs by more than ``TOL`` between two runs' per-pass losses and gradients."""
    out = []
    if len(a[0]) != len(b[0]) or len(a[1]) != len(b[1]):
        return [f"{len(a[0])} passes vs {len(b[0])}"]
    for k, (la, lb) in enumerate(zip(a[0], b[0], strict=True)):
        if not abs(la - lb) <= TOL:
            out.append(f"pass {k} loss {la:.9g} vs {lb:.9g}")
    for k, (ga, gb) in enumerate(zip(a[1], b[1], strict=True)):
        if ga.keys() != gb.keys():
            out.append(f"pass {k}: parameters {sorted(ga.keys() ^ gb.keys())}")
            continue
        worst = max(ga, key=lambda n: float((ga[n] - gb[n]).abs().max()))
        gap = float((ga[worst] - gb[worst]).abs().max())
        if not gap <= TOL:
            out.append(f"pass {k} gradient of {worst} off by {gap:.3g}")
    return out


CASES: dict[str, dict[str, Any]] = {
    **{
        f"{loss}-accum{steps}-beta{beta}": {"loss_type": loss, "gradient_accumulation_steps": steps, "beta": beta}
        for loss in ("grpo", "bnpo", "dr_grpo", "dapo")
        for steps in (1, 2)
        for beta in (0.0, 0.04)
    },
    **{
        f"{loss}-two-passes{'-accum2' if loss in ('bnpo', 'dapo') else ''}": {
            "loss_type": loss,
            "num_iterations": 2,
            "gradient_accumulation_steps": 2 if loss in ("bnpo", "dapo") else 1,
        }
        for loss in ("grpo", "bnpo", "dr_grpo", "dapo")
    },
    "grpo-two-passes-epsilon_high-delta-beta": {"num_iterations": 2, "epsilon_high": 0.28, "delta": 1.5, "beta": 0.04},
    "dapo-two-passes-epsilon-accum2": {"loss_type": "dapo", "num_iterations": 2, "epsilon": 0.1, "gradient_accumulation_steps": 2},
    "grpo-two-passes-plain-k3": {"num_iterations": 2, "beta": 0.04, "use_bias_correction_kl": False},
    "grpo-scale-batch": {"scale_rewards": "batch"},
    "dr_grpo-scale-none": {"loss_type": "dr_grpo", "scale_rewards": "none"},
    "bnpo-scale-batch-accum2-beta": {"loss_type": "bnpo", "scale_rewards": "batch", "gradient_accumulation_steps": 2, "beta": 0.04},
    "grpo-temperature-beta": {"temperature": 0.7, "beta": 0.04},
    "dapo-temperature-two-passes-token_mask": {
        "loss_type": "dapo",
        "temperature": 0.7,
        "num_iterations": 2,
        "vllm_importance_sampling_mode": "token_mask",
        "vllm_importance_sampling_clip_min": 0.5,
    },
    "grpo-is-off": {"served": False},
    "grpo-is-off-two-passes-beta": {"served": False, "num_iterations": 2, "beta": 0.04},
    "grpo-token_mask": {"vllm_importance_sampling_mode": "token_mask", "vllm_importance_sampling_clip_min": 0.8},
    "bnpo-token_truncate-min-accum2": {"loss_type": "bnpo", "vllm_importance_sampling_clip_min": 0.8, "gradient_accumulation_steps": 2},
    "grpo-sequence_truncate": {"vllm_importance_sampling_mode": "sequence_truncate", "vllm_importance_sampling_clip_max": 1.5},
    "dr_grpo-sequence_mask-beta": {
        "loss_type": "dr_grpo",
        "vllm_importance_sampling_mode": "sequence_mask",
        "vllm_importance_sampling_clip_max": 1.5,
        "beta": 0.04,
    },
    "dapo-sequence_mask-trl-default-cap-two-passes": {
        "loss_type": "dapo",
        "vllm_importance_sampling_mode": "sequence_mask",
        "vllm_importance_sampling_clip_max": 3.0,
        "vllm_importance_sampling_clip_min": 0.5,
        "num_iterations": 2,
    },
}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield tmp_path_factory.mktemp("trl-conformance")


def test_trl_is_the_version_this_file_speaks_for() -> None:
    import trl

    assert trl.__version__ == TRL_VERSION, f"TRL {trl.__version__}: re-check the loss against it (module docstring)"


@pytest.mark.parametrize("case", list(CASES))
def test_tree_grpo_equals_trl_grpo_trainer(case: str, tiny: Path, workdir: Path, rollout_logprobs: dict[float, Any]) -> None:
    settings = {**BASE, **CASES[case]}
    logprobs = rollout_logprobs[float(settings.get("temperature", 1.0))]
    *oracle, trl = run_trl(tiny, workdir / case / "trl", logprobs, dict(settings))
    for packing, pack_max_tokens in (("tree", None), ("per-call", one_call_per_pack())):
        *ours, metrics = run_ours(tiny, workdir / case / packing, logprobs, settings, pack_max_tokens=pack_max_tokens)
        assert not differences(tuple(oracle), tuple(ours)), f"{case}, {packing} packs: {differences(tuple(oracle), tuple(ours))}"
    # the case exercises what its name says
    if settings.get("num_iterations", 1) > 1:
        assert metrics["clip_ratio/pass_1"] > 0, "the second pass should clip some ratios"
    if settings.get("served", True):
        ratio = trl._metrics["train"]
        mode = settings["vllm_importance_sampling_mode"]
        if mode.endswith("mask"):
            assert ratio["sampling/importance_sampling_ratio/min"][-1] == 0.0, "some ratio should be masked"
        else:
            cap = settings["vllm_importance_sampling_clip_max"]
            assert ratio["sampling/importance_sampling_ratio/max"][-1] == pytest.approx(cap), "some ratio should be truncated"


def test_a_deliberately_wrong_setting_is_caught(tiny: Path, workdir: Path, rollout_logprobs: dict[float, Any]) -> None:
    """The check has teeth: ours at the wrong temperature, with dapo for bnpo, or without the zero-variance group
    (what ``drop_zero_variance_from_loss=True`` trains on) differs from TRL; the right settings do not."""
    logprobs = rollout_logprobs[0.7]
    settings = {**BASE, "loss_type": "bnpo", "gradient_accumulation_steps": 2, "temperature": 0.7, "beta": 0.04}
    *oracle, _ = run_trl(tiny, workdir / "control" / "trl", logprobs, dict(settings))
    *same, _ = run_ours(tiny, workdir / "control" / "same", logprobs, settings)
    assert not differences(tuple(oracle), tuple(same))
    for wrong in ({"temperature": 1.0}, {"loss_type": "dapo"}):
        *ours, _ = run_ours(tiny, workdir / "control" / "-".join(wrong), logprobs, {**settings, **wrong})
        assert differences(tuple(oracle), tuple(ours)), f"{wrong} went unnoticed"
    *oracle, _ = run_trl(tiny, workdir / "control" / "trl-grpo", rollout_logprobs[1.0], dict(BASE))
    *dropped, _ = run_ours(tiny, workdir / "control" / "dropped", rollout_logprobs[1.0], BASE, drop_zero_variance_from_loss=True)
    assert differences(tuple(oracle), tuple(dropped)), "dropping the zero-variance group went unnoticed"


def test_the_rollout_backend_captures_what_the_trainer_scores_at_its_temperature(tiny: Path, workdir: Path) -> None:
    """TRL compares processed (tempered) sampler logprobs with its own at ``temperature``: the trainer's hf backend
    captures ``log_softmax(logits / T)``, so at T = 0.7 the step's mismatch is float noise; raw captures are not."""
    import asyncio

    from clawgym_env.proxy.backends.base import CompletionRequest
    from clawgym_env.proxy.backends.hf import HFBackend
    from clawgym_env.tree import build_forest
    from trainers.core.rollout_side import tempered_spec
    from trainers.rollout import Group
    from trainers.tree_sft.forward import DetachedTrunkForward

    class DetachedTrunkGRPO(DetachedTrunkForward, TreeGRPOTrainer):
        pass

    assert tempered_spec("hf:tiny?seed=3&logprobs_mode=raw") == "hf:tiny?seed=3&logprobs_mode=tempered"
    assert tempered_spec("vllm:http://h:8000#m") == "vllm:http://h:8000#m"

    def sampled(backend: Any) -> Group:
        """A group of two one-call episodes sampled at T = 0.7 by ``backend`` (closed afterwards)."""

        async def sample(e: int) -> CallRecord:
            done = await backend.handle(CompletionRequest(f"e{e}", 0, PROMPTS[0], [], max_tokens=8, temperature=0.7, seed=e))
            return CallRecord(
                session_id=f"e{e}",
                call_index=0,
                dialect="anthropic",
                prompt_ids=PROMPTS[0],
                completion_ids=done.completion_ids,
                logprobs=done.logprobs,
            )

        async def run() -> list[CallRecord]:
            try:
                return list(await asyncio.gather(sample(0), sample(1)))
            finally:
                await backend.aclose()

        calls = asyncio.run(run())
        return Group(task_id="t", harness="custom", rewards={"e0": 1.0, "e1": 0.0}, tree=build_forest([[c] for c in calls]))

    def mismatch(group: Group, trainer: type[TreeGRPOTrainer] = TreeGRPOTrainer) -> float:
        return trainer(cfg, tiny).train_step(RolloutBatch(groups=[group]))["mismatch"]  # fresh weights: version 0

    cfg = make_config(workdir / "tempered", temperature=0.7, num_generations=2, pairs_per_step=1, max_steps=1)
    backend = TreeGRPOTrainer(cfg, tiny).rollouts.backend  # the trainer's own rollout policy
    assert backend.logprobs_mode == "tempered"
    tempered = sampled(backend)
    assert mismatch(tempered) < 1e-5
    assert mismatch(tempered, DetachedTrunkGRPO) < 1e-5  # the forward the Pass@1 experiment trains with
    assert mismatch(sampled(HFBackend(tiny, seed=0))) > 1e-2  # raw logprobs


def test_a_step_with_no_reward_variance_still_steps_the_optimizer(tiny: Path, workdir: Path, rollout_logprobs: dict[float, Any]) -> None:
    """Every group with equal rewards and beta = 0: no pack is forwarded, yet, as in TRL, the optimizer steps on a zero
    gradient, so Adam's momentum from the step before still moves the weights."""
    cfg = make_config(
        workdir / "flat", num_generations=GENERATIONS, pairs_per_step=2, max_completion_length=MAX_COMPLETION, max_steps=2, **TRAIN, **BASE
    )
    trainer = TreeGRPOTrainer(cfg, tiny)
    trainer.train_step(our_batch(rollout_logprobs[1.0], cfg))
    flat = our_batch(rollout_logprobs[1.0], cfg)
    for group in flat.groups:
        group.rewards = dict.fromkeys(group.rewards, 0.5)
    before = {n: p.detach().clone() for n, p in trainer.policy.named_parameters()}
    metrics = trainer.train_step(flat)
    assert metrics["trainable_tokens"] == 0 and metrics["grad_norm"] == 0 and metrics["optimizer_step"] == 1
    assert max(float((p - before[n]).abs().max()) for n, p in trainer.policy.named_parameters()) > 1e-4
