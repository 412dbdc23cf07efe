"""The picture of docs/audit.md: empirical lower bounds next to the certified interval, across noise levels.

DP-SGD with Poisson rate q = 1/2 and 20 steps (the digits demonstration's run) at noise multipliers
sigma in [1, 4]; a one-run audit with 2000 white-box Dirac canaries, simulated exactly (each step a canary
coordinate sees ``1[sampled] + N(0, sigma^2)``, scored with the likelihood ratio of the claimed run):

* the certified epsilon interval at delta = 1e-5 (tightdp's default accountant);
* what an optimal attack on a correct implementation shows (``expected_audit``, median);
* the empirical lower bound of one simulated correct run and of one broken run (noise with the mean's
  scale, ``sigma / B``, on the sum, B = 1400 the expected batch) — both audited with the f-DP one-run
  bound, (eps, delta) family, 95 %.

    python examples/audit_docs_figure.py [--out audit_figures]   # writes empirical_vs_certified.png / .md
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from tightdp.audit import (
    epsilon_one_run_fdp,
    expected_audit,
    fdp_one_run_test,
    run_curve,
)

DELTA, BETA, RATE, STEPS, CANARIES, BATCH = 1e-5, 0.05, 0.5, 20, 2000, 1400
SIGMAS = (1.0, 1.5, 2.0, 2.5, 3.0, 4.0)
METHOD = "fdp-eps-delta"


def dirac_scores(*, sigma_claimed: float, sigma_used: float, seed: int):
    """In and out scores of ``CANARIES`` Dirac canaries of an exactly simulated run."""
    rng = np.random.default_rng(seed)
    member = rng.random(CANARIES) < 0.5
    x = (rng.random((STEPS, CANARIES)) < RATE) * member + sigma_used * rng.standard_normal((STEPS, CANARIES))
    s2 = sigma_claimed**2
    score = np.sum(np.logaddexp(math.log1p(-RATE), math.log(RATE) + (2 * x - 1) / (2 * s2)), axis=0)
    return score[member], score[~member]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="audit_figures")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    tests = []
    for i, sigma in enumerate(SIGMAS):
        curve, _ = run_curve(noise_multiplier=sigma, sampling_rate=RATE, steps=STEPS)
        exp = expected_audit(canaries=CANARIES, delta=DELTA, beta=BETA, method=METHOD, draws=51, seed=i, curve=curve)
        _, cert = run_curve(noise_multiplier=sigma, sampling_rate=RATE, steps=STEPS, delta=DELTA)
        g_in, g_out = dirac_scores(sigma_claimed=sigma, sigma_used=sigma, seed=100 + i)
        b_in, b_out = dirac_scores(sigma_claimed=sigma, sigma_used=sigma / BATCH, seed=200 + i)
        good = epsilon_one_run_fdp(in_scores=g_in, out_scores=g_out, delta=DELTA, beta=BETA, family="eps-delta")
        bad = epsilon_one_run_fdp(in_scores=b_in, out_scores=b_out, delta=DELTA, beta=BETA, family="eps-delta")
        tests.append(
            (
                fdp_one_run_test(in_scores=g_in, out_scores=g_out, curve=curve, beta=BETA).rejected,
                fdp_one_run_test(in_scores=b_in, out_scores=b_out, curve=curve, beta=BETA).rejected,
            )
        )
        rows.append(
            (sigma, cert.lower, cert.upper, exp.epsilon_lower, exp.epsilon_upper, good.epsilon_lower, bad.epsilon_lower)
        )
    lines = [
        "| sigma | certified eps | correct run shows (median) | empirical, correct | empirical, broken | "
        "f-DP test rejects the certified curve (correct / broken) |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {s:g} | [{lo:.3f}, {up:.3f}] | {el:.3f} .. {eu:.3f} | {g:.3f} | {b:.3f}"
        f"{' (> upper)' if b > up else ''} | {'yes' if tg else 'no'} / {'yes' if tb else 'no'} |"
        for (s, lo, up, el, eu, g, b), (tg, tb) in zip(rows, tests)
    ]
    (out / "empirical_vs_certified.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = np.array(rows)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.fill_between(r[:, 0], r[:, 1], r[:, 2], color="C0", alpha=0.3)
    ax.plot(r[:, 0], r[:, 2], "-", color="C0", label="certified epsilon (upper end, a proof)")
    ax.plot(r[:, 0], r[:, 3], "--", color="C2", label="a correct run shows (optimal attack, median)")
    ax.plot(r[:, 0], r[:, 5], "o", color="C2", label="empirical lower bound, correct run")
    ax.plot(r[:, 0], r[:, 6], "x", color="C3", ms=8, label="empirical lower bound, broken run")
    ax.set_xlabel("noise multiplier sigma (q = 1/2, 20 steps)")
    ax.set_ylabel(f"epsilon at delta = {DELTA:g}")
    ax.set_title(f"One-run audit with {CANARIES} Dirac canaries (95 %)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "empirical_vs_certified.png", dpi=120)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
