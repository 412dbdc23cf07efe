"""Per-example accounting before and after a change: the same random settings run on two source trees.

    python benchmarks/compare_individual.py --before /work/main/src --after src [--settings 240]

Each tree runs in its own subprocess (``PYTHONPATH=<tree>``) over the same seeded settings (sampling
rate 1 or below, sigma, number of examples, buckets, sigma-grid, missing-norm policy, dense / sparse /
batched recording with zero, NaN and over-the-clip norms) and every query of ``tightdp.individual``:
``epsilons`` (PLD interval, RDP, GDP), ``deltas``, ``worst_case_epsilon``, ``gdp_mus``, ``rdp_curves``,
``active`` (every rule), the save / load round trip, and the module functions ``gdp_mu``,
``gdp_epsilon``, ``gdp_delta``, ``rdp.gaussian_budget_mu`` and ``GDPFilter``. Every number is compared to
the last bit; a difference is reported with its size and whether it lies on the safe side (an upper
end or a budget's delta larger, a lower end or a budget smaller, a filter admitting fewer examples).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile

import numpy as np

#: name -> which way a change is safe: +1 larger is safe (upper ends), -1 smaller is safe (lower ends,
#: budgets), 0 must be identical, "mask" fewer True is safe
SAFE = {
    "pld_upper": +1,
    "pld_lower": -1,
    "deltas": +1,
    "rdp": +1,
    "gdp_eps": +1,
    "worst": +1,
    "gdp_mus": +1,
    "rdp_curves": +1,
    "active_default": "mask",
    "active_pld": "mask",
    "active_rdp": "mask",
    "active_paper": "mask",
    "roundtrip": 0,
    "gdp_mu": -1,
    "gdp_epsilon": +1,
    "gdp_delta": 0,
    "budget_mu": -1,
    "filter_budget": -1,
    "filter_eps": +1,
    "filter_delta_up": +1,
    "filter_delta_lo": -1,
    "kind": 0,
}


def run(n_settings: int, out: str) -> None:
    from tightdp.individual import GDPFilter, IndividualAccountant, gdp_delta, gdp_epsilon, gdp_mu
    from tightdp.individual.rdp import INDIVIDUAL_ORDERS, gaussian_budget_mu

    odo_eps = getattr(GDPFilter, "epsilon", None) or GDPFilter.epsilon_spent
    odo_delta = getattr(GDPFilter, "delta", None) or GDPFilter.delta_spent
    rng = np.random.default_rng(20261125)
    res = []
    for i in range(n_settings):
        q = 1.0 if rng.random() < 0.35 else float(rng.choice([0.01, 0.05, 0.1, 0.3]) * rng.uniform(0.5, 1.5))
        sigma = float(rng.uniform(0.6, 3.0))
        n = int(rng.integers(1, 7))
        buckets = int(rng.choice([4, 10, 25, 60]))
        grid = "paper" if rng.random() < 0.2 else "uniform"
        missing = "last-seen" if rng.random() < 0.15 else "worst-case"
        steps = int(rng.integers(1, 120 if q == 1.0 else 25))
        clip = float(rng.uniform(0.5, 2.0))
        delta = float(10 ** rng.uniform(-10, -2))
        eps_q = float(rng.uniform(0.1, 4.0))
        kw = dict(
            num_examples=n,
            noise_multiplier=sigma,
            clip_norm=clip,
            sampling_rate=q,
            num_buckets=buckets,
            sigma_grid=grid,
            missing_norms=missing,
        )
        acc = IndividualAccountant(**kw)
        t = 0
        while t < steps:
            norms = rng.uniform(0, 2.5 * clip, n)
            norms[rng.random(n) < 0.1] = 0.0
            norms[rng.random(n) < 0.05] = np.nan
            mode = rng.random()
            if mode < 0.2 and steps - t >= 3:
                acc.record_steps(rng.uniform(0, 2 * clip, (3, n)))
                t += 3
                continue
            if mode < 0.4:
                idx = np.sort(rng.choice(n, size=int(rng.integers(0, n + 1)), replace=False))
                acc.record_step(norms[idx], indices=idx)
            else:
                acc.record_step(norms)
            t += 1
        r: dict = {"setting": {**kw, "steps": steps, "delta": delta, "epsilon": eps_q}}
        e = acc.epsilons(delta)
        r["pld_upper"], r["pld_lower"], r["kind"] = e.upper, e.lower, e.kind
        r["deltas"] = acc.deltas(eps_q).upper
        r["rdp"] = acc.epsilons(delta, method="rdp").upper
        r["worst"] = acc.worst_case_epsilon(delta).upper
        r["rdp_curves"] = acc.rdp_curves()[1]
        r["active_default"] = acc.active(epsilon=eps_q, delta=delta)
        r["active_rdp"] = acc.active(epsilon=eps_q, delta=delta, rule="rdp")
        if q == 1.0 or i % 3 == 0:
            r["active_pld"] = acc.active(epsilon=eps_q, delta=delta, rule="pld")
        if q == 1.0 or i % 6 == 0:  # the fitted mu-GDP curve of DP-SGD is the slow part
            r["gdp_eps"] = acc.epsilons(delta, method="gdp").upper
            r["gdp_mus"] = acc.gdp_mus().upper
            r["active_paper"] = acc.active(epsilon=eps_q, delta=delta, rule="paper")
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "l.npz")
            acc.save(p)
            r["roundtrip"] = np.array([IndividualAccountant.load(p) == acc])
        mu = float(10 ** rng.uniform(-2, 1.5))
        r["gdp_mu"] = gdp_mu(epsilon=eps_q, delta=delta)
        r["gdp_epsilon"] = gdp_epsilon(mu=mu, delta=delta)
        r["gdp_delta"] = np.asarray(gdp_delta(epsilon=np.array([0.0, eps_q, 3 * eps_q]), mu=mu))
        r["budget_mu"] = gaussian_budget_mu(eps_q, delta, INDIVIDUAL_ORDERS)
        f = GDPFilter(epsilon=eps_q, delta=delta)
        for _ in range(int(rng.integers(1, 30))):
            f.admit(float(rng.uniform(0, 0.5)))
        r["filter_budget"] = f.budget
        r["filter_eps"] = odo_eps(f, delta=delta).upper
        d = odo_delta(f, epsilon=eps_q)
        r["filter_delta_up"], r["filter_delta_lo"] = d.upper, d.lower
        res.append({k: (np.asarray(v) if k not in ("setting", "kind") else v) for k, v in r.items()})
    with open(out, "wb") as fh:
        pickle.dump(res, fh)


def compare(before: list, after: list) -> dict:
    stats: dict = {}
    for b, a in zip(before, after, strict=True):
        assert b["setting"] == a["setting"]
        for k, way in SAFE.items():
            if k not in b and k not in a:
                continue
            s = stats.setdefault(k, {"values": 0, "identical": 0, "safe": 0, "unsafe": 0, "max_rel": 0.0})
            if k == "kind":
                s["values"] += 1
                s["identical" if a[k] == b[k] else "unsafe"] += 1
                continue
            x, y = np.asarray(b[k]), np.asarray(a[k])
            if x.dtype == object or y.dtype == object or x.shape != y.shape:
                same = x.tolist() == y.tolist()
                s["values"] += 1
                s["identical" if same else "unsafe"] += 1
                continue
            x, y = x.reshape(-1), y.reshape(-1)
            s["values"] += x.size
            same = (x == y) | (np.isnan(x.astype(float)) & np.isnan(y.astype(float)))
            s["identical"] += int(same.sum())
            if same.all():
                continue
            if way == "mask":
                ok = ~y[~same] | x[~same]  # after may only drop examples
            elif way == 0:
                ok = np.zeros((~same).sum(), dtype=bool)
            else:
                ok = (y[~same] - x[~same]) * way > 0
            s["safe"] += int(ok.sum())
            s["unsafe"] += int((~ok).sum())
            if way != "mask":
                xf, yf = x[~same].astype(float), y[~same].astype(float)
                rel = np.abs(yf - xf) / np.maximum(np.abs(xf), 1e-300)
                s["max_rel"] = max(s["max_rel"], float(np.max(rel)))
    return stats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--settings", type=int, default=240)
    ap.add_argument("--keep", help="directory for the raw results (before.pkl, after.pkl); reused if present")
    ns = ap.parse_args()
    keep = ns.keep or tempfile.mkdtemp()
    os.makedirs(keep, exist_ok=True)
    out = {}
    for side, tree in (("before", ns.before), ("after", ns.after)):
        path = os.path.join(keep, f"{side}.pkl")
        if not (side == "before" and os.path.exists(path)):
            env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
            subprocess.run(
                [sys.executable, os.path.abspath(__file__), "--run", str(ns.settings), path], env=env, check=True
            )
        with open(path, "rb") as fh:
            out[side] = pickle.load(fh)
    print(json.dumps(compare(out["before"], out["after"]), indent=1))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--run":
        run(int(sys.argv[2]), sys.argv[3])
    else:
        main()
