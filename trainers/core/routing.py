"""Routing replay (R3): the trainer's forward uses the experts the rollout engine routed each token to.

A mixture-of-experts layer picks ``top_k`` experts per token from its router's logits. The sampler
and the trainer can pick differently for the same token (kernels, batch shapes, precision), and then
the trainer's logprobs are those of another network than the one that sampled: the importance
weights drift and blow up. Replay removes that: forward hooks on every router (``clawgym_env.models.
moe``) replace the experts it picked by the recorded ones (``PackedTree.routing``, from the capture;
-1 rows, never forwarded by the engine, keep the trainer's own pick).

Gate weights. The weights that mix the replayed experts' outputs are recomputed from the trainer's
own router logits over those experts, with the model's own rule (softmax over all experts, gathered
at the replayed ones, renormalised where the model renormalises): ``probs.gather(1, replayed)``. So
the router keeps a gradient through the gate weights, and where the trainer would have picked the
same experts the forward is its unreplayed forward bit for bit. This is the convention of the
Megatron-based implementations (verl's router replay, slime's routing replay: both gather the
trainer's scores at the replayed indices); replaying the sampler's gate *values* instead would cut
the router off from the loss. The forced choice itself carries no gradient, as top-k never does.

The load-balancing auxiliary loss (TRL's ``router_aux_loss_coef``, Switch-style as transformers
computes it) is taken over the experts actually used (the replayed ones), each token weighted by the
number of calls whose path holds it, so on a packed tree it equals the loss over the same calls laid
out one row per call.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

import torch

from clawgym_env.errors import ConfigError
from clawgym_env.models.moe import MoeRouter, gate_weights, moe_routers
from clawgym_env.tree import PackedTree
from trainers.core.distributed import reduce_totals
from trainers.core.slots import PackSlot, mismatch_metrics

if TYPE_CHECKING:
    from trainers.core.engine import TreeTrainerBase

__all__ = ["RoutingReplay", "aux_loss", "load_balancing_loss", "router_aux_coef", "unreplayed_metrics"]


class RoutingReplay:
    """Hooks on one model's routers: replay the routing ``load`` gave, tally where the router would differ, keep logits."""

    def __init__(self, routers: list[MoeRouter]) -> None:
        self.routers = routers
        self.num_experts = routers[0].num_experts
        self.top_k = routers[0].top_k
        self._routing: torch.Tensor | None = None
        self._replay = False
        self.logits: list[torch.Tensor | None] = [None] * len(routers)
        """The last forward's router logits per MoE layer ([rows, experts], with gradient)."""
        self.chosen: list[torch.Tensor | None] = [None] * len(routers)
        """The experts the last forward used per MoE layer ([rows, top_k])."""
        self._differs: torch.Tensor | None = None
        self.tally: dict[str, float] = defaultdict(float)
        """Counts since ``take_tally``: recorded tokens, and those whose trainer top-k differs in some layer / per layer."""
        for r in routers:
            r.module.register_forward_hook(self._hook(r))

    @classmethod
    def attach(cls, model: Any) -> RoutingReplay | None:
        """Replay hooks on ``model``'s routers, or None for a dense model."""
        routers = moe_routers(model)
        return cls(routers) if routers else None

    def load(self, routing: torch.Tensor | None, *, replay: bool) -> None:
        """The rollout's experts for the next forward's rows (``[rows, layers, top_k]``, -1 free), or None.

        ``replay``: use them; else only compare the router's own picks with them. The state stays until the next
        ``load``, so a backward that recomputes the forward (activation checkpointing) replays the same routing.
        """
        if routing is not None and tuple(routing.shape[1:]) != (len(self.routers), self.top_k):
            raise ConfigError(
                f"the captured routing has {tuple(routing.shape[1:])} (MoE layers, top-k) per token, the model "
                f"{(len(self.routers), self.top_k)}: the rollout ran another model than the trainer"
            )
        if routing is not None and int(routing.max()) >= self.num_experts:
            raise ConfigError(f"the captured routing names expert {int(routing.max())}; the model has {self.num_experts}")
        self._routing, self._replay, self._differs = routing, replay, None

    def take_tally(self) -> dict[str, float]:
        """The counts gathered since the last call (and reset them)."""
        self._count()
        out, self.tally = dict(self.tally), defaultdict(float)
        return out

    def _count(self) -> None:
        if self._differs is not None and self._routing is not None:
            known = (self._routing >= 0).all(-1).all(-1).to(self._differs.device)
            self.tally["tokens"] += float(known.sum())
            self.tally["differ"] += float((self._differs & known).sum())
            self._differs = None

    def _hook(self, router: MoeRouter) -> Any:
        def hook(module: Any, inputs: Any, output: Any) -> Any:
            logits, weights, experts = output
            rec = self._routing
            if rec is None:
                self.logits[router.layer], self.chosen[router.layer] = logits, experts
                return None
            want = rec[:, router.layer].to(experts.device)
            if want.shape[0] != experts.shape[0]:
                raise ConfigError(
                    f"routing replay: the forward routes {experts.shape[0]} rows, the pack's routing holds "
                    f"{want.shape[0]}; forward the whole pack (not a part of it) with routing replay"
                )
            free = want < 0
            with torch.no_grad():  # the router's own pick vs the rollout's, as sets
                known = ~free.any(-1)
                differs = (experts.sort(-1).values != want.sort(-1).values).any(-1) & known
                self.tally["layer_rows"] += float(known.sum())
                self.tally["layer_differ"] += float(differs.sum())
                self._differs = differs if self._differs is None else self._differs | differs
            if not self._replay:
                self.logits[router.layer], self.chosen[router.layer] = logits, experts
                return None
            chosen = torch.where(free, experts, want)
            self.logits[router.layer], self.chosen[router.layer] = logits, chosen
            return logits, gate_weights(router, logits, chosen), chosen

        return hook


def router_aux_coef(config_value: float | None, model: Any) -> float:
    """TRL's ``router_aux_loss_coef`` rule: None -> the model config's coefficient (0 if it declares none); a
    non-zero value on a model without router logits is refused; 0 disables the loss."""
    text = model.config.get_text_config()
    coef = getattr(text, "router_aux_loss_coef", 0.0) if config_value is None else config_value
    if config_value and not hasattr(text, "output_router_logits"):
        raise ConfigError(
            f"router_aux_loss_coef={config_value} but {type(model).__name__} is not a mixture-of-experts model "
            "with router logits: there is no load-balancing loss to weight; leave router_aux_loss_coef unset"
        )
    return float(coef) if hasattr(text, "output_router_logits") else 0.0


def load_balancing_loss(replay: RoutingReplay, token_weights: torch.Tensor) -> torch.Tensor:
    """Switch-style load balancing over the last forward's layers: ``E * sum_e f_e * P_e``, where ``f_e`` is the
    weighted share of (token, top-k slot) assignments to expert ``e`` and ``P_e`` the weighted mean router probability
    (transformers' ``load_balancing_loss_func`` with weights in place of its attention mask)."""
    e = replay.num_experts
    w = token_weights.float()
    count = torch.zeros(e, dtype=torch.float32, device=w.device)
    probs = torch.zeros(e, dtype=torch.float32, device=w.device)
    rows = w.new_zeros(())
    for logits, chosen in zip(replay.logits, replay.chosen, strict=True):
        if logits is None or chosen is None:
            raise ConfigError("load_balancing_loss: a MoE layer did not run in the last forward")
        wl = w.to(logits.device)
        count = count + torch.zeros(e, device=wl.device).scatter_add_(0, chosen.reshape(-1), wl.repeat_interleave(chosen.shape[-1]))
        probs = probs + (torch.softmax(logits.float(), dim=-1) * wl[:, None]).sum(0)
        rows = rows + wl.sum()
    if not float(rows):
        return probs.sum() * 0.0  # no token this pack owns (a stand-in): no loss, the graph kept
    return (count / rows * probs / rows).sum() * e


def aux_loss(trainer: TreeTrainerBase, pack: PackedTree) -> torch.Tensor:
    """The load-balancing loss of the policy's last forward (of ``pack``), each token weighted by the calls through it."""
    weights = pack.call_counts if pack.call_counts is not None else torch.ones(len(pack))
    return load_balancing_loss(trainer.routing_replays[id(trainer.model)], weights)


def unreplayed_metrics(trainer: TreeTrainerBase, slots: list[PackSlot]) -> dict[str, float]:
    """A MoE policy before its update, without replay: the share of tokens whose top-k differs from the rollout's in
    some layer (``routing/topk_disagree``; per layer ``routing/topk_disagree_layer``) and the trainer/sampler gap
    (``mismatch_unreplayed``; ``mismatch`` is the replayed gap). One forward per pack of this rank, without gradient."""
    replay = trainer.routing_replays.get(id(trainer.model))
    mine = trainer.my_slots(slots)[0]
    if replay is None or not trainer.config.log_unreplayed_mismatch or all(s.pack.routing is None for s in mine):
        return {}
    replay.take_tally()  # what earlier forwards counted
    pairs = []
    with torch.no_grad():
        for s in mine:
            replay.load(s.pack.routing, replay=False)
            pairs.append((s, trainer.pack_logprobs(trainer.model, s.pack)))
    tally = reduce_totals(trainer.accelerator, replay.take_tally())
    gap = mismatch_metrics(trainer.accelerator, pairs)
    return {
        "mismatch_unreplayed": gap.get("mismatch", 0.0),
        "routing/topk_disagree": tally.get("differ", 0.0) / max(1.0, tally.get("tokens", 0.0)),
        "routing/topk_disagree_layer": tally.get("layer_differ", 0.0) / max(1.0, tally.get("layer_rows", 0.0)),
    }
