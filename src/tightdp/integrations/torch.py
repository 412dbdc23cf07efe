"""PyTorch training loop with per-example privacy accounting and filtering (Koskela et al. 2023, Alg. 1, Sec. 5).

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
from typing import Any

import numpy as np

try:
    import torch
    from torch.func import functional_call, grad, vmap
except ImportError as exc:  # pragma: no cover - exercised only without torch
    raise ImportError("tightdp.integrations.torch needs PyTorch: pip install torch==2.13.0") from exc

from .._types import FloatArray
from .._validation import check_count, check_delta, check_epsilon
from ..individual import IndividualAccountant

__all__ = ["per_sample_gradients", "per_sample_grad_norms", "IndividualDPTrainer"]

_NORM_MARGIN = 1.0 + 1e-5  # relative rounding margin between the recorded and the clipped norms

#: ``loss_fn(output, target)``: the loss of a batch (here a batch of one example), a scalar tensor
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def per_sample_gradients(
    model: torch.nn.Module, loss_fn: LossFn, x: torch.Tensor, y: torch.Tensor
) -> dict[str, torch.Tensor]:
    """Gradients of ``loss_fn(model(x_i), y_i)`` for every ``i`` (leading batch dimension).

    Parameters
    ----------
    model : torch.nn.Module
        The model; the gradients are those of its parameters that require a gradient.
    loss_fn : callable
        ``loss_fn(output, target)``, called on batches of one example.
    x : torch.Tensor
        Inputs, batch dimension first.
    y : torch.Tensor
        Targets, batch dimension first (the same length as ``x``).

    Returns
    -------
    dict of str to torch.Tensor
        ``{parameter name: per-example gradients}``, each with the batch dimension first.

    Raises
    ------
    RuntimeError
        From ``torch.func`` for inputs the model or loss cannot take (e.g. mismatched batch lengths).
    """
    params = {k: v.detach() for k, v in model.named_parameters() if v.requires_grad}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def loss_one(p: dict[str, torch.Tensor], xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        out = functional_call(model, (p, buffers), (xi.unsqueeze(0),))
        return loss_fn(out, yi.unsqueeze(0))

    grads: dict[str, torch.Tensor] = vmap(grad(loss_one), in_dims=(None, 0, 0))(params, x, y)
    return grads


def _norms(grads: dict[str, torch.Tensor]) -> torch.Tensor:
    """Per-sample L2 norms, accumulated in float64 (a float32 sum of a million squares can be off by
    far more than the accountant's rounding margin)."""
    sq: torch.Tensor | None = None
    for g in grads.values():
        s = g.reshape(g.shape[0], -1).double().pow(2).sum(dim=1)
        sq = s if sq is None else sq + s
    if sq is None:
        raise ValueError("model: no parameter requires a gradient")
    return sq.sqrt()


def per_sample_grad_norms(
    model: torch.nn.Module, loss_fn: LossFn, x: torch.Tensor, y: torch.Tensor, *, chunk: int = 1024
) -> FloatArray:
    """L2 norms of the per-sample gradients, computed in chunks.

    Parameters
    ----------
    model : torch.nn.Module
        The model.
    loss_fn : callable
        ``loss_fn(output, target)``, called on batches of one example.
    x : torch.Tensor
        Inputs, batch dimension first.
    y : torch.Tensor
        Targets, batch dimension first.
    chunk : int, default 1024
        Examples per ``vmap`` call, >= 1.

    Returns
    -------
    ndarray of float64
        One norm per example (accumulated in float64).

    Raises
    ------
    ValueError
        If ``chunk`` is not a whole number >= 1, or no parameter of ``model`` requires a gradient.
    RuntimeError
        From ``torch.func`` for inputs the model or loss cannot take.

    References
    ----------
    Koskela et al. 2023 (individual accounting from per-example gradient norms).
    """
    chunk = check_count("chunk", chunk)
    out: list[torch.Tensor] = []
    for s in range(0, x.shape[0], chunk):
        out.append(_norms(per_sample_gradients(model, loss_fn, x[s : s + chunk], y[s : s + chunk])).detach())
    norms: FloatArray = torch.cat(out).double().cpu().numpy() if out else np.zeros(0)
    return norms


class IndividualDPTrainer:
    """DP-SGD (Poisson sampling) / DP-GD (``sampling_rate = 1``) with per-example accounting.

    Each ``step(x, y)`` takes the *whole* training set (``N`` examples, in the
    accountant's order):

    1. computes every example's gradient norm at the current model (examples
       not computed would count as the worst case);
    2. if ``budget=(epsilon, delta)`` is set, asks ``accountant.active`` which
       examples may take part (Koskela et al. 2023, Alg. 1 with the coming step's norms for DP-GD;
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

    Parameters
    ----------
    model : torch.nn.Module
        The model trained.
    loss_fn : callable
        ``loss_fn(output, target)``, called on batches of one example.
    optimizer : torch.optim.Optimizer
        The optimizer of ``model``'s parameters; it steps on the noisy mean gradient.
    accountant : IndividualAccountant
        The per-example accountant over the examples passed to ``step`` (noise multiplier, clip norm and
        sampling rate are its options).
    budget : tuple of float, optional
        ``(epsilon, delta)``: filter the examples whose budget is spent.
    seed : int, optional
        Seed of the Poisson draws and the noise (default: fresh entropy).
    data_parallel : bool, default False
        Sum the clipped gradients over the ranks of an initialised ``torch.distributed`` process group.

    Raises
    ------
    ValueError
        If ``accountant`` is not an ``IndividualAccountant``, ``budget`` is not a valid ``(epsilon, delta)`` pair,
        ``data_parallel`` is not a bool, or ``data_parallel=True`` without an initialised process group.

    References
    ----------
    Koskela et al. 2023, Alg. 1 and Sec. 5 (individual accounting and filtering).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        loss_fn: LossFn,
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
        entropy = np.random.SeedSequence().entropy if seed is None else None
        self._gen = torch.Generator().manual_seed(
            int(seed) if seed is not None else int(entropy) % (2**63)  # type: ignore[arg-type]  # an int when drawn
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

    def step(self, x: torch.Tensor, y: torch.Tensor) -> dict[str, Any]:
        """One training step on all the accountant's examples (the class docstring's steps 1-4).

        Parameters
        ----------
        x : torch.Tensor
            Inputs of all ``N`` examples, in the accountant's order.
        y : torch.Tensor
            Their targets.

        Returns
        -------
        dict
            ``active`` (examples not filtered), ``batch`` (examples sampled and used) and ``norms`` (every
            example's gradient norm, float64 numpy array).

        Raises
        ------
        ValueError
            If ``x`` or ``y`` does not hold all ``N`` examples.

        References
        ----------
        Koskela et al. 2023, Alg. 1 and Sec. 5.
        """
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
