"""The pre-registration: the design in words, written before any test evaluation and committed with ``design.json``."""

from __future__ import annotations

from trainers.transfer.design import Design

__all__ = ["preregistration"]


def preregistration(design: Design) -> str:
    """PREREGISTRATION.md for ``design`` (every number in it comes from the design)."""
    s, r = design.sft, design.rl
    arms = "\n".join(
        f"- `{a.name}` ({a.kind}{', through ' + a.harnesses if a.harnesses else ''}): seeds {list(a.seeds)}" for a in design.arms
    )
    greedy = "greedy (1 attempt) and " if design.greedy else ""
    sft_greedy = " (greedy once: it does not depend on the seed)" if design.greedy else ""
    temps = ", ".join(f"T = {t:g}" for t in design.sft_temperatures)
    data = f"the verifier-filtered expert captures of `{s.suite}` (`{s.tasks}`) through `{s.harnesses}`" + (
        ", each expert episode reading before it acts (`cat` of the file the instruction names, else `ls`; then the "
        "task's one reference command): the data shows a command sent after a tool result, but no act that "
        "depends on what was read"
        if s.look_first
        else ""
    )
    base = (
        f"The SFT adapter `{s.start}` (on the embedded SmolLM2-135M-Instruct), trained further by"
        if s.start
        else f"""The embedded SmolLM2-135M-Instruct with one LoRA adapter (r = {s.lora_r}, alpha = {s.lora_alpha}, every linear layer of the
decoder layers above the bottom {s.frozen_layers}), trained by"""
    )
    start = (
        f"The published SFT adapter `{s.adapter}` on the embedded SmolLM2-135M-Instruct."
        if s.adapter
        else f"""{base} tree SFT for {s.steps} steps of {s.packs_per_step} packs at lr {s.learning_rate:g}
(cosine, 10% warm-up, seed {s.seed}) on {data}. Every arm continues this adapter and ends as one adapter of the same shape."""
    )
    equal_groups = (
        "groups whose rewards are all equal are left out of the step (DAPO's filter, no resampling)"
        if r.drop_zero_variance
        else "groups whose rewards are all equal stay in the step with advantage 0 (TRL)"
    )
    amended = "\n".join(f"- {a}" for a in design.amendments)
    amendments = f"\n## Amendments (each made before any evaluation on the test split)\n{amended}\n" if amended else ""
    n = len(design.rl_templates) + len(design.val_templates) + len(design.test_templates)
    how = f"a random split, seed {design.split_seed}," if design.split_seed is not None else "roles chosen by hand"
    return f"""# Pre-registration: does RL through a harness teach what SFT did not?

Written by `trainers/transfer/prereg.py` from `design.json` before any evaluation on the test split.
The test split is evaluated once per final adapter; every figure is reported as measured.

## Question
After supervised fine-tuning on one-command skills, does tree GRPO through a real harness, with no expert data,
teach the read-then-act skill (read something with one command, act on what it printed with the next) so that
it transfers to task types never trained on, beyond what the same SFT adapter does at its best temperature, what
more SFT of the same compute does, and what the same RL does when its rewards are shuffled within each group?

## Starting point (the same for every arm)
{start}

## Task types ({how} of {n} templates of `{design.train_suite}`)
- RL templates (train-pool variants train; test-pool variants `{design.heldout_variants}` are the *held-out variants*):
  {", ".join(design.rl_templates)}
- Validation templates (train-pool variants `{design.val_variants}` choose each run's checkpoint):
  {", ".join(design.val_templates) or "none (one candidate a run: its last step)"}
- Test templates (*held-out task types*, test-pool variants `{design.test_variants}`; never trained on, never used to
  choose anything): {", ".join(design.test_templates)}

## Arms
{arms}

- RL: tree GRPO, {r.steps} steps of {r.groups} groups x {r.generations} rollouts (tasks drawn stratified over the RL
  templates), lr {r.learning_rate:g} constant, KL coefficient beta {r.beta:g} to the SFT adapter, T = {r.temperature:g},
  {r.max_tokens} tokens a call; {equal_groups};
  `rl-mix` draws each group's harness 1:1 from its two harnesses.
- `rl-shuffled`: the same as `rl`, each group's rewards permuted among its rollouts before the advantages.
- `sft-more`: {r.steps} more tree-SFT steps of {s.packs_per_step} packs on the same expert data at lr {s.learning_rate / 4:g}
  constant (as many optimizer steps as RL).
- Checkpoint choice (every trained arm): candidates at steps {r.checkpoints}; each is sampled at T = {r.temperature:g}
  ({design.val_attempts} attempt a variant) on the validation variants through `{design.eval_harnesses}`; the highest mean
  score wins, ties go to the later step.

## Test evaluation (once per final adapter)
`clawgym bench run` of base + adapter on `{design.test_suite}`, tasks `{design.task_patterns("test")}`, through
`{design.eval_harnesses}`: {greedy}sampled at T = {r.temperature:g} ({design.sampled_attempts} attempts); the
SFT adapter at {temps}{sft_greedy}.

## Metric and analysis (`trainers/transfer/analysis.py`)
Pass@1 = mean all-or-nothing score, per arm, decoding, harness and part (held-out types; held-out variants),
averaged over seeds, variants and attempts, every template weighing the same; each seed also on its own.
Primary comparison, per harness: each RL arm sampled at T = {r.temperature:g} minus the best SFT control (the SFT adapter
greedy or at any registered temperature, `sft-more` greedy or sampled: whichever has the highest Pass@1) on held-out
task types; 95% interval by bootstrap over test templates (10,000 resamples, the best control re-chosen in each),
one-sided sign-flip p over templates. Also reported: the same greedy, on held-out variants, and `rl-shuffled`.
Target: an RL arm at least 10 points over the best SFT control on held-out task types through at least one harness,
with the interval excluding zero. Whatever the figures, they are reported as measured.
{amendments}"""
