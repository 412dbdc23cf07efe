"""Gopi et al. 2021 (Gopi, Lee, Wutschitz, the PRV accountant): Fig. 1 with tightdp.

    python examples/papers/p003_prv.py [--out DIR] [--quick]

Fig. 1: DP-SGD with Poisson sampling p = 1e-3, sigma = 0.8, delta = 1e-7, up to 2000 steps. The PRV
accountant's certified interval (Gopi et al. 2021 Thm 5.5) against the RDP accountant, which over-reports epsilon,
and the GDP central-limit approximation (Bu et al. 2020), which under-reports it. The peers
``prv_accountant`` (the authors' code) and ``dp_accounting`` (PLD, pessimistic) are run where installed.
The paper prints no table for this figure: the pinned facts are the orderings RDP > upper and GDP < lower.
"""

from __future__ import annotations

import time

import tightdp
from tightdp import GDPAccountant, PRVAccountant, RDPAccountant

try:
    from _common import Report, interval, parse_args, pyplot
except ImportError:
    from ._common import Report, interval, parse_args, pyplot

P, SIGMA, DELTA = 1e-3, 0.8, 1e-7


def peer_prv(steps: int):
    try:
        import prv_accountant as pa
    except ImportError:
        return None
    m = pa.PoissonSubsampledGaussianMechanism(noise_multiplier=SIGMA, sampling_probability=P)
    acc = pa.PRVAccountant(prvs=m, max_self_compositions=steps, eps_error=0.01, delta_error=DELTA / 1000)
    return acc.compute_epsilon(delta=DELTA, num_self_compositions=[steps])


def peer_dpa(steps: int):
    try:
        from dp_accounting.pld import privacy_loss_distribution as pld
    except ImportError:
        return None
    p = pld.from_gaussian_mechanism(
        standard_deviation=SIGMA, sampling_prob=P, value_discretization_interval=1e-3, pessimistic_estimate=True
    ).self_compose(steps)
    return float(p.get_epsilon_for_delta(DELTA))


def main() -> None:
    args = parse_args(__doc__)
    rep = Report(
        "p003_prv",
        "Gopi et al. 2021: the PRV accountant (Gopi, Lee, Wutschitz, NeurIPS 2021)",
        "Numerical Composition of Differential Privacy; Fig. 1",
        args.out,
    )
    steps = [250, 1000, 2000] if args.quick else [50, 100, 250, 500, 750, 1000, 1250, 1500, 1750, 2000]
    curves = {"k": [], "lo": [], "up": [], "rdp": [], "gdp": [], "peer": []}
    mech = tightdp.dpsgd_mechanism(noise_multiplier=SIGMA, sampling_rate=P)
    for k in steps:
        t = time.perf_counter()
        b = PRVAccountant(eps_error=0.01).compose(mech, k).epsilon(DELTA)
        tb = time.perf_counter() - t
        rdp = float(RDPAccountant().compose(mech, k).epsilon(DELTA).upper)
        gdp = float(GDPAccountant().compose(mech, k).epsilon(DELTA).estimate)
        peer = peer_prv(k)
        curves["k"].append(k)
        curves["lo"].append(b.lower)
        curves["up"].append(b.upper)
        curves["rdp"].append(rdp)
        curves["gdp"].append(gdp)
        curves["peer"].append(None if peer is None else peer[1])
        peer_s = "" if peer is None else f"; prv_accountant: [{peer[0]:.4g}, {peer[2]:.4g}]"
        rep.row(
            f"k = {k}: eps(1e-7), PRV ({tb:.2f} s)",
            None,
            float(b.estimate),
            interval(b),
            f"RDP {rdp:.4g} (over by {rdp - b.upper:.3g}), GDP-CLT {gdp:.4g} (under by {b.lower - gdp:.3g})" + peer_s,
            key=f"prv_{k}",
            extra={
                "lower": b.lower,
                "upper": b.upper,
                "rdp": rdp,
                "gdp": gdp,
                "peer": None if peer is None else list(peer),
            },
        )
    dpa = peer_dpa(steps[-1])
    if dpa is not None:
        last = rep.rows[-1]
        last.note += f"; dp_accounting PLD (pessimistic, mesh 1e-3): {dpa:.4g}"
        last.extra["dp_accounting"] = dpa
    if not args.quick:  # issue 13's acceptance figure: PRV at scale (the multi-level tree)
        big = tightdp.dpsgd_mechanism(noise_multiplier=0.8, sampling_rate=4e-3)
        tightdp.clear_caches()
        t = time.perf_counter()
        b = PRVAccountant(eps_error=0.01).compose(big, 300_000).epsilon(1e-5)
        tb = time.perf_counter() - t
        rdp = float(RDPAccountant().compose(big, 300_000).epsilon(1e-5).upper)
        tree = b.details.get("tree", {})
        rep.row(
            f"q = 4e-3, σ = 0.8, k = 3e5: eps(1e-5), PRV ({tb:.2f} s)",
            None,
            float(b.estimate),
            interval(b),
            f"not in the paper (issue 13's scale check, O(sqrt(k)) cost): width {b.upper - b.lower:.4f} "
            f"for eps_error 0.01, composition tree radices {tree.get('radices')}; RDP {rdp:.4g}",
            key="prv_scale_3e5",
            extra={"lower": b.lower, "upper": b.upper, "seconds": tb, "rdp": rdp},
        )
    rep.say(
        "Gopi et al. 2021 Fig. 1 shows the same ordering: RDP above the PRV bounds, the GDP (CLT) approximation "
        "below them. The peers' estimates fall inside tightdp's certified interval."
    )
    if not args.no_plots:
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(5.5, 3.6))
        ax.fill_between(curves["k"], curves["lo"], curves["up"], alpha=0.5, label="PRV, certified interval")
        ax.plot(curves["k"], curves["rdp"], "--", label="RDP")
        ax.plot(curves["k"], curves["gdp"], ":", label="GDP (CLT)")
        if all(p is not None for p in curves["peer"]):
            ax.plot(curves["k"], curves["peer"], "k.", label="prv_accountant estimate")
        ax.set_xlabel("steps")
        ax.set_ylabel("epsilon at delta = 1e-7")
        ax.set_title("Gopi et al. 2021 Fig. 1: p = 1e-3, σ = 0.8")
        ax.legend(fontsize=8)
        rep.figure(fig, "p003_fig1.png", "Gopi et al. 2021 Fig. 1: RDP over-reports, GDP under-reports")
        plt.close(fig)
    rep.write()


if __name__ == "__main__":
    main()
