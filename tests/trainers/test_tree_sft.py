"""Tree SFT: the detached-trunk forward equals the full tree forward, expert replays through the real
custom harness become a dataset, and SFT steps on it lower the loss of a real tiny model."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from clawgym_env._sync import run_sync
from clawgym_env.capture.records import CallRecord
from clawgym_env.errors import ConfigError
from clawgym_env.tree import build_forest, pack_trees
from trainers.tree_sft.config import TreeSFTConfig
from trainers.tree_sft.forward import TrunkCache, shared_prefix_len, tree_logprobs


def _episodes(trunk: int, n: int, seed: int = 0) -> list[list[CallRecord]]:
    g = torch.Generator().manual_seed(seed)
    system = torch.randint(10, 500, (trunk,), generator=g).tolist()
    eps = []
    for e in range(n):
        user, comp, tool = (torch.randint(10, 500, (k,), generator=g).tolist() for k in (20, 8, 5))
        p0 = system + user
        eps.append(
            [
                CallRecord(
                    session_id=f"s{e}", call_index=0, dialect="openai-chat", prompt_ids=p0, completion_ids=comp, logprobs=[-1.0] * 8
                ),
                CallRecord(
                    session_id=f"s{e}",
                    call_index=1,
                    dialect="openai-chat",
                    prompt_ids=p0 + comp + tool,
                    completion_ids=[7, 8, 9],
                    logprobs=[-1.0] * 3,
                ),
            ]
        )
    return eps


def test_detached_trunk_forward_matches_the_full_tree_forward(tiny_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_path, attn_implementation="sdpa")
    pack = pack_trees(build_forest(_episodes(700, 3)))[0]
    assert shared_prefix_len(pack) == 700  # the trunk ends where the episodes branch
    full = pack.token_logprobs(model(**pack.model_inputs("bool")).logits[0].float())
    m = pack.loss_mask
    for detach in (True, False):
        fast = tree_logprobs(model, pack, detach_prefix=detach)
        assert torch.allclose(full[m], fast[m], atol=1e-5)
        assert (fast[~m] == 0).all()
    model.zero_grad()
    tree_logprobs(model, pack)[m].sum().backward()
    assert model.get_decoder().layers[-1].mlp.up_proj.weight.grad.abs().sum() > 0


def test_packs_of_a_step_share_one_trunk_forward_with_the_same_values_and_gradients(tiny_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_path, attn_implementation="sdpa")
    packs = pack_trees(build_forest(_episodes(700, 6)), 700 + 80)
    assert len(packs) >= 3 and {shared_prefix_len(p) for p in packs} == {700}

    def run(trunk: TrunkCache | None) -> tuple[list[torch.Tensor], torch.Tensor]:
        model.zero_grad()
        values = []
        for p in packs:  # backward per pack before the next forward, as the trainer does
            lp = tree_logprobs(model, p, trunk=trunk)
            lp[p.loss_mask].sum().backward()
            values.append(lp.detach())
        return values, model.get_decoder().layers[-1].mlp.up_proj.weight.grad.clone()

    alone, grad_alone = run(None)
    trunk = TrunkCache()
    shared, grad_shared = run(trunk)
    assert trunk.forwards == 1  # the trunk ran once for all packs
    for a, b in zip(alone, shared, strict=True):
        assert torch.allclose(a, b, atol=1e-5)
    assert torch.allclose(grad_alone, grad_shared, atol=1e-5) and grad_shared.abs().sum() > 0
    for seed, forwards in ((0, 1), (1, 2)):  # a prefix of the kept trunk reuses it; another trunk is forwarded
        other = pack_trees(build_forest(_episodes(300, 2, seed)))[0]
        assert torch.allclose(
            tree_logprobs(model, other, trunk=trunk)[other.loss_mask], tree_logprobs(model, other)[other.loss_mask], atol=1e-5
        )
        assert trunk.forwards == forwards


def test_frozen_bottom_kept_per_pack_gives_the_full_forward_values_and_top_gradients(tiny_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    from trainers.tree_sft.frozen import FrozenBottomForward

    model = AutoModelForCausalLM.from_pretrained(tiny_path, attn_implementation="sdpa")
    model.get_decoder().layers[0].requires_grad_(False)
    top = model.get_decoder().layers[-1].self_attn.q_proj.weight
    frozen, trunk = FrozenBottomForward(model, 1), TrunkCache()
    for key, p in enumerate(pack_trees(build_forest(_episodes(700, 4)), 700 + 60)[:2]):
        model.zero_grad()
        want = tree_logprobs(model, p)
        want[p.loss_mask].sum().backward()
        g_want = top.grad.clone()
        for visit in range(2):  # the second visit reads the kept bottom outputs
            model.zero_grad()
            got = frozen.logprobs(key, p, trunk)
            got[p.loss_mask].sum().backward()
            assert torch.allclose(want, got, atol=1e-5) and torch.allclose(g_want, top.grad, atol=1e-5)
    assert len(frozen.kept) == 2 and trunk.forwards == 1  # each pack's trunk runs into its episode: the common 700 reused


def test_pack_nll_equals_per_episode_sft_when_episodes_repeat_a_completion(tiny_path: Path) -> None:
    """A template whose instruction never varies gives k identical episodes: one path of the tree, k examples of SFT."""
    from transformers import AutoModelForCausalLM

    from trainers.tree_sft.trainer import pack_nll

    model = AutoModelForCausalLM.from_pretrained(tiny_path, attn_implementation="sdpa")
    same, other = _episodes(200, 2, seed=3)  # one system prompt; `other` stands for a template with varying parameters
    episodes = [other, *([c.model_copy(update={"session_id": f"dup{i}"}) for c in same] for i in range(4))]

    def per_call() -> tuple[torch.Tensor, torch.Tensor]:  # TRL's SFT: mean NLL over every example's completion tokens
        model.zero_grad()
        nll, n = torch.zeros(()), 0
        for ep in episodes:
            for c in ep:
                ids = torch.tensor([c.prompt_ids + c.completion_ids])
                lp = model(ids).logits[0, len(c.prompt_ids) - 1 : -1].float().log_softmax(-1)
                nll = nll - lp.gather(1, torch.tensor(c.completion_ids)[:, None]).sum()
                n += len(c.completion_ids)
        (nll / n).backward()
        return (nll / n).detach(), model.get_decoder().layers[-1].mlp.up_proj.weight.grad.clone()

    def tree() -> tuple[torch.Tensor, torch.Tensor, int]:
        model.zero_grad()
        packs = pack_trees(build_forest(episodes), 200 + 60)
        parts = [pack_nll(p, tree_logprobs(model, p)) for p in packs]
        n = sum(k for _, k in parts)
        loss = sum(v for v, _ in parts) / n
        loss.backward()
        return loss.detach(), model.get_decoder().layers[-1].mlp.up_proj.weight.grad.clone(), sum(p.num_loss_tokens for p in packs)

    want, g_want = per_call()
    got, g_got, unique = tree()
    assert unique < sum(len(c.completion_ids) for ep in episodes for c in ep)  # the four repeats are one path
    assert torch.allclose(want, got, atol=1e-5), (want, got)
    assert torch.allclose(g_want, g_got, atol=1e-6) and g_got.abs().sum() > 0


def test_config_refuses_what_tree_sft_does_not_do(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="dataset_path"):
        TreeSFTConfig(output_dir=str(tmp_path))
    with pytest.raises(ConfigError, match="loss_type"):
        TreeSFTConfig(output_dir=str(tmp_path), dataset_path="x", loss_type="dft")
    with pytest.raises(ConfigError, match="packing"):
        TreeSFTConfig(output_dir=str(tmp_path), dataset_path="x", packing=False)
    with pytest.raises(ConfigError, match="frozen_layers"):
        TreeSFTConfig(output_dir=str(tmp_path), dataset_path="x", frozen_layers=-1)


@pytest.mark.sandbox
def test_expert_replay_through_custom_becomes_a_dataset_sft_lowers_its_loss(tiny_path: Path, tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    from clawgym_env.task import load_suite
    from trainers.tree_sft.expert import capture_experts, load_episodes, write_dataset
    from trainers.tree_sft.trainer import TreeSFTTrainer

    tasks = load_suite("procgen-train").select(["write-number-0[12]", "copy-file-01"])
    tok = AutoTokenizer.from_pretrained(tiny_path)
    results = run_sync(capture_experts(tasks, ["custom"], tok, concurrency=3))
    assert [r.score for r in results] == [1.0, 1.0, 1.0]
    counts = write_dataset(results, tmp_path / "ds")
    assert counts == {"kept/custom": 3}
    episodes = load_episodes(tmp_path / "ds")
    assert sorted(e[0] for e in episodes) == sorted(t.full_id for t in tasks)
    first = episodes[0][2][0]
    assert first.prompt_ids and first.completion_ids and "<tool_call>" in tok.decode(first.completion_ids)

    cfg = TreeSFTConfig(
        output_dir=str(tmp_path / "out"),
        dataset_path=str(tmp_path / "ds"),
        max_steps=12,
        learning_rate=1e-2,
        packs_per_step=1,
        use_cpu=True,
        logging_steps=100,
    )
    trainer = TreeSFTTrainer(cfg, tiny_path)
    history = trainer.train()
    assert len(history) == 12 and history[0]["tokens"] > 0
    assert history[-1]["loss"] < history[0]["loss"] - 0.5
    saved = trainer.save()
    assert (saved / "config.json").is_file() and (saved / "tokenizer.json").is_file()

    # frozen_layers: the embeddings (tied head) and the bottom layer keep their weights, the rest train
    layers = len(trainer.model.get_decoder().layers)
    with pytest.raises(ConfigError, match="decoder layers"):
        TreeSFTTrainer(
            TreeSFTConfig(output_dir=str(tmp_path / "f"), dataset_path=str(tmp_path / "ds"), frozen_layers=layers, use_cpu=True), tiny_path
        )
    frozen = TreeSFTTrainer(
        TreeSFTConfig(
            output_dir=str(tmp_path / "f"),
            dataset_path=str(tmp_path / "ds"),
            max_steps=2,
            learning_rate=1e-2,
            packs_per_step=1,
            use_cpu=True,
            frozen_layers=1,
        ),
        tiny_path,
    )
    start = {n: p.detach().clone() for n, p in frozen.model.named_parameters()}
    frozen.train()
    changed = {n for n, p in frozen.model.named_parameters() if not torch.equal(p, start[n])}
    assert any(".layers.1." in n for n in changed), changed
    assert not any(".layers.0." in n or "embed" in n or "lm_head" in n for n in changed), changed
