"""PyTorch training loop with per-example privacy accounting and filtering (000 Alg. 1, Sec. 5).

Per-sample gradients come from ``torch.func`` (``functional_call`` + ``vmap`` +
``grad``); their norms feed an ``IndividualAccountant`` and, when a budget is
given, the accountant's filter masks the examples whose budget is spent out of
the noisy clipped gradient sum (their recorded norm is then 0: no privacy
loss). torch is imported when this module is imported; nothing else in
tightdp imports it.

Install: ``pip install torch==2.13.0`` (CPU wheel), or the ``torch`` extra.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

try:
    import torch
    from torch.func import functional_call, grad, vmap
except ImportError as exc:  # pragma: no cover - exercised only without torch
    raise ImportError("tightdp.integrations.torch needs PyTorch: pip install torch==2.13.0") from exc

from .._validation import check_delta, check_epsilon
from ..individual import IndividualAccountant

__all__ = ["per_sample_gradients", "per_sample_grad_norms", "IndividualDPTrainer"]

_NORM_MARGIN = 1.0 + 1e-5  # relative rounding margin between the recorded and the clipped norms


def per_sample_gradients(
    model: torch.nn.Module, loss_fn: Callable, x: torch.Tensor, y: torch.Tensor
) -> dict[str, torch.Tensor]:
    """Gradients of ``loss_fn(model(x_i), y_i)`` for every ``i`` (leading batch dimension)."""
    params = {k: v.detach() for k, v in model.named_parameters() if v.requires_grad}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def loss_one(p, xi, yi):
        out = functional_call(model, (p, buffers), (xi.unsqueeze(0),))
        return loss_fn(out, yi.unsqueeze(0))

    return vmap(grad(loss_one), in_dims=(None, 0, 0))(params, x, y)


def _norms(grads: dict[str, torch.Tensor]) -> torch.Tensor:
    """Per-sample L2 norms, accumulated in float64 (a float32 sum of a million squares can be off by
    far more than the accountant's rounding margin)."""
    sq = None
    for g in grads.values():
        s = g.reshape(g.shape[0], -1).double().pow(2).sum(dim=1)
        sq = s if sq is None else sq + s
    return sq.sqrt()


def per_sample_grad_norms(
    model: torch.nn.Module, loss_fn: Callable, x: torch.Tensor, y: torch.Tensor, *, chunk: int = 1024
) -> np.ndarray:
    """L2 norms of the per-sample gradients (float64 numpy array), computed in chunks."""
    out = []
    for s in range(0, x.shape[0], chunk):
        out.append(_norms(per_sample_gradients(model, loss_fn, x[s : s + chunk], y[s : s + chunk])).detach())
    return torch.cat(out).double().cpu().numpy() if out else np.zeros(0)


class IndividualDPTrainer:
    """DP-SGD (Poisson sampling) / DP-GD (``sampling_rate = 1``) with per-example accounting.

    Each ``step(x, y)`` takes the *whole* training set (``N`` examples, in the
    accountant's order):

    1. computes every example's gradient norm at the current model (examples
       not computed would count as the worst case);
    2. if ``budget=(epsilon, delta)`` is set, asks ``accountant.active`` which
       examples may take part (000 Alg. 1 with the coming step's norms for DP-GD;
       the approximative Sec. 5 filter for DP-SGD, see ``IndividualAccountant.active``);
    3. samples the batch (each active example with probability ``sampling_rate``),
       sums the clipped per-sample gradients, adds ``N(0, (sigma C)^2)`` noise,
       divides by the expected batch size ``sampling_rate * N`` and takes an
       optimizer step;
    4. records the step: active examples with their norms, filtered ones with 0.

    **Data parallel** (``data_parallel=True``, ``torch.distributed`` initialised, e.g. gloo on CPU):
    every rank passes *its own* examples to ``step`` and an accountant over exactly those examples
    (typically ``ShardedLedger.shard(rank)`` of a ledger sharded like the data). Steps 1-3 run on
    the rank's examples (per-example norms, filter and Poisson draws are per example, so nothing
    is exchanged for them); the clipped sums are summed over ranks with ``all_reduce``, rank 0 adds
    the noise ``N(0, (sigma C)^2)`` once, and the divisor is ``sampling_rate`` times the total
    number of examples. Each rank records its own shard; ``ShardedLedger.save_shard`` on every
    rank and ``write_manifest`` on rank 0 (after a barrier) save the whole ledger.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        loss_fn: Callable,
        optimizer: torch.optim.Optimizer,
        accountant: IndividualAccountant,
        *,
        budget: tuple[float, float] | None = None,
        seed: int | None = None,
        data_parallel: bool = False,
    ) -> None:
        if not isinstance(accountant, IndividualAccountant):
            raise ValueError("accountant must be an IndividualAccountant")
        self.model, self.loss_fn, self.optimizer, self.accountant = model, loss_fn, optimizer, accountant
        if budget is not None:
            if not (isinstance(budget, (tuple, list)) and len(budget) == 2):
                raise ValueError(f"budget must be a pair (epsilon, delta), got {budget!r}")
            budget = (check_epsilon("budget epsilon", budget[0]), check_delta("budget delta", budget[1]))
        self.budget = budget
        self._gen = torch.Generator().manual_seed(
            int(seed) if seed is not None else int(np.random.SeedSequence().entropy % (2**63))
        )
        opts = accountant.options()
        self.sigma, self.clip, self.q = opts["noise_multiplier"], opts["clip_norm"], opts["sampling_rate"]
        if not isinstance(data_parallel, bool):
            raise ValueError(f"data_parallel must be True or False, got {data_parallel!r}")
        self.data_parallel = data_parallel
        self.rank, self.total_examples = 0, accountant.num_examples
        if data_parallel:
            import torch.distributed as dist

            if not (dist.is_available() and dist.is_initialized()):
                raise ValueError("data_parallel=True needs an initialised torch.distributed process group")
            self.rank = dist.get_rank()
            n = torch.tensor([accountant.num_examples], dtype=torch.int64)
            dist.all_reduce(n)
            self.total_examples = int(n.item())

    def step(self, x: torch.Tensor, y: torch.Tensor) -> dict:
        n = self.accountant.num_examples
        if x.shape[0] != n or y.shape[0] != n:
            raise ValueError(f"x and y must hold all {n} examples, got {x.shape[0]} and {y.shape[0]}")
        norms = per_sample_grad_norms(self.model, self.loss_fn, x, y)
        if self.budget is not None:
            nxt = norms if self.q == 1.0 else None
            active = self.accountant.active(*self.budget, grad_norms=nxt)
        else:
            active = np.ones(n, dtype=bool)
        if self.q < 1.0:
            draw = torch.rand(n, generator=self._gen).numpy() < self.q
        else:
            draw = np.ones(n, dtype=bool)
        use = np.nonzero(active & draw)[0]
        params = [p for p in self.model.parameters() if p.requires_grad]
        names = [k for k, p in self.model.named_parameters() if p.requires_grad]
        summed = [torch.zeros_like(p) for p in params]
        if use.size:
            idx = torch.as_tensor(use)
            g = per_sample_gradients(self.model, self.loss_fn, x[idx], y[idx])
            nrm = _norms(g)
            scale = torch.clamp(self.clip / (nrm + 1e-12), max=1.0).to(next(iter(g.values())).dtype)
            for j, k in enumerate(names):
                gk = g[k]
                summed[j] = (gk * scale.view(-1, *([1] * (gk.dim() - 1)))).sum(dim=0)
        denom = max(self.q * self.total_examples, 1.0)
        for p, s in zip(params, summed):
            if self.rank == 0:  # the noise is added once (data parallel: on rank 0, before the sum)
                s = s + torch.randn(p.shape, generator=self._gen, dtype=p.dtype) * (self.sigma * self.clip)
            if self.data_parallel:
                import torch.distributed as dist

                s = s.contiguous()
                dist.all_reduce(s)  # sum of every rank's clipped gradients (+ rank 0's noise)
            p.grad = s / denom
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        # the norms were computed in a separate pass from the gradients that were clipped (other batch
        # shapes can round differently): record them a little high, on the safe side
        self.accountant.record_step(np.where(active, norms * _NORM_MARGIN, 0.0))
        return {"active": int(active.sum()), "batch": int(use.size), "norms": norms}
