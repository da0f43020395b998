"""A tree GRPO step with a real vLLM CPU server as the rollout backend (tier ``vllm``).

Rollouts go through the custom harness and Claude Code (``claude-code-bash``: the unmodified binary
with ``--tools Bash``, a 3.2k-token first prompt; bwrap) to the server; after the update the trainer
writes ``<output_dir>/policy-latest`` and the server reloads it. The server's logprobs for a fixed
prompt must then equal the trainer's updated model, and differ from the weights it started on.

With 12 output tokens every Claude Code call stops on length and Claude Code exits 1 after its
output-limit retries (four calls); ``crashed_episodes="penalize"`` trains those episodes with
reward 0. Both Claude Code episodes then share that reward, so their advantage is 0: the step
checks that the trainer's logprobs on Claude Code's tree equal the served ones (``mismatch``),
while the gradient comes from the custom group.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from clawgym_env._sync import run_sync
from clawgym_env.proxy.backends.vllm import VLLMBackend
from tests.clawgym_env.proxy.test_vllm_real import fixed_prompt, forward_logprobs, max_delta, req
from tests.conftest import RealVLLM, with_wall_time
from tests.trainers.conftest import SUITE, make_config
from trainers.tree_grpo.trainer import TreeGRPOTrainer

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.sandbox]


def test_grpo_step_syncs_the_server_to_the_updated_policy(real_vllm: RealVLLM, tmp_path: Path) -> None:
    suite = with_wall_time(SUITE, tmp_path / "suite")  # Claude Code's first prefill: minutes on a busy 2-core box
    cfg = make_config(
        tmp_path / "out",
        suite=str(suite),
        rollout_backend=real_vllm.spec,
        tasks="say-short",
        harness="custom,claude-code-bash",
        mix_weights="1,1",
        pairs_per_step=2,
        num_generations=2,
        max_completion_length=12,
        learning_rate=1e-3,
        crashed_episodes="penalize",
        beta=0.04,  # a KL term: every pack is forwarded, so mismatch is measured on each harness (equal rewards give advantage 0)
        seed=0,
    )  # seed 0 draws one pair of each
    trainer = TreeGRPOTrainer(cfg, real_vllm.model_path)
    backend = trainer.backend
    try:
        assert isinstance(backend, VLLMBackend)
        run_sync(backend.reload_weights(real_vllm.model_path, version=0))  # whatever an earlier test left served
        ids = fixed_prompt(backend.tokenizer)
        before = run_sync(backend.handle(req(ids, max_tokens=12, temperature=0.0)))
        batch = trainer.rollout()
        assert sorted(g.harness for g in batch.groups) == ["claude-code-bash", "custom"], batch.skipped
        assert all(g.versions == {0} and g.tree is not None and g.tree.num_trainable > 0 for g in batch.groups)
        metrics = trainer.train_step(batch)
        print({k: v for k, v in metrics.items() if k.startswith("mismatch")})
        assert metrics["mismatch/claude-code-bash"] < 1e-3  # the server's rollout logprobs are the trainer's own at step 0
        assert metrics["mismatch/custom"] < 1e-3
        assert metrics["policy_version"] == 1.0 and metrics["grad_norm"] > 0
        assert (tmp_path / "out" / "policy-latest" / "model.safetensors").is_file()
        after = run_sync(backend.handle(req(ids, max_tokens=12, temperature=0.0)))
        assert after.policy_version == 1
        # the trainer's updated weights, in memory, in a plain-attention copy (the trainer's own model
        # runs tree attention, which needs a packed tree)
        policy = AutoModelForCausalLM.from_pretrained(real_vllm.model_path, dtype=torch.float32)
        policy.load_state_dict(trainer.policy.state_dict())
        updated = forward_logprobs(policy, ids, after.completion_ids)
        delta = max_delta(updated, after.logprobs)
        base = AutoModelForCausalLM.from_pretrained(real_vllm.model_path, dtype=torch.float32)
        moved = max_delta(forward_logprobs(base, ids, before.completion_ids), forward_logprobs(policy, ids, before.completion_ids))
        print(f"served vs trainer after the sync: max |dlogp| = {delta:.2e}; the step moved them by {moved:.2e}")
        assert delta < 1e-3
        assert moved > 1e-2  # the step changed the policy enough for the check to mean something
    finally:
        run_sync(backend.reload_weights(real_vllm.model_path, version=0))
        trainer.close()
