"""One epsilon(1e-5) call of the horizon benchmark's settings in a fresh process, import included (cold), for
whole-process timers (``/usr/bin/time -v``, hyperfine): tightdp at its default accuracy (or ``--abs``:
``eps_error=1e-3``), or dp-accounting 0.6.0's ``PLDAccountant`` at a given discretisation interval.

    .venv/bin/python benchmarks/one_call.py tightdp A 1e6 [--abs]
    .venv/bin/python benchmarks/one_call.py dp-accounting A 1e6 0.000781

Settings: A sigma 1, q 0.01; B sigma 0.8, q 4e-3 (``bench_horizon_warm.py`` lists the intervals it compares at).
Besides the answer it prints ``import S call S``: the seconds of the library's import and of its first call in
this fresh process (cold caches, lazily built tables and plans; no memo of an earlier call), for the ratio with
the import's floor set apart.
"""

import sys
import time

t0 = time.perf_counter()

SETTINGS = {"A": (1.0, 0.01), "B": (0.8, 0.004)}
tool, name, k = sys.argv[1], sys.argv[2], int(float(sys.argv[3]))
sigma, q = SETTINGS[name]
if tool == "tightdp":
    from tightdp import ConnectDotsAccountant, dpsgd_mechanism

    t1 = time.perf_counter()
    acc = ConnectDotsAccountant(eps_error=1e-3) if "--abs" in sys.argv[4:] else ConnectDotsAccountant()
    b = acc.compose(dpsgd_mechanism(noise_multiplier=sigma, sampling_rate=q), k).epsilon(1e-5)
    t2 = time.perf_counter()
    print(b.lower, b.upper, f"import {t1 - t0:.3f} call {t2 - t1:.3f}")
elif tool == "dp-accounting":
    from dp_accounting import dp_event
    from dp_accounting.pld import PLDAccountant

    t1 = time.perf_counter()
    acc = PLDAccountant(value_discretization_interval=float(sys.argv[4]))
    acc.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)), k)
    e = acc.get_epsilon(1e-5)
    t2 = time.perf_counter()
    print(e, f"import {t1 - t0:.3f} call {t2 - t1:.3f}")
else:
    raise SystemExit(f"unknown tool {tool!r}: tightdp or dp-accounting")
