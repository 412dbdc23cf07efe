"""The report's figures (matplotlib, imported only here): epsilon(delta), epsilon over training, trade-off.

The two epsilon figures have two panels: the curves with the certified band shaded, and each
accountant's deviation from the upper end of the band, with the band's width drawn below zero
(the band itself is often thinner than a line at the scale of the curves, so the lower panel is
where it is visible). The x axis of epsilon(delta) is logarithmic; the deviation axis is
symmetric-logarithmic, so both the 1e-3-wide certified band and a loose bound (RDP) show.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .._types import FloatArray

__all__ = ["write_plots"]


def write_plots(report: Any, plot_dir: Path) -> dict[str, Path]:
    """Draw the figures into ``plot_dir`` and record their names in ``report.pngs``.

    Parameters
    ----------
    report : Report
        A built report (``tightdp.report.build_report``); without matplotlib a note is added to its ``notes``.
    plot_dir : Path
        The directory of the PNG files (created if missing).

    Returns
    -------
    dict of str to Path
        ``{key: path}`` of the files written (empty without matplotlib).

    Raises
    ------
    OSError
        If ``plot_dir`` cannot be created or a file cannot be written.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        report.notes.append("Plots skipped: matplotlib is not installed (pip install 'tightdp[plot]').")
        return {}
    plot_dir = Path(plot_dir)
    plot_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    delta0 = report.config.deltas[0]
    if report.curve.get("series"):
        p = plot_dir / "epsilon_vs_delta.png"
        _two_panel(
            plt,
            report.curve,
            "delta",
            p,
            xlabel="δ",
            ylabel="ε",
            logx=True,
            title="ε(δ) by accountant; hatched: certified band",
        )
        report.pngs["curve"] = p.name
        written["plot_epsilon_vs_delta"] = p
    if report.training_curve.get("series"):
        p = plot_dir / "epsilon_over_training.png"
        _two_panel(
            plt,
            report.training_curve,
            "x",
            p,
            xlabel=report.training_curve.get("x_label", "steps"),
            ylabel=f"ε at δ = {delta0:g}",
            logx=False,
            title="privacy spent over training; hatched: certified band",
        )
        report.pngs["training"] = p.name
        written["plot_epsilon_over_training"] = p
    if report.tradeoff.get("alpha"):
        p = plot_dir / "tradeoff.png"
        _tradeoff(plt, report.tradeoff, p)
        report.pngs["tradeoff"] = p.name
        written["plot_tradeoff"] = p
    return written


#: One colour per accountant in every figure.
_COLOURS = {"connect-dots": "C0", "prv": "C3", "fourier": "C5", "rdp": "C4", "gdp": "C2", "edgeworth": "C1"}


def _arr(values: Any) -> FloatArray:
    """``values`` as a float array, ``None`` as NaN."""
    return np.array([np.nan if v is None else v for v in values], float)


def _two_panel(
    plt: Any, curve: dict[str, Any], x_key: str, path: Path, *, xlabel: str, ylabel: str, logx: bool, title: str
) -> None:
    x = np.asarray(curve[x_key], float)
    """The curves with the certified band shaded (top) and each curve's deviation from the band's upper end."""
    lo, up = (_arr(curve["band"][0]), _arr(curve["band"][1])) if curve.get("band") else (None, None)
    fig, (ax, dev) = plt.subplots(2, 1, figsize=(7.5, 6.4), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    if lo is not None and up is not None:
        ok = np.isfinite(lo) & np.isfinite(up)
        if ok.any():
            ax.fill_between(
                x[ok], lo[ok], up[ok], color="0.55", alpha=0.35, hatch="//", linewidth=0, label="certified band"
            )
            dev.fill_between(
                x[ok],
                -(up[ok] - lo[ok]),
                0.0,
                color="0.55",
                alpha=0.35,
                hatch="//",
                linewidth=0,
                label="band width (lower end − upper end)",
            )
    for name, ys in curve["series"].items():
        y = _arr(ys)
        ok = np.isfinite(y)
        sparse = ok.sum() <= 16  # drawn at a few points only: markers, no line between them
        approx = "approximation" in name
        style = dict(
            color=_COLOURS.get(name.split(" ")[0], "C7"),
            lw=1.2,
            ms=4 if sparse else 0,
            marker="o" if sparse else None,
            ls="none" if sparse else ("--" if approx else "-"),
        )
        ax.plot(x[ok], y[ok], label=name + (" (a few points)" if sparse else ""), **style)
        if up is not None:
            both = ok & np.isfinite(up)
            dev.plot(x[both], y[both] - up[both], **style)
    dev.axhline(0.0, color="k", lw=0.6)
    if logx:
        ax.set_xscale("log")
    dev.set_yscale("symlog", linthresh=1e-3)
    dev.set_ylabel("ε − band upper end")
    dev.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    dev.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8)
    dev.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _tradeoff(plt: Any, tradeoff: dict[str, Any], path: Path) -> None:
    """The certified lower trade-off curve beta(alpha) against perfect privacy."""
    a = np.asarray(tradeoff["alpha"], float)
    b = np.asarray(tradeoff["beta"], float)
    fig, ax = plt.subplots(figsize=(4.8, 4.6))
    ax.plot([0, 1], [1, 0], ":", color="0.5", label="perfect privacy (β = 1 − α)")
    ax.fill_between(a, 0.0, b, color="C0", alpha=0.15, linewidth=0)
    ax.plot(a, b, color="C0", label="certified lower trade-off β(α)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    ax.set_xlabel("α: false-positive rate of a membership test")
    ax.set_ylabel("β: its miss rate is at least")
    ax.set_title("f-DP trade-off (Dong, Roth, Su 2022)", fontsize=10)
    ax.grid(True, alpha=0.25)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
