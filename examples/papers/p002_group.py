"""Ganesh 2024 (group-level DP for DP-SGD via mixtures of Gaussians): Sec. 4, Fig. 1-2.

    python examples/papers/p002_group.py [--out DIR] [--quick]

T = 2000 DP-SGD steps (CIFAR-10, 20 epochs of 100 iterations), delta = 1e-6. Poisson sampling with
q = 0.01 (Ganesh 2024 Thm 3.1: a mixture of Gaussians with sensitivity Binom(k, q)) and, for Fig. 2, fixed
batches B = 500 of n = 50 000 with the noise doubled (Thm 3.3, 2 Hypergeom(B, n + k, k)). Three
curves per group size k: the mixture-of-Gaussians analysis (certified interval), the group-privacy
lemma (Ganesh 2024 Lemma 1.1) applied to the example-level curve, and the linear lower bound k eps_1.
The paper reports that the lemma route returns eps = inf for sigma = 1 and k >= 9 (TensorFlow
Privacy); tightdp's lemma search refuses there too, because the example-level delta' it needs is
below 1e-250.
"""

from __future__ import annotations

import time

import tightdp

try:
    from _common import Report, fmt, interval, parse_args, pyplot
except ImportError:
    from ._common import Report, fmt, interval, parse_args, pyplot

T, Q, DELTA = 2000, 0.01, 1e-6


def main() -> None:
    args = parse_args(__doc__)
    rep = Report(
        "p002_group",
        "Ganesh 2024: tight group-level DP for DP-SGD (Ganesh)",
        "Tight Group-Level DP Guarantees for DP-SGD with Sampling via Mixture of Gaussians Mechanisms; "
        "Sec. 4, Fig. 1-2",
        args.out,
    )
    sizes = [1, 2, 4, 8, 9] if args.quick else [1, 2, 3, 4, 6, 8, 9, 10, 12, 16]
    t = time.perf_counter()
    poisson = tightdp.group_curve(noise_multiplier=1.0, sampling_rate=Q, steps=T, delta=DELTA, group_sizes=sizes)
    t_p = time.perf_counter() - t
    for r in poisson:
        lemma = r.group_privacy_lemma_epsilon
        paper = "∞ (k ≥ 9)" if r.group_size >= 9 else "finite"
        rep.row(
            f"Fig. 1, σ = 1, k = {r.group_size}: group-privacy lemma (Lemma 1.1)",
            paper,
            "∞ (refused)" if lemma is None else lemma,
            "—",
            "" if lemma is not None else "tightdp refuses: " + (r.group_privacy_lemma.note or "")[:120] + "…",
            key=f"lemma_{r.group_size}",
            extra={"finite": lemma is not None},
        )
        rep.row(
            f"Fig. 1, σ = 1, k = {r.group_size}: mixture of Gaussians (Thm 3.1)",
            None,
            float(r.epsilon.estimate),
            interval(r.epsilon),
            f"linear lower bound k·eps_1 = {r.linear_lower_bound:.4g}; "
            f"ratio to it {float(r.epsilon.upper) / r.linear_lower_bound:.2f}",
            key=f"mog_{r.group_size}",
            extra={"upper": float(r.epsilon.upper), "lower": float(r.epsilon.lower), "linear": r.linear_lower_bound},
        )
    rep.say(f"Poisson curve: {t_p:.1f} s for {len(sizes)} group sizes.")
    fixed = []
    if not args.quick:
        fixed = tightdp.group_curve(
            noise_multiplier=2.0,
            steps=T,
            delta=DELTA,
            group_sizes=sizes,
            sampling="fixed-batch",
            batch_size=500,
            dataset_size=50_000,
        )
        for r in fixed:
            lemma = r.group_privacy_lemma_epsilon
            rep.row(
                f"Fig. 2, fixed batch B = 500, n = 50 Koskela et al. 2023, σ = 2, k = {r.group_size}: MoG (Thm 3.3)",
                None,
                float(r.epsilon.estimate),
                interval(r.epsilon),
                f"lemma: {fmt(lemma) if lemma is not None else '∞ (refused)'}; "
                f"linear lower bound {r.linear_lower_bound:.4g}",
                key=f"fixed_{r.group_size}",
            )
    if not args.no_plots:
        plt = pyplot()
        fig, axes = plt.subplots(1, 2 if fixed else 1, figsize=(10 if fixed else 5.5, 3.6), squeeze=False)
        for ax, curve, title in ((axes[0][0], poisson, "Poisson, q = 0.01, σ = 1 (Fig. 1)"),) + (
            ((axes[0][1], fixed, "fixed batch 500/50000, σ = 2 (Fig. 2)"),) if fixed else ()
        ):
            ks = [r.group_size for r in curve]
            ax.fill_between(
                ks,
                [r.epsilon.lower for r in curve],
                [r.epsilon.upper for r in curve],
                alpha=0.4,
                label="mixture of Gaussians (certified)",
            )
            lem = [(r.group_size, r.group_privacy_lemma_epsilon) for r in curve if r.group_privacy_lemma_epsilon]
            if lem:
                ax.plot(*zip(*lem), "o--", label="group-privacy lemma")
            ax.plot(ks, [r.linear_lower_bound for r in curve], ":", label="k·eps_1 (lower bound)")
            ax.set_yscale("log")
            ax.set_xlabel("group size k")
            ax.set_ylabel("epsilon at delta = 1e-6")
            ax.set_title(title, fontsize=9)
            ax.legend(fontsize=7)
        rep.figure(fig, "p002_group.png", "Ganesh 2024 Fig. 1-2: group-level epsilon, T = 2000, delta = 1e-6")
        plt.close(fig)
    rep.write()


if __name__ == "__main__":
    main()
