"""Paper 004 (Wang et al. 2023, the Edgeworth accountant): Fig. 2 settings, AEA and EEAI with tightdp.

    python examples/papers/p004_edgeworth.py [--out DIR] [--quick]

Fig. 2 left: Poisson-subsampled Gaussian, p = 0.01, sigma = 0.8, delta = 0.015 (the setting of
003 Fig. 1(b)); middle/right: p = 0.05, sigma = 1, delta = 1e-5 over 10 epochs (200 steps). For each
number of compositions m: the PRV accountant's certified interval ("FFT_LOW"/"FFT_UPP" in 004), the
second-order AEA (004 Def. 4.1, "EW_EST"), the EEAI interval (Def. 4.2) where it is informative, the
GDP central-limit approximation and RDP. The paper prints curves, not numbers: the pinned facts are
that the AEA lies closer to the certified interval than GDP and RDP do. Also timed: m distinct
mechanisms (004's O(m) claim) and a Poisson-subsampled Laplace composition (004 Prop. 4.5).
"""

from __future__ import annotations

import time

import numpy as np

import tightdp
from tightdp import EdgeworthAccountant, GDPAccountant, Gaussian, Laplace, PoissonSampled, PRVAccountant, RDPAccountant

try:
    from _common import Report, fmt, interval, parse_args, pyplot
except ImportError:
    from ._common import Report, fmt, interval, parse_args, pyplot

SETTINGS = {"left": (0.01, 0.8, 0.015), "right": (0.05, 1.0, 1e-5)}


def point(p, sigma, delta, m):
    mech = tightdp.dpsgd_mechanism(noise_multiplier=sigma, sampling_rate=p)
    prv = PRVAccountant(eps_error=0.01).compose(mech, m).epsilon(delta)
    ew = EdgeworthAccountant(order=2).compose(mech, m).epsilon(delta)
    gdp = float(GDPAccountant().compose(mech, m).epsilon(delta).estimate)
    rdp = float(RDPAccountant().compose(mech, m).epsilon(delta).upper)
    return prv, ew, gdp, rdp


def main() -> None:
    args = parse_args(__doc__)
    rep = Report("p004_edgeworth", "004: the Edgeworth accountant (Wang et al., ICLR 2023)",
                 "Analytical Composition of Differential Privacy via the Edgeworth Accountant; Fig. 2, Prop. 4.5",
                 args.out)
    grids = {"left": [200, 1000] if args.quick else [100, 200, 500, 1000, 2000, 3000],
             "right": [200] if args.quick else [20, 50, 100, 150, 200]}
    curves = {}
    for name, (p, sigma, delta) in SETTINGS.items():
        cur = curves.setdefault(name, {"m": [], "lo": [], "up": [], "ew": [], "gdp": [], "rdp": []})
        for m in grids[name]:
            prv, ew, gdp, rdp = point(p, sigma, delta, m)
            e = float(ew.estimate)
            cur["m"].append(m)
            cur["lo"].append(prv.lower)
            cur["up"].append(prv.upper)
            cur["ew"].append(e)
            cur["gdp"].append(gdp)
            cur["rdp"].append(rdp)
            eeai = "EEAI vacuous" if ew.lower is None else f"EEAI [{ew.lower:.4g}, {ew.upper:.4g}]"
            mid = 0.5 * (prv.lower + prv.upper)
            rep.row(f"Fig. 2 {name}: p = {p:g}, σ = {sigma:g}, δ = {delta:g}, m = {m}: AEA (order 2)", None, e,
                    interval(prv), f"{eeai}; GDP {gdp:.4g}, RDP {rdp:.4g}; |AEA − mid| = {abs(e - mid):.3g} vs "
                    f"|GDP − mid| = {abs(gdp - mid):.3g}", key=f"{name}_{m}",
                    extra={"prv_lower": prv.lower, "prv_upper": prv.upper, "gdp": gdp, "rdp": rdp,
                           "eeai": None if ew.lower is None else [ew.lower, ew.upper]})
    rep.say("Left setting, small m: the AEA is not always closer to the certified interval than GDP (at m = 200 "
            "the two are within 0.05 of each other, both below the interval); from m ~ 1000 on, and in the right "
            "setting, it is markedly closer, as 004 Fig. 2 shows. The EEAI interval (Def. 4.2) is vacuous at "
            "delta = 0.015 up to m = 1000 (the uniform Edgeworth bound of Lemma 4.3 exceeds the slack) and, where "
            "reported, has lower end 0: a much wider interval than the certified one, as 004 Fig. 3 shows for EW_LOW.")
    # O(m) for m different mechanisms (004 Sec. 4): distinct noise levels
    n_distinct = 200 if args.quick else 1000
    t = time.perf_counter()
    acc = EdgeworthAccountant()
    for i in range(n_distinct):
        acc.compose(tightdp.dpsgd_mechanism(noise_multiplier=1.0 + i * 1e-3, sampling_rate=0.01))
    b = acc.epsilon(1e-5)
    secs = time.perf_counter() - t
    rep.row(f"{n_distinct} distinct subsampled Gaussians (q = 0.01, σ = 1 … {1 + (n_distinct - 1) * 1e-3:g}): "
            f"eps(1e-5), AEA, {secs:.1f} s", None, float(b.estimate), "—",
            "004's O(m) cost for m different mechanisms: moments by one shared quadrature per mechanism",
            key="distinct", extra={"seconds": secs})
    # Prop. 4.5: Poisson-subsampled Laplace
    lap = PoissonSampled(mechanism=Laplace(scale=2.0), sampling_rate=0.05)
    ew = EdgeworthAccountant().compose(lap, 500).epsilon(1e-5)
    prv = PRVAccountant(eps_error=0.01).compose(lap, 500).epsilon(1e-5)
    rep.row("Prop. 4.5: Poisson-subsampled Laplace (b = 2, q = 0.05), 500 steps, eps(1e-5), AEA", None,
            float(ew.estimate), interval(prv), "interval from the PRV accountant", key="laplace",
            extra={"prv_lower": prv.lower, "prv_upper": prv.upper})
    if not args.no_plots:
        plt = pyplot()
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
        for ax, (name, cur) in zip(axes, curves.items()):
            p, sigma, delta = SETTINGS[name]
            ax.fill_between(cur["m"], cur["lo"], cur["up"], alpha=0.5, label="PRV (FFT_LOW–FFT_UPP)")
            ax.plot(cur["m"], cur["ew"], "o-", label="AEA (EW_EST)")
            ax.plot(cur["m"], cur["gdp"], ":", label="GDP (CLT)")
            if name == "left":
                ax.plot(cur["m"], cur["rdp"], "--", label="RDP")
            ax.set_xlabel("compositions m")
            ax.set_ylabel(f"epsilon at delta = {delta:g}")
            ax.set_title(f"004 Fig. 2 {name}: p = {p:g}, σ = {sigma:g}", fontsize=9)
            ax.legend(fontsize=7)
        rep.figure(fig, "p004_fig2.png", "004 Fig. 2: AEA against the certified PRV interval, GDP and RDP")
        plt.close(fig)
    rep.write()


if __name__ == "__main__":
    main()
