"""The Pass@1 experiment's pipeline (the command: ``trainers/scripts/experiment_pass1.py``; the record:
``experiments/pass1-claude-code-bash/``): held-out Pass@1 before SFT, after tree SFT and after tree GRPO.

Stages (each a function, so other experiments can reuse or swap one):
1. ``build_model``: the embedded pretrained SmolLM2-135M-Instruct (``clawgym_env.models``), which
   can already copy text and knows shell commands but not our tool-call format. Its context is
   8,192 tokens, so the harnesses are Claude Code with ``--tools Bash`` (``claude-code-bash``, the
   default: a 3,150-token first prompt whose first 2,902 tokens every task shares) and the custom loop
   (``--harness custom``, ~470 tokens, the ``--quick`` size); the full Claude Code tool set (~12.4k
   tokens) does not fit and is not used (a call that would not fit fails loudly in the backend, it is
   never truncated).
2. ``capture``: expert episodes of every train variant through every harness
   (``trainers.tree_sft.expert``), kept only when the verifier scores 1.0, saved with ``datasets``.
3. ``sft``: ``TreeSFTTrainer`` on those captures: ``sft_packs_per_step`` packs a step share one trunk
   forward, and the frozen bottom layers run once per pack (``trainers.tree_sft.frozen``).
4. ``probe``: the SFT model sampled ``probe_attempts`` times on ``probe_tasks`` of ``rl_suite`` at RL's
   temperature; RL keeps the templates it solved sometimes but not always (``learnable_categories``).
   ``rl_suite`` (``procgen-train-rl``) holds train-split variants the SFT data never had: on the SFT
   variants themselves a memorised policy is right every time or wrong every time, and no group varies.
5. ``rl``: tree GRPO (``TreeGRPOTrainer`` with the detached-trunk forward, a KL term ``rl_beta`` to the
   SFT model, the same bottom layers frozen) on those templates' ``rl_suite`` variants minus ``val_tasks``,
   from the SFT model, sampled at ``rl_temperature``; with ``rl_task_sampling="stratified"`` every step
   has one group per template. ``select_rl_step``: every step's checkpoint greedily on ``val_tasks``;
   the best (ties: the later) is the after-RL model.
6. ``evaluate``: ``clawgym bench run`` on ``procgen-test`` (held-out variants) for the model before
   SFT, after SFT and after RL, at ``eval_temperature`` (0: greedy); again with ``eval_samples``
   attempts at ``rl_temperature`` (``<stage>-sampled``: the sampled Pass@1 that GRPO's objective, the
   expected reward at that temperature, is about); and on ``val_tasks`` after SFT and after RL (train-split
   variants neither SFT nor RL saw: where RL's settings are judged); then ``clawgym bench compare``.
"""

from trainers.pass1.evaluate import evaluate, reusable
from trainers.pass1.pipeline import run
from trainers.pass1.size import RL_SUITE, STAGES, TEST_SUITE, TRAIN_SUITE, Evaluation, Size, evaluations
from trainers.pass1.stages import (
    best_step,
    build_model,
    capture,
    learnable_categories,
    probe,
    rl,
    rl_tasks,
    select_rl_step,
    sft,
)

__all__ = [
    "Evaluation",
    "RL_SUITE",
    "STAGES",
    "Size",
    "TEST_SUITE",
    "TRAIN_SUITE",
    "best_step",
    "build_model",
    "capture",
    "evaluate",
    "evaluations",
    "learnable_categories",
    "probe",
    "reusable",
    "rl",
    "rl_tasks",
    "run",
    "select_rl_step",
    "sft",
]
