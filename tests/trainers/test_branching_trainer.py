"""Branching as a trainer option: TreeRL advantages reach each token, replayed calls train once, real steps.

The toy group is what ``sample_branched_groups`` yields: a root episode r and two branches
replayed from it (b1 at call 1, b2 at call 2), their replayed calls captured as
``token_source="replayed"`` by ``ReplayBackend``. Its steps (runs of tokens the same rollouts
share; the radix tree also splits them where a call ends), by hand::

    T  = [1 2 3 | 10 11 | 90 91]       r, b1, b2   (call 0: sampled by r, replayed by b1 and b2)
    A  = [20 21 | 91 92]    under T    r, b2       (call 1: sampled by r, replayed by b2)
    A1 = [30 31]            under A    r           (r's call 2)
    A2 = [40 41]            under A    b2          (b2's call 2, its branch)
    B  = [25 26 | 91 92 | 35 36] under T  b1       (b1's calls 1 and 2, its branch)

With rewards r = 1, b1 = 1, b2 = 0: V(root) = V(T) = 2/3, V(A) = 1/2, V(A1) = V(B) = 1, V(A2) = 0,
and the step advantage ``((V - V_root) + (V - V_parent)) / sqrt(leaves)`` is 0 on T,
-(1/3)/sqrt(2) on A, 1/3 + 1/2 on A1, -2/3 - 1/2 on A2 and 2/3 on B.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from clawgym_env.capture.records import CallRecord
from clawgym_env.errors import ConfigError
from tests.trainers.conftest import make_config
from trainers.rollout import RolloutBatch, make_group, tree_filters
from trainers.tree_grpo.trainer import TreeGRPOTrainer
from trainers.tree_ppo.config import TreePPOConfig
from trainers.tree_ppo.trainer import TreePPOTrainer

REWARDS = {"r": 1.0, "b1": 1.0, "b2": 0.0}
HAND = {  # loss token id -> (rollout credited, node value, step advantage)
    10: ("r", 2 / 3, 0.0),
    11: ("r", 2 / 3, 0.0),
    20: ("r", 0.5, -(1 / 3) / math.sqrt(2)),
    21: ("r", 0.5, -(1 / 3) / math.sqrt(2)),
    30: ("r", 1.0, 1 / 3 + 1 / 2),
    31: ("r", 1.0, 1 / 3 + 1 / 2),
    40: ("b2", 0.0, -2 / 3 - 1 / 2),
    41: ("b2", 0.0, -2 / 3 - 1 / 2),
    25: ("b1", 1.0, 2 / 3),
    26: ("b1", 1.0, 2 / 3),
    35: ("b1", 1.0, 2 / 3),
    36: ("b1", 1.0, 2 / 3),
}


def episode(session: str, turns: list[list[int]], replayed: int) -> Any:
    """An episode whose first ``replayed`` calls were answered from the root's recording."""
    from clawgym_env.episode import EpisodeResult

    calls, prompt = [], [1, 2, 3]
    for i, c in enumerate(turns):
        calls.append(
            CallRecord(
                session_id=session,
                call_index=i,
                dialect="openai-chat",
                prompt_ids=list(prompt),
                completion_ids=c,
                logprobs=[-0.5] * len(c),
                token_source="replayed" if i < replayed else "sampled",
            )
        )
        prompt = prompt + c + [90 + i, 91 + i]
    return EpisodeResult(session_id=session, task_id="toy/t", harness="custom", status="completed", score=REWARDS[session], calls=calls)


def branched_batch() -> RolloutBatch:
    eps = [
        episode("r", [[10, 11], [20, 21], [30, 31]], 0),
        episode("b1", [[10, 11], [25, 26], [35, 36]], 1),
        episode("b2", [[10, 11], [20, 21], [40, 41]], 2),
    ]
    group = make_group("toy/t", "custom", eps, filters=tree_filters(drop_retries=True, max_leaves=None, exclude_subagents=False))
    return RolloutBatch(groups=[group])


def per_token(trainer: Any, batch: RolloutBatch, what: str) -> dict[int, tuple[str, float]]:
    slots, rollouts = trainer.slots(batch)
    trainer.pair_advantages(slots, batch, rollouts)
    out: dict[int, tuple[str, float]] = {}
    for s in slots:
        for tok, roll, value in zip(s.pair_token.tolist(), s.pair_rollout.tolist(), getattr(s, what).tolist(), strict=True):
            token_id = int(s.pack.input_ids[tok])
            assert token_id not in out, f"token {token_id} has two pairs: trained twice"
            out[token_id] = (rollouts[roll][1], value)
    return out


def test_the_tree_is_the_hand_drawn_one_and_replayed_calls_are_context_only() -> None:
    group = branched_batch().groups[0]
    tree = group.tree
    assert tree is not None
    forks = sorted((n.end_depth, sorted(c.tokens[0] for c in n.children.values())) for n in tree.nodes() if len(n.children) > 1)
    assert forks == [(7, [20, 25]), (11, [30, 40])]  # b1 splits off at call 1's first token, b2 at call 2's
    assert tree.num_trainable == len(HAND)  # 12: call 0 once, not three times
    assert group.generated_tokens == 6 + 4 + 2  # r sampled 3 calls, b1 2, b2 1: replayed calls cost nothing


def test_grpo_each_token_gets_its_nodes_step_advantage_once(tiny_path: Path, tmp_path: Path) -> None:
    batch = branched_batch()
    trainer = TreeGRPOTrainer(make_config(tmp_path, branching=True, scale_rewards="none"), tiny_path)
    got = per_token(trainer, batch, "advantages")
    assert got.keys() == HAND.keys()
    for tok, (rollout, _, adv) in HAND.items():
        assert got[tok][0] == rollout, tok
        assert got[tok][1] == pytest.approx(adv, abs=1e-6), tok
    std = torch.tensor(list(REWARDS.values())).std().item()  # scale_rewards="group": GRPO's standardised rewards
    scaled = per_token(TreeGRPOTrainer(make_config(tmp_path, branching=True), tiny_path), batch, "advantages")
    for tok, (_, _, adv) in HAND.items():
        assert scaled[tok][1] == pytest.approx(adv / (std + 1e-4), abs=1e-5), tok


def test_without_branching_the_rollout_baseline_reaches_only_the_tokens_each_rollout_sampled(tiny_path: Path, tmp_path: Path) -> None:
    trainer = TreeGRPOTrainer(make_config(tmp_path, scale_rewards="none"), tiny_path)
    got = per_token(trainer, branched_batch(), "advantages")
    mean = sum(REWARDS.values()) / 3
    assert got.keys() == HAND.keys()  # the replayed calls are not b1's or b2's samples
    for tok, (rollout, _, _) in HAND.items():
        assert got[tok] == (rollout, pytest.approx(REWARDS[rollout] - mean, abs=1e-6))


def test_a_real_optimizer_step_on_a_branched_group(tiny_path: Path, tmp_path: Path) -> None:
    batch = branched_batch()
    trainer = TreeGRPOTrainer(make_config(tmp_path, branching=True, learning_rate=1e-2), tiny_path)
    before = {k: v.clone() for k, v in trainer.policy.state_dict().items()}
    metrics = trainer.train_step(batch)
    assert metrics["optimizer_step"] == 1.0 and metrics["grad_norm"] > 0 and metrics["trainable_tokens"] == len(HAND)
    assert metrics["rollouts_trained"] == 3.0
    assert any(not torch.equal(before[k], v) for k, v in trainer.policy.state_dict().items())


def test_ppo_regresses_each_token_on_its_subtree_mean(tiny_path: Path, tmp_path: Path) -> None:
    cfg = make_config(tmp_path, TreePPOConfig, branching=True, whiten_advantages=False, value_warmup_steps=0)
    trainer = TreePPOTrainer(cfg, tiny_path)  # the value head starts at 0, so A = the return of each pair
    got = per_token(trainer, branched_batch(), "advantages")
    for tok, (rollout, value, _) in HAND.items():
        assert got[tok] == (rollout, pytest.approx(value, abs=1e-6)), tok


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"branch_points": 3}, "only act with branching; set --branching true"),
        ({"branch_strategy": "entropy"}, "only act with branching"),
        ({"branching": True, "branch_strategy": "best"}, "set 'uniform' or 'entropy'"),
        ({"branching": True, "branches_per_point": 0}, "set both >= 1"),
        ({"branching": True, "async_rollouts": True, "max_staleness": 1}, "set --async_rollouts false"),
        ({"branching": True, "executor": "ray"}, "set --executor local"),
        ({"num_generations": 1, "branching": True}, "num_generations >= 2"),
    ],
)
def test_branching_settings_are_refused_with_what_to_set(tmp_path: Path, kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_config(tmp_path, **kw)


def test_branching_fields_parse(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, branching=True, num_generations=2, branch_points=3, branches_per_point=2, branch_strategy="entropy")
    assert (cfg.num_generations, cfg.branch_points, cfg.branches_per_point, cfg.branch_strategy) == (2, 3, 2, "entropy")


@pytest.fixture(scope="module")
def tool_model(tiny_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model taught to call bash and then answer, so its own episodes have calls to branch at.

    A random tiny model never makes a valid tool call (one-call episodes, nothing to replay). Six
    scripted episodes through the real custom harness (bash ``echo hi`` once or twice, then a short
    answer) give the real prompt ids; 120 plain NLL steps on their packed tree teach the format.
    """
    import random

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from clawgym_env._sync import LoopThread
    from clawgym_env.proxy import ScriptedBackend
    from clawgym_env.task import load_suite
    from clawgym_env.tree import build_forest, pack_tree
    from tests.trainers.conftest import SUITE
    from trainers.rollout_stream import RolloutStream, local_executor

    tok = AutoTokenizer.from_pretrained(tiny_path)
    task = load_suite(SUITE).get("say-digits")
    draw = random.Random(0)

    def expert(request: Any) -> Any:
        done = sum(1 for m in request.messages if m.get("role") == "tool")
        if done == 0 or (done == 1 and draw.random() < 0.5):
            return {"tool_calls": [{"name": "bash", "arguments": {"command": "echo hi"}}]}
        return draw.choice(["12345", "Done.", "ok 7", "99"])

    loop = LoopThread()
    executor = local_executor(
        [task], ["custom"], ScriptedBackend(expert, tokenizer=tok), sandbox="bwrap", sampling=None, concurrency=2, wall_time_s=120
    )
    loop.run(executor.start())
    stream = RolloutStream(executor, loop, num_generations=6, next_pair=lambda: (task, "custom"))
    try:
        [eps] = stream.run_now([(task, "custom")])
    finally:
        stream.close()
        loop.run(executor.stop())
        loop.close()
    targets = [
        c.model_copy(update={"token_source": "sampled", "logprobs": [0.0] * len(c.completion_ids or ())}) for ep in eps for c in ep.calls
    ]
    pack = pack_tree(build_forest([targets]))
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_path, dtype=torch.float32)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    inputs = pack.model_inputs("bool")
    for _ in range(120):
        loss = -pack.token_logprobs(model(**inputs).logits)[pack.loss_mask].mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    out = tmp_path_factory.mktemp("tool-model")
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.mark.sandbox
def test_a_branched_training_step_through_the_custom_harness(tool_model: Path, tmp_path: Path) -> None:
    """trainer.rollout() samples roots then branches (bwrap, in-process HF backend), train_step updates on their tree."""
    cfg = make_config(
        tmp_path,
        branching=True,
        num_generations=2,
        branch_points=2,
        pairs_per_step=1,
        tasks="say-digits",
        max_completion_length=40,
        temperature=0.7,
        learning_rate=1e-2,
    )
    trainer = TreeGRPOTrainer(cfg, tool_model)
    try:
        batch = trainer.rollout()
        [group] = batch.groups
        assert group.tree is not None and sum(group.statuses.values()) == 4, group.statuses  # 2 roots + 2 branches
        replayed = [ref for ref, info in group.tree.calls.items() if not info.trainable]
        assert replayed, "no branch replayed a call"
        slots, rollouts = trainer.slots(batch)
        assert sum(len(s.pair_token) for s in slots) == group.tree.num_trainable  # each token trained once
        sampled = sum(info.completion_len for info in group.tree.calls.values() if info.trainable)
        assert batch.metrics["generated_tokens"] >= sampled  # filters may drop dead calls, never add tokens
        metrics = trainer.train_step(batch)
    finally:
        trainer.close()
    assert metrics["optimizer_step"] == 1.0 and metrics["policy_version"] == 1.0
    assert metrics["mismatch"] < 1e-3  # the replayed ids sit on the root's sampled tokens, logprobs and all
    assert metrics["trainable_tokens"] == group.tree.num_trainable
