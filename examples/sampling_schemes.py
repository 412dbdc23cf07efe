"""Sampling schemes: random allocation vs Poisson at equal noise, and shuffling's lower bound vs Poisson.

Run from the repository root (about 10 s)::

    .venv/bin/python examples/sampling_schemes.py [--out sampling_schemes.png]

Left: CIFAR-10 shape (50,000 examples, t = 196 steps per epoch, noise multiplier 1,
delta 1e-5): the certified epsilon of balls-and-bins batches (each example in
exactly one step per epoch) against Poisson sampling at rate 1/t, over 1-100
epochs. Both are intervals [lower, upper] at most 0.02 wide; balls and bins is
more private at equal noise (Feldman & Shenfeld, arXiv 2602.17284).

Right: one of Chua et al.'s settings (arXiv 2403.17673: one epoch of t = 1000
shuffled batches, delta 1e-5) over noise multipliers 0.6-2: the certified
*lower* bound on shuffling's epsilon (their attack pair) against Poisson's
epsilon, and the certified upper bound for shuffling (no amplification). Where
the lower bound sits above the Poisson curve, reporting Poisson's epsilon for
shuffled training under-reports.
"""

from __future__ import annotations

import argparse

import numpy as np

import tightdp
from tightdp.schemes import allocation_epsilon, shuffle_epsilon


def allocation_vs_poisson(epochs, *, sigma=1.0, t=196, delta=1e-5):
    rows = []
    for e in epochs:
        ra = allocation_epsilon(noise_multiplier=sigma, steps_per_epoch=t, epochs=int(e), delta=delta)
        po = tightdp.dpsgd_epsilon(noise_multiplier=sigma, sampling_rate=1 / t, steps=t * int(e), delta=delta)
        rows.append((int(e), ra.lower, ra.upper, po.lower, po.upper))
    return rows


def shuffle_vs_poisson(sigmas, *, t=1000, epochs=1, delta=1e-5):
    rows = []
    for s in sigmas:
        sh = shuffle_epsilon(noise_multiplier=float(s), steps_per_epoch=t, epochs=epochs, delta=delta)
        po = tightdp.dpsgd_epsilon(noise_multiplier=float(s), sampling_rate=1 / t, steps=t * epochs, delta=delta)
        rows.append((float(s), sh.lower, sh.upper, po.lower, po.upper))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="sampling_schemes.png")
    args = ap.parse_args()

    left = allocation_vs_poisson([1, 2, 5, 10, 20, 50, 100])
    print("epochs | balls-and-bins [lower, upper] | Poisson [lower, upper]")
    for e, a, b, c, d in left:
        print(f"{e:6d} | [{a:.3f}, {b:.3f}] | [{c:.3f}, {d:.3f}]")
    right = shuffle_vs_poisson(np.round(np.linspace(0.6, 2.0, 8), 2))
    print("\nsigma | shuffle lower (Chua et al.) | shuffle upper | Poisson upper")
    for s, a, b, _c, d in right:
        print(f"{s:5.2f} | {a:.3f} | {b:.3f} | {d:.3f}")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    e = [r[0] for r in left]
    ax1.fill_between(e, [r[3] for r in left], [r[4] for r in left], color="tab:blue", alpha=0.4)
    ax1.plot(e, [r[4] for r in left], "o-", color="tab:blue", label="Poisson, rate 1/t (upper)")
    ax1.fill_between(e, [r[1] for r in left], [r[2] for r in left], color="tab:green", alpha=0.4)
    ax1.plot(e, [r[2] for r in left], "s-", color="tab:green", label="balls and bins (upper)")
    ax1.set_xscale("log")
    ax1.set_xlabel("epochs")
    ax1.set_ylabel("certified epsilon at delta = 1e-5")
    ax1.set_title("CIFAR-10 shape: t = 196, noise 1")
    ax1.legend()
    s = [r[0] for r in right]
    ax2.plot(s, [r[4] for r in right], "o-", color="tab:blue", label="Poisson, rate 1/t (upper)")
    ax2.plot(s, [r[1] for r in right], "v-", color="tab:red", label="shuffling: certified lower bound")
    ax2.plot(s, [r[2] for r in right], "^--", color="tab:gray", label="shuffling: certified upper bound")
    ax2.set_yscale("log")
    ax2.set_xlabel("noise multiplier")
    ax2.set_title("Chua et al.: one epoch, t = 1000")
    ax2.legend()
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
