"""Paper 000 (Koskela, Tobaben, Honkela 2023, individual privacy accounting with GDP): Sec. 4.1, Fig. 3, App. E.

    python examples/papers/p000_individual.py [--out DIR] [--quick]

Sec. 4.1 / App. C.4 (Fig. 3): private GD with sigma = 100 (full batch, each step mu = 1/100-GDP).
k = 420 steps cost eps ~ 0.8 at delta = 1e-5 by RDP (with the conversion of Lemma C.4, Canonne et al.);
a GDP filter (000 Thm 11, Alg. 1) with that (eps, delta) budget admits k = 495 steps. App. E:
sigma ~ 10.61, 50 full-batch epochs: eps = 2.75 at delta = 1e-5. Individual accounting (000 Sec. 5,
App. D): per-example epsilons of a DP-SGD run with synthetic gradient norms, against the worst case
(Fig. 1 style), and the individual GDP filter on full-batch GD (Alg. 1).
"""

from __future__ import annotations

import math

import numpy as np

from tightdp import GDPAccountant, Gaussian, PRVAccountant, RDPAccountant
from tightdp.individual import IndividualAccountant
from tightdp.individual.gdp import GDPFilter

try:
    from _common import Report, fmt, interval, parse_args, pyplot
except ImportError:
    from ._common import Report, fmt, interval, parse_args, pyplot

DELTA = 1e-5


def main() -> None:
    args = parse_args(__doc__)
    rep = Report("p000_individual", "000: individual privacy accounting with GDP (Koskela, Tobaben, Honkela, ICLR 2023)",
                 "Individual Privacy Accounting with Gaussian Differential Privacy; Sec. 4.1, App. C.4 Fig. 3, App. E",
                 args.out)
    g = Gaussian(noise_multiplier=100.0)
    rdp420 = RDPAccountant().compose(g, 420).epsilon(DELTA)
    exact420 = GDPAccountant().compose(g, 420).epsilon(DELTA)
    rep.row("Sec. 4.1: eps of k = 420 GD steps, sigma = 100, by RDP (Lemma C.4)", 0.8, float(rdp420.upper),
            interval(exact420), "paper prints 0.8 (rounded); the interval is the exact mu-GDP value "
            "(mu = sqrt(420)/100): RDP over-reports it by 9%", key="rdp_420")
    filt = GDPFilter(epsilon=float(rdp420.upper), delta=DELTA)
    k = 0
    while filt.admit(1.0 / 100.0):
        k += 1
    at_k = GDPAccountant().compose(g, k).epsilon(DELTA)
    rep.row("Sec. 4.1: steps a GDP filter admits for the same (eps, delta)", 495, k, interval(at_k),
            "000 Thm 11: sum of mu_m^2 <= B^2; interval: eps of the k admitted steps", key="gdp_steps")
    rep.row("Sec. 4.1: eps of k = 495 steps by RDP", None, float(RDPAccountant().compose(g, 495).epsilon(DELTA).upper),
            "—", "what RDP would charge for the steps GDP allows", key="rdp_495")
    g2 = Gaussian(noise_multiplier=10.61)
    e50 = GDPAccountant().compose(g2, 50).epsilon(DELTA)
    p50 = PRVAccountant(eps_error=0.005).compose(g2, 50).epsilon(DELTA)
    rep.row("App. E: eps of 50 full-batch epochs, sigma = 10.61", 2.75, float(e50.estimate), interval(p50),
            "sigma is printed as ≈ 10.61; interval from the PRV accountant, estimate exact mu-GDP",
            key="appE_eps")

    # individual accounting, DP-SGD with synthetic per-example gradient norms (000 Sec. 5, App. D)
    rng = np.random.default_rng(0)
    n_ex, steps, q, sigma, clip = (1000, 100, 0.02, 1.0, 1.0) if args.quick else (10_000, 1000, 0.01, 1.0, 1.0)
    base = rng.lognormal(mean=-1.0, sigma=0.8, size=n_ex)  # typical norms well below the clip for most
    # quick: a coarser sigma-grid and lattice (000 App. D.2); both only round the sensitivities up
    ia = IndividualAccountant(n_ex, sigma, clip, q, **(dict(num_buckets=25, resolution=400.0) if args.quick else {}))
    for _ in range(steps):
        ia.record_step(base * rng.uniform(0.7, 1.3, size=n_ex))
    eps_i = ia.epsilons(DELTA)
    worst = ia.worst_case_epsilon(DELTA)
    ups = np.asarray(eps_i.upper, float)
    rep.row(f"individual eps, DP-SGD q = {q:g}, sigma = {sigma:g}, {steps} steps: median / max of "
            f"{n_ex} examples", None, f"{np.median(ups):.4g} / {ups.max():.4g}", interval(worst),
            "synthetic lognormal norms (not the paper's data); interval: the worst case; every "
            "individual upper bound lies below the worst case's upper bound", key="individual_max",
            extra={"max_individual_upper": float(ups.max()), "worst_upper": float(worst.upper)})
    # individual GDP filter on full-batch GD (Alg. 1): budget = worst case of T steps, run 2T
    T, sig_gd = 50, 10.61
    budget = GDPFilter(epsilon=float(e50.estimate), delta=DELTA).budget
    norms = np.minimum(rng.lognormal(mean=-0.7, sigma=0.7, size=n_ex), 1.0)
    spent = np.zeros(n_ex)
    active_curve = []
    for _ in range(2 * T):
        mu = norms / sig_gd
        ok = spent + mu ** 2 <= budget ** 2
        spent = np.where(ok, spent + mu ** 2, spent)
        active_curve.append(int(ok.sum()))
    rep.row(f"individual GDP filter (Alg. 1), sigma = {sig_gd}, budget = worst case of {T} steps: "
            f"examples still active after {2 * T} steps", None, active_curve[-1], "—",
            f"of {n_ex}; synthetic norms; the filter's guarantee is the budget's ({fmt(e50.estimate)}, 1e-5)",
            key="filter_active")

    if not args.no_plots:
        plt = pyplot()
        ks = np.arange(50, 801, 25)
        fig, ax = plt.subplots(figsize=(5.5, 3.6))
        ax.plot(ks, [RDPAccountant().compose(g, int(k)).epsilon(DELTA).upper for k in ks], label="RDP (Lemma C.4)")
        ax.plot(ks, [GDPAccountant().compose(g, int(k)).epsilon(DELTA).upper for k in ks], label="GDP (exact)")
        ax.axhline(float(rdp420.upper), color="grey", lw=0.7)
        ax.axvline(420, color="tab:blue", ls=":", lw=0.8)
        ax.axvline(k, color="tab:orange", ls=":", lw=0.8)
        ax.set_xlabel("steps k (sigma = 100, full batch)")
        ax.set_ylabel("epsilon at delta = 1e-5")
        ax.legend()
        ax.set_title(f"000 Sec. 4.1 / Fig. 3: RDP allows 420 steps, GDP {k}")
        rep.figure(fig, "p000_rdp_vs_gdp.png", "000 Fig. 3: RDP against GDP for private GD")
        plt.close(fig)
        fig, ax = plt.subplots(figsize=(5.5, 3.6))
        ax.hist(ups, bins=50)
        ax.axvline(float(worst.upper), color="red", label="worst case")
        ax.set_xlabel("individual epsilon (upper bound), delta = 1e-5")
        ax.set_ylabel("examples")
        ax.legend()
        ax.set_title("000 Fig. 1 style: individual epsilons, synthetic norms")
        rep.figure(fig, "p000_individual_hist.png", "Individual epsilons of a DP-SGD run (synthetic norms)")
        plt.close(fig)
    rep.write()


if __name__ == "__main__":
    main()
