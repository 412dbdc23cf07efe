"""Random allocation against the peers: pld-accounting 2.0 and random-allocation 1.0.5.

Reference values were produced by (delta = 1e-5, num_selected = 1)::

    PLD_accounting.gaussian_allocation_epsilon_range(delta=1e-5, sigma=s, num_steps=t, num_epochs=e,
                                                     epsilon_accuracy=0.01)            # (upper, lower)
    random_allocation.allocation_epsilon_decomposition(PrivacyParams(s, t, 1, e, delta=1e-5),
                                                       SchemeConfig(), Direction.BOTH)  # upper
    random_allocation.allocation_epsilon_RDP_DCO(...)                                   # upper
    random_allocation.random_allocation_scheme.lower_bound.allocation_epsilon_lower_bound(...)  # e = 1

pld-accounting realises the same PLD (Feldman & Shenfeld 2602.17284) and reports a dominating and a
dominated value, so both intervals contain the truth: they must intersect, and tightdp's
(``eps_error = 0.01``) is narrower. random-allocation's analytic values (2502.08202's decomposition and
RDP bounds) are upper bounds, and its lower bound (Chua et al.'s balls-and-bins estimate, one epoch)
a lower bound: tightdp's interval must sit between them.
"""

from __future__ import annotations

import pytest

from tightdp.schemes import allocation_epsilon

pytestmark = pytest.mark.peers

#: (sigma, t, epochs) -> pld-accounting (lower, upper), random-allocation decomposition, RDP_DCO, lower bound
PEERS = {
    (1.0, 10, 1): ((2.1869457976652007, 2.195369951976939), 3.380318549704409, 2.829567587037128, 2.1817186130844504),
    (2.0, 100, 1): (
        (0.17121610903711407, 0.1761080401931338),
        0.2961936865135096,
        0.4909947553033998,
        0.06241085756630559,
    ),
    (1.0, 196, 1): (
        (0.3897491421305917, 0.3964361714743999),
        0.6701221257393223,
        1.4211142043558707,
        0.3381986815859329,
    ),
    (0.8, 50, 1): ((1.925027981301928, 1.9337161610325415), 2.72228290671021, 2.9098307029386197, 1.922221230851378),
    (1.0, 10, 2): ((2.831209101570739, 2.83356673075856), None, 3.7539083187969613, None),
    (3.0, 1000, 1): (
        (0.028201814899850176, 0.03165871406553498),
        0.05048849863327782,
        0.13442427476981703,
        0.0035105010238641564,
    ),
}


@pytest.mark.parametrize("key", sorted(PEERS))
def test_interval_agrees_with_peers(key):
    sigma, t, epochs = key
    (p_lo, p_up), decomposition, rdp, ra_lower = PEERS[key]
    b = allocation_epsilon(noise_multiplier=sigma, steps_per_epoch=t, epochs=epochs, delta=1e-5)
    assert b.lower <= p_up and p_lo <= b.upper  # both certified: they must meet
    # tightdp's is the narrower, or at least within its promise (sigma 3, t 1000: epsilon 0.03, where an
    # absolute eps_error of 0.01 is coarse and pld-accounting's relative accuracy is finer)
    assert b.upper - b.lower <= max(p_up - p_lo, 0.02 + 1e-9)
    for upper in (decomposition, rdp):
        if upper is not None:
            assert b.lower <= upper
    if ra_lower is not None:
        assert ra_lower <= b.upper


@pytest.mark.slow
def test_live_pld_accounting():
    """The same comparison with pld-accounting run now (about 10 s)."""
    pld = pytest.importorskip("PLD_accounting")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        up, lo = pld.gaussian_allocation_epsilon_range(
            delta=1e-5, sigma=1.0, num_steps=10, num_epochs=1, epsilon_accuracy=0.01
        )
    b = allocation_epsilon(noise_multiplier=1.0, steps_per_epoch=10, epochs=1, delta=1e-5)
    assert b.lower <= up and lo <= b.upper and b.upper - b.lower <= up - lo
