"""Before/after equivalence of every front end over random settings (the run-description refactor changes
no number).

    # the settings are drawn from a fixed seed; evaluate them with each checkout's tightdp:
    PYTHONPATH=/work/main/src python benchmarks/run_equivalence.py eval before.json
    PYTHONPATH=src            python benchmarks/run_equivalence.py eval after.json
    python benchmarks/run_equivalence.py compare before.json after.json

``run_equivalence_main.json`` holds the settings evaluated with main at 20a2258 (240 settings: 150
``dpsgd_epsilon`` over Poisson with all six accountants, random allocation, shuffling and truncated
Poisson; 40 group questions; 25 statements; 9 calibrations; 16 Opacus accountants); this branch gives the
same intervals to the last bit (``compare`` prints "0 differ").

Only the keyword API both checkouts share is called (``dpsgd_epsilon``, ``group_epsilon``, ``group_curve``,
``privacy_statement``, ``calibrate_noise`` / ``calibrate_steps`` / ``calibrate_sampling_rate``, the Opacus
``TightDPAccountant`` for Poisson, shuffled and fixed-order loaders), so the
same call runs before and after. Every float of every interval is compared to the last bit (``repr``).
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

SEED = 20261125


def settings(
    n_dpsgd: int = 150, n_group: int = 40, n_statement: int = 25, n_cal: int = 9, n_opacus: int = 16
) -> list[dict]:
    rng = random.Random(SEED)
    out: list[dict] = []
    accountants = ["connect-dots", "connect-dots", "prv", "fourier", "rdp", "gdp", "edgeworth"]
    schemes = ["poisson", "poisson", "poisson", "random-allocation", "shuffle", "truncated-poisson"]
    for _ in range(n_dpsgd):
        s = rng.choice(schemes)
        sigma = round(rng.uniform(0.7, 4.0), 3)
        delta = 10 ** rng.uniform(-9, -3)
        kw: dict = {"noise_multiplier": sigma, "delta": delta}
        if s == "poisson":
            kw.update(
                sampling_rate=round(10 ** rng.uniform(-3.5, -0.5), 6),
                steps=rng.randint(1, 3000),
                accountant=rng.choice(accountants),
            )
        elif s in ("random-allocation", "shuffle"):
            t = rng.randint(1, 60)
            kw.update(sampling_rate=1.0 / t, steps=t * rng.randint(1, 20), sampling=s)
            if rng.random() < 0.3:
                kw["dataset_size"] = t * rng.randint(1, 100)
        else:
            n = rng.randint(50, 5000)
            kw.update(
                sampling_rate=round(rng.uniform(0.001, 0.1), 5),
                steps=rng.randint(1, 300),
                sampling=s,
                dataset_size=n,
                max_batch_size=rng.randint(1, n),
            )
        if rng.random() < 0.25:
            kw["eps_error"] = rng.choice([0.01, 0.05])
        elif rng.random() < 0.2 and kw.get("accountant", "connect-dots") == "connect-dots":
            kw["rel_error"] = rng.choice([1e-2, 3e-3])
        if kw.get("accountant") not in (None, "connect-dots") and "rel_error" in kw:
            del kw["rel_error"]
        out.append({"fn": "dpsgd_epsilon", "kw": kw})
    for _ in range(n_group):
        s = rng.choice(["poisson", "poisson", "fixed-batch", "random-allocation", "shuffle"])
        sigma = round(rng.uniform(0.8, 3.0), 3)
        kw = {
            "noise_multiplier": sigma,
            "delta": 10 ** rng.uniform(-8, -4),
            "group_size": rng.randint(1, 6),
            "sampling": s,
        }
        if s == "poisson":
            kw.update(sampling_rate=round(10 ** rng.uniform(-3, -1), 6), steps=rng.randint(1, 1000))
        elif s == "fixed-batch":
            n = rng.randint(100, 10000)
            kw.update(dataset_size=n, batch_size=rng.randint(1, max(1, n // 20)), steps=rng.randint(1, 500))
        else:
            t = rng.randint(2, 30)
            kw.update(sampling_rate=1.0 / t, steps=t * rng.randint(1, 8))
        kw["eps_error"] = 0.02
        fn = "group_curve" if rng.random() < 0.3 else "group_epsilon"
        if fn == "group_curve":
            kw["group_sizes"] = sorted({1, kw.pop("group_size"), rng.randint(1, 4)})
        out.append({"fn": fn, "kw": kw})
    for _ in range(n_statement):
        s = rng.choice(
            ["poisson", "fixed-batch", "without-replacement", "random-allocation", "shuffle", "truncated-poisson"]
        )
        n = rng.randint(1000, 60000)
        b = rng.randint(10, 512)
        kw = {
            "noise_multiplier": round(rng.uniform(0.8, 3.0), 3),
            "delta": 10 ** rng.uniform(-7, -4),
            "sampling": s,
            "group_sizes": rng.choice([[], [1, 2], [3]]),
            "eps_error": 0.02,
        }
        if s in ("random-allocation", "shuffle"):
            t = rng.randint(2, 40)
            kw.update(sampling_rate=1.0 / t, steps=t * rng.randint(1, 6))
        elif s == "truncated-poisson":
            kw.update(dataset_size=n, batch_size=b, epochs=rng.randint(1, 2), max_batch_size=b + rng.randint(0, 64))
            kw["group_sizes"] = []
        else:
            kw.update(dataset_size=n, batch_size=b, epochs=rng.choice([1, 2, 0.5]))
            if s == "without-replacement":
                kw["group_sizes"] = []
        out.append({"fn": "privacy_statement", "kw": kw})
    for i in range(n_cal):
        fn = ["calibrate_noise", "calibrate_steps", "calibrate_sampling_rate"][i % 3]
        s = ["poisson", "random-allocation", "shuffle"][(i // 3) % 3] if fn != "calibrate_sampling_rate" else "poisson"
        kw = {"target_epsilon": round(rng.uniform(1.0, 6.0), 2), "delta": 1e-5, "sampling": s, "eps_error": 0.05}
        t = rng.randint(5, 40)
        q = 1.0 / t if s != "poisson" else round(10 ** rng.uniform(-2.5, -1), 5)
        if fn == "calibrate_noise":
            kw.update(sampling_rate=q, steps=t * rng.randint(1, 10) if s != "poisson" else rng.randint(10, 500))
        elif fn == "calibrate_steps":
            kw.update(sampling_rate=q, noise_multiplier=round(rng.uniform(1.0, 3.0), 3), max_steps=5000)
        else:
            kw.update(noise_multiplier=round(rng.uniform(0.8, 2.0), 3), steps=rng.randint(10, 300))
        out.append({"fn": fn, "kw": kw})
    for i in range(n_opacus):  # TightDPAccountant: Poisson histories, shuffled and fixed-order loaders
        t = rng.randint(2, 40)
        loader = ["poisson", "shuffle", "fixed-order", "shuffle"][i % 4]
        steps = t * rng.randint(1, 5) + (rng.randint(1, t - 1) if rng.random() < 0.4 else 0)
        history = [[round(rng.uniform(0.8, 3.0), 3), 1.0 / t, steps]]
        if loader == "poisson" and rng.random() < 0.5:
            history.append([round(rng.uniform(0.8, 3.0), 3), 1.0 / t, rng.randint(1, 50)])
        out.append(
            {
                "fn": "opacus",
                "kw": {
                    "history": history,
                    "sampling": loader,
                    "delta": 1e-5,
                    "facts": {"dataset_size": 10 * t, "batch_size": 10, "drop_last": False},
                },
            }
        )
    return out


def _bounds(b) -> list:
    return [repr(b.lower), repr(b.estimate), repr(b.upper), b.kind]


def evaluate(item: dict):
    import tightdp
    from tightdp import calibration

    fn, kw = item["fn"], dict(item["kw"])
    if fn == "dpsgd_epsilon":
        return _bounds(tightdp.dpsgd_epsilon(**kw))
    if fn == "group_epsilon":
        return _bounds(tightdp.group_epsilon(**kw))
    if fn == "group_curve":
        return [
            [r.group_size, _bounds(r.epsilon), _bounds(r.example_epsilon), repr(r.group_privacy_lemma.epsilon)]
            for r in tightdp.group_curve(**kw)
        ]
    if fn == "privacy_statement":
        st = tightdp.privacy_statement(**kw)
        return {
            "example": _bounds(st.epsilon),
            "steps": st.parameters["steps"],
            "groups": [[g.group_size, None if g.epsilon is None else _bounds(g.epsilon)] for g in st.groups],
        }
    if fn == "opacus":
        from tightdp.integrations.opacus import TightDPAccountant

        acc = TightDPAccountant(eps_error=0.02)
        acc.history = [tuple(h) for h in kw["history"]]
        acc.sampling, acc.loader_facts = kw["sampling"], kw["facts"]
        return _bounds(acc.get_bounds(kw["delta"]))
    cal = getattr(calibration, fn)(**kw)
    return {
        "noise": repr(cal.noise_multiplier),
        "rate": repr(cal.sampling_rate),
        "steps": cal.steps,
        "epsilon": _bounds(cal.epsilon),
    }


def main(argv: list[str]) -> int:
    if argv[1] == "eval":
        items = settings()
        results = []
        t0 = time.perf_counter()
        for item in items:
            try:
                res = {"ok": evaluate(item)}
            except Exception as exc:  # a refusal is a result too: it must be the same before and after
                res = {"error": type(exc).__name__}
            results.append({**item, **res})
        Path(argv[2]).write_text(json.dumps({"seconds": time.perf_counter() - t0, "results": results}, indent=1))
        print(f"{len(results)} settings in {time.perf_counter() - t0:.1f} s")
        return 0
    before = json.loads(Path(argv[2]).read_text())["results"]
    after = json.loads(Path(argv[3]).read_text())["results"]
    assert len(before) == len(after)
    diff = [(b, a) for b, a in zip(before, after) if b.get("ok") != a.get("ok") or b.get("error") != a.get("error")]
    errors = sum("error" in b for b in before)
    print(f"{len(before)} settings ({errors} refused by both), {len(diff)} differ")
    for b, a in diff:
        print(json.dumps(b)[:400], "\n  after:", json.dumps(a)[:400])
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
