"""The Rényi-DP accountant: an upper bound on epsilon (never a lower bound).

RDP composes by adding curves order by order (Mironov 2017, Prop. 1); the
composed curve is converted to (epsilon, delta) with the conversion of
Canonne, Kamath, Steinke (2020), Prop. 12, minimised over a grid of orders.
The curves of the individual mechanisms are in ``_rdp_math`` (with their
references). Answers have ``kind="bound"``, ``upper == estimate`` and
``lower=None``: RDP cannot certify that a mechanism is *less* private.

Supported: ``Gaussian``, ``Laplace``, ``RandomizedResponse``,
``PoissonSampled`` (all relations; substitute via WBK 2019 Thm 9) and
``SampledWithoutReplacement`` (WBK 2019 Thm 9). Not supported (no tight RDP
curve here): ``PureDP``, ``ApproximateDP`` (infinite RDP), ``SampledWithReplacement``.
"""

from __future__ import annotations

import math
import warnings
from functools import lru_cache
from typing import Any

import numpy as np

from .._caches import register as _register_cache
from .._types import ArrayLike, FloatArray
from .._validation import check_real_array
from ..bounds import Bounds
from ..mechanisms import Gaussian, Laplace, Mechanism, PoissonSampled, RandomizedResponse, SampledWithoutReplacement
from . import _rdp_math as rm
from .base import Accountant

__all__ = ["RDPAccountant", "rdp_curve"]


def rdp_curve(mechanism: Mechanism, orders: FloatArray) -> FloatArray:
    """An upper bound on the RDP of one run of ``mechanism`` at each order, valid for both
    neighbouring directions of its relation.

    Parameters
    ----------
    mechanism : Mechanism
        Gaussian, Laplace, randomized response, or a subsampled one of them.
    orders : array_like
        Rényi orders ``> 1``.

    Returns
    -------
    numpy.ndarray
        The RDP bound at each order.

    Raises
    ------
    TypeError
        A mechanism without an RDP bound here.

    References
    ----------
    Mironov 2017, Table II (Gaussian, Laplace, randomized response); Mironov, Talwar, Zhang 2019
    (subsampled Gaussian).
    """
    return _rdp_curve_cached(mechanism, tuple(float(a) for a in np.asarray(orders, float)))


@_register_cache
@lru_cache(maxsize=256)
def _rdp_curve_cached(mechanism: Mechanism, orders: tuple[float, ...]) -> FloatArray:
    a = np.asarray(orders, float)
    if isinstance(mechanism, Gaussian):
        out = rm.gaussian_rdp(mu=mechanism.mu, orders=a)
    elif isinstance(mechanism, Laplace):
        out = rm.laplace_rdp(r=mechanism.sensitivity / mechanism.scale, orders=a)
    elif isinstance(mechanism, RandomizedResponse):
        p, k = mechanism.noise_parameter, mechanism.num_buckets
        hi, lo = 1.0 - p + p / k, p / k
        # P favours value x, Q favours y; the remaining k - 2 outputs have equal mass
        probs_p = np.array([hi, lo, (k - 2) * lo])
        probs_q = np.array([lo, hi, (k - 2) * lo])
        out = rm.discrete_rdp(p=probs_p, q=probs_q, orders=a)
    elif isinstance(mechanism, PoissonSampled):
        g: Gaussian = mechanism.mechanism  # type: ignore[assignment]
        sigma = g.noise_multiplier / g.sensitivity
        if mechanism.relation == "substitute":
            out = rm.without_replacement_gaussian_rdp(q=mechanism.sampling_rate, mu_base=2.0 / sigma, orders=a)
        else:
            out = rm.poisson_gaussian_rdp(q=mechanism.sampling_rate, sigma=sigma, orders=a)
    elif isinstance(mechanism, SampledWithoutReplacement):
        g = mechanism.mechanism  # type: ignore[assignment]
        out = rm.without_replacement_gaussian_rdp(
            q=mechanism.sampling_rate, mu_base=2.0 * g.sensitivity / g.noise_multiplier, orders=a
        )
    else:
        raise TypeError(f"no RDP curve for {type(mechanism).__name__}")
    out = np.asarray(out, float)
    out.setflags(write=False)
    return out


class RDPAccountant(Accountant):
    """Rényi-DP (moments) accountant: ``upper`` is a proven bound, ``lower`` is ``None``.

    A ``UserWarning`` is issued when the best order is at either end of the grid (the answer is still a
    valid bound, just possibly a loose one).

    Parameters
    ----------
    orders : array_like, optional
        The grid of Rényi orders, each finite and ``> 1``. The default spans 1.001 to 1e5.

    Raises
    ------
    ValueError
        An order that is not finite or not above 1.

    References
    ----------
    Mironov 2017 (Rényi DP), Prop. 1 (composition), Prop. 3 (conversion); Canonne, Kamath, Steinke 2020,
    Prop. 12 (the tighter conversion).
    """

    name = "rdp"
    kind = "bound"

    def __init__(self, *, orders: ArrayLike | None = None) -> None:
        super().__init__()
        if orders is None:
            self._orders = rm.DEFAULT_ORDERS.copy()
            self._custom = False
        else:
            arr = check_real_array("orders", orders, low=1.0, low_open=True)
            if not np.all(np.isfinite(arr)):
                raise ValueError("orders must be finite")
            self._orders = np.unique(arr)
            self._custom = True
        self._rdp_cache: FloatArray | None = None

    def options(self) -> dict[str, Any]:
        """The constructor's keyword arguments (JSON-ready), as ``to_dict`` stores them.

        Returns
        -------
        dict
            Option name to value; ``type(self)(**options())`` is an accountant with the same settings.
        """
        return {"orders": self._orders.tolist()} if self._custom else {}

    @property
    def orders(self) -> FloatArray:
        """A copy of the Rényi orders the curves are evaluated at."""
        return self._orders.copy()

    def _supports(self, mechanism: Mechanism) -> bool:
        if isinstance(mechanism, (PoissonSampled, SampledWithoutReplacement)):  # the subsampled Gaussian's RDP only
            return isinstance(mechanism.mechanism, Gaussian)
        return isinstance(mechanism, (Gaussian, Laplace, RandomizedResponse))

    def _ledger_changed(self) -> None:
        self._rdp_cache = None

    def rdp(self) -> FloatArray:
        """The composed RDP curve on ``orders`` (sum over the ledger, Mironov 2017, Prop. 1).

        Returns
        -------
        numpy.ndarray
            The RDP of the whole ledger at each order (an upper bound).
        """
        if self._rdp_cache is None:
            total = np.zeros_like(self._orders)
            for mech, count in self.ledger:
                total = total + count * rdp_curve(mech, self._orders)
            self._rdp_cache = total
        return self._rdp_cache

    def _edge_warning(self, order: float) -> None:
        if order == self._orders[0] or order == self._orders[-1]:
            warnings.warn(
                f"the optimal Rényi order {order:g} is at the edge of the order grid "
                f"[{self._orders[0]:g}, {self._orders[-1]:g}]; the RDP bound may be loose "
                "(extend `orders`)",
                UserWarning,
                stacklevel=3,
            )

    def _epsilon(self, delta: float) -> Bounds:
        rdp = self.rdp()
        eps, order = rm.epsilon_from_rdp(orders=self._orders, rdp=rdp, delta=delta)
        details: dict[str, Any] = {"order": order, "conversion": "Canonne-Kamath-Steinke 2020 Prop. 12"}
        if math.isinf(eps):
            details["note"] = "the Rényi divergence is infinite at every order (e.g. noiseless randomized response)"
        elif eps > 0:
            self._edge_warning(order)
        return Bounds(None, eps, eps, "epsilon", "bound", details)

    def _delta(self, epsilons: FloatArray) -> Bounds:
        rdp = self.rdp()
        delta, orders = rm.delta_from_rdp(orders=self._orders, rdp=rdp, epsilons=epsilons)
        at_edge = (delta < 1.0) & ((orders == self._orders[0]) | (orders == self._orders[-1]))
        if np.any(at_edge):
            self._edge_warning(float(orders[np.argmax(at_edge)]))
        details: dict[str, Any] = {"order": orders, "conversion": "Canonne-Kamath-Steinke 2020 Prop. 12"}
        return Bounds(None, delta, delta, "delta", "bound", details)
