"""Regenerate tests/data/jax_privacy_audit.json: jax_privacy's CanaryScoreAuditor on fixed canary scores.

    pip install jax-privacy==2.0.0   # CPU; pulls jax, jaxlib, optax, chex
    python tests/data/jax_privacy_audit.py

Scores: seed-fixed Gaussian canaries (out N(0, 1), in N(mu, 1)); each case is evaluated at explicit
thresholds (jax_privacy's ``Explicit`` strategy: no threshold correction) so that the same counts go
into both implementations.
"""

import json
from pathlib import Path

import numpy as np


def cases():
    out = []
    for seed, mu, n_in, n_out in ((0, 1.0, 500, 500), (1, 2.0, 1000, 1000), (2, 3.0, 300, 700), (3, 0.5, 5000, 5000)):
        rng = np.random.default_rng(seed)
        np.round(rng.standard_normal(n_in) + mu, 6)
        np.round(rng.standard_normal(n_out), 6)
        for t in (0.5 * mu, mu, 1.5 * mu, 2.0 * mu):
            for delta in (1e-5, 1e-3):
                out.append(
                    {
                        "seed": seed,
                        "mu": mu,
                        "n_in": n_in,
                        "n_out": n_out,
                        "threshold": t,
                        "delta": delta,
                        "significance": 0.05,
                    }
                )
    return out


def scores(case):
    rng = np.random.default_rng(case["seed"])
    ins = np.round(rng.standard_normal(case["n_in"]) + case["mu"], 6)
    outs = np.round(rng.standard_normal(case["n_out"]), 6)
    return ins, outs


def main():
    import jax_privacy
    from jax_privacy import auditing as A

    rows = []
    for c in cases():
        ins, outs = scores(c)
        au = A.CanaryScoreAuditor(ins, outs)
        ex = A.Explicit(c["threshold"])
        rows.append(
            {
                **c,
                "epsilon_one_run": float(au.epsilon_one_run(c["significance"], c["delta"], threshold_strategy=ex)),
                "epsilon_one_run_fdp": float(
                    au.epsilon_one_run_fdp(c["significance"], c["delta"], threshold_strategy=ex)
                ),
                "epsilon_clopper_pearson": float(
                    au.epsilon_clopper_pearson(c["significance"], c["delta"], threshold_strategy=ex)
                ),
            }
        )
    doc = {
        "source": f"jax_privacy {getattr(jax_privacy, '__version__', '2.0.0')} auditing.CanaryScoreAuditor, "
        "Explicit thresholds; regenerate with python tests/data/jax_privacy_audit.py",
        "rows": rows,
    }
    Path(__file__).with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
