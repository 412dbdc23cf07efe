"""Wang et al. 2023 (the Edgeworth accountant): Fig. 2 and Fig. 3 settings, AEA, EEAI, tails.

    python examples/papers/p004_edgeworth.py [--out DIR] [--quick] [--no-plots]

Fig. 2 left: Poisson-subsampled Gaussian, p = 0.01, sigma = 0.8, delta = 0.015 (the setting of
Gopi et al. 2021 Fig. 1(b)); middle/right: p = 0.05, sigma = 1, delta = 1e-5 over 10 epochs (200 steps). Fig. 3:
delta = 0.1, sigma = 0.8 and p = 0.4/sqrt(m) (left), 1/sqrt(m log m) (middle), 0.1 log(m)/m (right).
For each number of compositions m: a certified interval (PRV for Fig. 2, "FFT_LOW"/"FFT_UPP" in Wang et al. 2023;
the connect-the-dots accountant for Fig. 3), the second-order AEA (Wang et al. 2023 Def. 4.1, "EW_EST"), the EEAI
("EW_LOW"/"EW_UPP") in two forms - Wang et al. 2023 Def. 4.2 as printed and tightdp's default, the same Lemma 4.3
bound applied to delta = E_P[(1 - e^(eps - S))_+] - the i.i.d. interval of Wang et al. 2023 App. H (DGG Thm
A.3/A.5, an approximation: its constant kappa is evaluated numerically), GDP and RDP. The paper prints
curves, not numbers: the table pins what the curves show and says where tightdp's EEAI differs.
Also: for which m Lemma 4.3's error drops below delta (where the EEAI can have a positive lower end),
Wang et al. 2023 Thm 1's tail against the Chernoff tail the accountant uses, m distinct mechanisms (Wang et al. 2023's O(m)
claim) and a Poisson-subsampled Laplace composition (Wang et al. 2023 Prop. 4.5).
"""

from __future__ import annotations

import math
import time

import numpy as np

import tightdp
from tightdp import (
    ConnectDotsAccountant,
    EdgeworthAccountant,
    GDPAccountant,
    Laplace,
    PoissonSampled,
    PRVAccountant,
    RDPAccountant,
)
from tightdp.accountants import _edgeworth_math as em
from tightdp.accountants.edgeworth import _mechanism_stats

try:
    from _common import Report, fmt, interval, parse_args, pyplot
except ImportError:
    from ._common import Report, fmt, interval, parse_args, pyplot

SETTINGS = {"left": (0.01, 0.8, 0.015), "right": (0.05, 1.0, 1e-5)}
FIG3 = {
    "left": (lambda m: 0.4 / math.sqrt(m), "p = 0.4/√m"),
    "middle": (lambda m: 1 / math.sqrt(m * math.log(m)), "p = 1/√(m log m)"),
    "right": (lambda m: 0.1 * math.log(m) / m, "p = 0.1 log(m)/m"),
}


def iv(pair) -> str:
    lo, up = pair
    return f"[{fmt(lo, 4)}, {fmt(up, 4)}]"


def lemma43_error(mech, m: int) -> float:
    """Largest of the four Lemma 4.3 bounds (two directions, two measures) for m copies of ``mech``."""
    st = _mechanism_stats(mech)
    return max(em.edgeworth_uniform_bound(em.SumStats.from_entries([(st[k][j], m)])) for k in (0, 1) for j in (0, 1))


def edgeworth_row(mech, m: int, delta: float):
    """AEA and the three EEAI intervals (integrated, Def. 4.2, App. H)."""
    ew = EdgeworthAccountant(order=2).compose(mech, m).epsilon(delta)
    paper = EdgeworthAccountant(order=2, eeai="paper").compose(mech, m).epsilon(delta)
    iid = ew.details.get("iid_interval")
    return {
        "aea": float(ew.estimate),
        "eeai": ew.details["interval_raw"],
        "eeai_paper": paper.details["interval_raw"],
        "iid": None if iid is None else [iid["lower"], iid["upper"]],
        "iid_error": None if iid is None else max(iid["edgeworth_error"]),
        "lemma43": lemma43_error(mech, m),
    }


def m_star(p_of_m, sigma: float, delta: float, kind: str) -> int | None:
    """Smallest m on a quarter-decade grid (up to 1e9) at which the CDF error bound drops below delta."""
    for e in np.arange(2.0, 9.01, 0.25):
        m = int(round(10**e))
        mech = tightdp.dpsgd_mechanism(noise_multiplier=sigma, sampling_rate=p_of_m(m))
        if kind == "lemma43":
            err = lemma43_error(mech, m)
        else:  # App. H, Thm A.3 (moments only; the approximation-free part of the i.i.d. bounds)
            st = _mechanism_stats(mech)
            err = max(em.edgeworth_iid_bounds(em.SumStats.from_entries([(st[k][0], m)]))["A3"] for k in (0, 1))
        if err < delta:
            return m
    return None


def main() -> None:
    args = parse_args(__doc__)
    rep = Report(
        "p004_edgeworth",
        "Wang et al. 2023: the Edgeworth accountant (Wang et al., ICLR 2023)",
        "Analytical Composition of Differential Privacy via the Edgeworth Accountant; Figs 2-3, Thm 1, "
        "Prop. 4.5, Remark 4.4, App. H",
        args.out,
    )
    grids = {
        "left": [200, 1000] if args.quick else [100, 200, 500, 1000, 2000, 3000],
        "right": [200] if args.quick else [20, 50, 100, 150, 200],
    }
    curves = {}
    for name, (p, sigma, delta) in SETTINGS.items():
        cur = curves.setdefault(name, {k: [] for k in ("m", "lo", "up", "ew", "gdp", "rdp", "elo", "eup")})
        mech = tightdp.dpsgd_mechanism(noise_multiplier=sigma, sampling_rate=p)
        for m in grids[name]:
            prv = PRVAccountant(eps_error=0.01).compose(mech, m).epsilon(delta)
            gdp = float(GDPAccountant().compose(mech, m).epsilon(delta).estimate)
            rdp = float(RDPAccountant().compose(mech, m).epsilon(delta).upper)
            r = edgeworth_row(mech, m, delta)
            for k, v in (
                ("m", m),
                ("lo", prv.lower),
                ("up", prv.upper),
                ("ew", r["aea"]),
                ("gdp", gdp),
                ("rdp", rdp),
                ("elo", r["eeai"][0]),
                ("eup", r["eeai"][1]),
            ):
                cur[k].append(v)
            mid = 0.5 * (prv.lower + prv.upper)
            rep.row(
                f"Fig. 2 {name}: p = {p:g}, σ = {sigma:g}, δ = {delta:g}, m = {m}: AEA (order 2)",
                None,
                r["aea"],
                interval(prv),
                f"EEAI {iv(r['eeai'])}, Def. 4.2 {iv(r['eeai_paper'])}, App. H (approx.) "
                f"{iv(r['iid']) if r['iid'] else '—'}; Lemma 4.3 error {fmt(r['lemma43'], 3)}, i.i.d. error "
                f"{fmt(r['iid_error'], 3)}; GDP {gdp:.4g}, RDP {rdp:.4g}; |AEA − mid| = {abs(r['aea'] - mid):.3g} "
                f"vs |GDP − mid| = {abs(gdp - mid):.3g}",
                key=f"{name}_{m}",
                extra={"prv_lower": prv.lower, "prv_upper": prv.upper, "gdp": gdp, "rdp": rdp, **r},
            )
    r1000 = next(r.extra for r in rep.rows if r.key == "left_1000")
    rep.say(
        f"**Fig. 2.** The AEA is markedly closer to the certified interval than GDP and RDP from m ~ 1000 on in "
        "the left setting and throughout the right one, as Wang et al. 2023 Fig. 2 shows; at m = 200 (left) AEA and GDP are "
        "within 0.05 of each other, both below the interval. The EEAI has lower end 0 at every Fig. 2 point, "
        "in both forms. This is the paper's bound, not an implementation artefact: the PLLRs of a "
        "Poisson-subsampled Gaussian with small p are very skewed (standardized K3~ ≈ 10, K4 ≈ 230 at p = 0.01, "
        "σ = 0.8), so Lemma 4.3's uniform error (DGG Thm A.2) is 6.0 at m = 1000 and 1.2 at m = 3000, above 1, "
        "and its leading term 0.1995·K3~/√m alone is 0.064 > δ = 0.015. (Our Thm A.2 uses, where DGG's arXiv "
        "text and their R package BoundEdgeworth differ, the larger Gamma factors of the integrated remainder: "
        "with the package's factors the error would be 1.31 at m = 1000 and 0.36 at m = 3000, still far above "
        "δ.) A CDF error Δ ≥ δ leaves the EEAI no positive lower end except where δ(ε) ≫ δ, and the upper "
        "end then comes from the tail bound (Chernoff with the exact moment generating function, i.e. an "
        "RDP-type bound). Def. 4.2 also multiplies "
        f"Δ_X by e^ε; tightdp's default EEAI writes δ(ε) = ∫_ε^∞ e^(ε−x) P_P(S > x) dx and pays Δ once, which "
        f"narrows the interval (upper {r1000['eeai'][1]:.3g} instead of {r1000['eeai_paper'][1]:.3g} at m = 1000 "
        f"left) but cannot repair Δ > δ. The i.i.d. bounds of App. H (DGG Thm A.3, A.5) are smaller "
        f"({r1000['iid_error']:.3g} at m = 1000 left) and give positive lower ends "
        f"({r1000['iid'][0]:.3g} at m = 1000 left), but A.5's κ is evaluated numerically, so that interval is an "
        "approximation and is reported beside, not as, the EEAI."
    )
    # Fig. 3: delta = 0.1, sigma = 0.8
    f3_m = (
        {"left": [100_000]}
        if args.quick
        else {k: [1000, 3000, 10_000, 30_000, 100_000, 300_000, 1_000_000] for k in FIG3}
    )
    f3 = {}
    for name, ms in f3_m.items():
        p_of_m, label = FIG3[name]
        cur = f3.setdefault(name, {k: [] for k in ("m", "lo", "up", "ew", "elo", "eup", "plo", "pup", "rdp")})
        for m in ms:
            mech = tightdp.dpsgd_mechanism(noise_multiplier=0.8, sampling_rate=p_of_m(m))
            cd = ConnectDotsAccountant().compose(mech, m).epsilon(0.1)
            rdp = float(RDPAccountant().compose(mech, m).epsilon(0.1).upper)
            r = edgeworth_row(mech, m, 0.1)
            for k, v in (
                ("m", m),
                ("lo", cd.lower),
                ("up", cd.upper),
                ("ew", r["aea"]),
                ("elo", r["eeai"][0]),
                ("eup", r["eeai"][1]),
                ("plo", r["eeai_paper"][0]),
                ("pup", r["eeai_paper"][1]),
                ("rdp", rdp),
            ):
                cur[k].append(v)
            informative = r["eeai"][0] > 0
            rep.row(
                f"Fig. 3 {name}: {label}, σ = 0.8, δ = 0.1, m = {m}: EEAI (integrated)",
                None,
                f"{iv(r['eeai'])}",
                interval(cd),
                f"{'informative' if informative else 'lower end 0'}; Def. 4.2 {iv(r['eeai_paper'])}; App. H "
                f"(approx.) {iv(r['iid']) if r['iid'] else '—'}; AEA {r['aea']:.4g}; RDP {rdp:.4g}; Lemma 4.3 "
                f"error {fmt(r['lemma43'], 3)}",
                key=f"fig3_{name}_{m}",
                extra={"cd_lower": cd.lower, "cd_upper": cd.upper, "rdp": rdp, **r},
            )
    f3x = next(r.extra for r in rep.rows if r.key == "fig3_left_100000")
    rep.say(
        "**Fig. 3.** With δ = 0.1 Lemma 4.3's error falls below δ from m ≈ 5.6·10⁴ in the left and middle "
        "settings (rows below); tightdp's default EEAI is two-sided from about m = 3·10⁴ (where δ(ε) exceeds "
        "the error), Def. 4.2 from about 10⁵, and both tighten towards the certified value as m grows. At m = 10⁵ (left) tightdp's default EEAI is "
        f"{iv(f3x['eeai'])} around the certified [{f3x['cd_lower']:.4g}, {f3x['cd_upper']:.4g}], Def. 4.2 gives "
        f"{iv(f3x['eeai_paper'])}; Wang et al. 2023 Fig. 3 plots EW_LOW/EW_UPP "
        "against FFT and RDP but prints no numbers, so the comparison with it is qualitative. The right "
        "setting, read from the extracted text as p = 0.1·log(m)/m, "
        "has ε = 0 at δ = 0.1 for every m here (the expected number of participations, 0.1·log m, is too small "
        "for the total-variation distance to reach 0.1); the setting is probably garbled in the text "
        "extraction, so no comparison with the printed curve is made."
    )
    # where the EEAI can be two-sided: Lemma 4.3's error below delta
    for name, p_of_m, sigma, delta, label in [
        ("Fig. 2 left", lambda m: 0.01, 0.8, 0.015, "p = 0.01"),
        ("Fig. 2 right", lambda m: 0.05, 1.0, 1e-5, "p = 0.05"),
        ("Fig. 3 left", FIG3["left"][0], 0.8, 0.1, FIG3["left"][1]),
    ] + ([] if args.quick else [("Fig. 3 middle", FIG3["middle"][0], 0.8, 0.1, FIG3["middle"][1])]):
        a = m_star(p_of_m, sigma, delta, "lemma43")
        b = m_star(p_of_m, sigma, delta, "iid")
        rep.row(
            f"{name} ({label}, σ = {sigma:g}, δ = {delta:g}): smallest m with Lemma 4.3 error < δ",
            None,
            a if a is not None else "> 1e9",
            "—",
            f"i.i.d. bound DGG Thm A.3: {b if b is not None else '> 1e9'} (quarter-decade grid)",
            key=f"mstar_{name.split()[1]}_{name.split()[2]}",
            extra={"lemma43": a, "iid_A3": b},
        )
    # Wang et al. 2023 Thm 1 against the Chernoff tail (Fig. 2 left, m = 1000): the e^eps-amplified term of Def. 4.2
    p, sigma, m = 0.01, 0.8, 1000
    mech = tightdp.dpsgd_mechanism(noise_multiplier=sigma, sampling_rate=p)
    loss = mech.privacy_losses().remove
    _, Q, K = em.pllr_statistics(loss)
    for eps in (2.0, 4.0, 8.0):
        thm1 = float(math.exp(eps) * em.thm1_tail(p, 1 / sigma, m, np.array([eps]), eta=-Q.mean)[0])
        chern = float(EdgeworthAccountant._chernoff(m * K, np.array([eps]))[0])
        rep.row(
            f"Thm 1: e^ε P(ΣX_i ≥ ε), p = {p:g}, σ = {sigma:g}, m = {m}, ε = {eps:g}",
            None,
            thm1,
            "—",
            f"Chernoff with the exact MGF (used by tightdp, a proven bound): {chern:.3g}. Thm 1 as printed "
            "(η = −E X_i; η(a) is left implicit in the text: an approximation) is vacuous here: τ² ≥ μ² = 1/σ², "
            "the unsubsampled scale, so it needs ε + mη ≳ μ·√(8m log 2) ≈ 93 (probability capped at 1)",
            key=f"thm1_{eps:g}",
            extra={"chernoff": chern},
        )
    # O(m) for m different mechanisms (Wang et al. 2023 Sec. 4): distinct noise levels
    n_distinct = 200 if args.quick else 1000
    tightdp.clear_caches()
    t = time.perf_counter()
    acc = EdgeworthAccountant()
    for i in range(n_distinct):
        acc.compose(tightdp.dpsgd_mechanism(noise_multiplier=1.0 + i * 1e-3, sampling_rate=0.01))
    b = acc.epsilon(1e-5)
    secs = time.perf_counter() - t
    rep.row(
        f"{n_distinct} distinct subsampled Gaussians (q = 0.01, σ = 1 … {1 + (n_distinct - 1) * 1e-3:g}): "
        f"eps(1e-5), AEA, {secs:.1f} s",
        None,
        float(b.estimate),
        "—",
        f"EEAI {iv(b.details['interval_raw'])}; Wang et al. 2023's O(m) cost: moments and tails by one shared quadrature "
        "per mechanism (both directions from one rule)",
        key="distinct",
        extra={"seconds": secs},
    )
    # Prop. 4.5: Poisson-subsampled Laplace
    lap = PoissonSampled(mechanism=Laplace(scale=2.0), sampling_rate=0.05)
    ew = EdgeworthAccountant().compose(lap, 500).epsilon(1e-5)
    prv = PRVAccountant(eps_error=0.01).compose(lap, 500).epsilon(1e-5)
    rep.row(
        "Prop. 4.5: Poisson-subsampled Laplace (b = 2, q = 0.05), 500 steps, eps(1e-5), AEA",
        None,
        float(ew.estimate),
        interval(prv),
        f"EEAI {iv(ew.details['interval_raw'])} (Hoeffding tail of Prop. 4.5 and Chernoff); interval from the "
        "PRV accountant",
        key="laplace",
        extra={"prv_lower": prv.lower, "prv_upper": prv.upper, "eeai": ew.details["interval_raw"]},
    )
    if not args.no_plots:
        plt = pyplot()
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
        for ax, (name, cur) in zip(axes, curves.items()):
            p, sigma, delta = SETTINGS[name]
            ax.fill_between(cur["m"], cur["lo"], cur["up"], alpha=0.5, label="PRV (FFT_LOW–FFT_UPP)")
            ax.plot(cur["m"], cur["ew"], "o-", label="AEA (EW_EST)")
            ax.plot(cur["m"], cur["eup"], "v--", label="EEAI upper (EW_UPP)")
            ax.plot(cur["m"], cur["gdp"], ":", label="GDP (CLT)")
            if name == "left":
                ax.plot(cur["m"], cur["rdp"], "--", label="RDP")
            ax.set_xlabel("compositions m")
            ax.set_ylabel(f"epsilon at delta = {delta:g}")
            ax.set_title(f"Wang et al. 2023 Fig. 2 {name}: p = {p:g}, σ = {sigma:g} (EEAI lower = 0)", fontsize=9)
            ax.legend(fontsize=7)
        rep.figure(fig, "p004_fig2.png", "Wang et al. 2023 Fig. 2: AEA against the certified PRV interval, GDP and RDP")
        plt.close(fig)
        fig, axes = plt.subplots(1, len(f3), figsize=(5 * len(f3), 3.6), squeeze=False)
        for ax, (name, cur) in zip(axes[0], f3.items()):
            ax.fill_between(cur["m"], cur["lo"], cur["up"], alpha=0.5, label="connect-dots (certified)")
            ax.plot(cur["m"], cur["ew"], "o-", label="AEA (EW_EST)")
            ax.plot(cur["m"], cur["elo"], "^-", label="EEAI lower (integrated)")
            ax.plot(cur["m"], cur["eup"], "v-", label="EEAI upper (integrated)")
            ax.plot(cur["m"], cur["plo"], "^:", label="EEAI lower (Def. 4.2)")
            ax.plot(cur["m"], cur["pup"], "v:", label="EEAI upper (Def. 4.2)")
            ax.plot(cur["m"], cur["rdp"], "--", label="RDP")
            ax.set_xscale("log")
            ax.set_xlabel("compositions m")
            ax.set_ylabel("epsilon at delta = 0.1")
            ax.set_title(f"Wang et al. 2023 Fig. 3 {name}: {FIG3[name][1]}, σ = 0.8", fontsize=9)
            ax.legend(fontsize=6)
        rep.figure(
            fig,
            "p004_fig3.png",
            "Wang et al. 2023 Fig. 3: EEAI (EW_LOW/EW_UPP) in both forms against a certified interval",
        )
        plt.close(fig)
    rep.write()


if __name__ == "__main__":
    main()
