"""One epsilon(1e-5) call of the horizon benchmark's settings in a fresh process, import included (cold), for
whole-process timers (``/usr/bin/time -v``, hyperfine): tightdp at its default accuracy (or ``--abs``:
``eps_error=1e-3``), or dp-accounting 0.6.0's ``PLDAccountant`` at a given discretisation interval.

    .venv/bin/python benchmarks/one_call.py tightdp A 1e6 [--abs]
    .venv/bin/python benchmarks/one_call.py dp-accounting A 1e6 0.000781

Settings: A sigma 1, q 0.01; B sigma 0.8, q 4e-3 (``bench_horizon_warm.py`` lists the intervals it compares at).
"""
import sys

SETTINGS = {"A": (1.0, 0.01), "B": (0.8, 0.004)}
tool, name, k = sys.argv[1], sys.argv[2], int(float(sys.argv[3]))
sigma, q = SETTINGS[name]
if tool == "tightdp":
    from tightdp import ConnectDotsAccountant, dpsgd_mechanism

    acc = ConnectDotsAccountant(eps_error=1e-3) if "--abs" in sys.argv[4:] else ConnectDotsAccountant()
    b = acc.compose(dpsgd_mechanism(noise_multiplier=sigma, sampling_rate=q), k).epsilon(1e-5)
    print(b.lower, b.upper)
elif tool == "dp-accounting":
    from dp_accounting import dp_event
    from dp_accounting.pld import PLDAccountant

    acc = PLDAccountant(value_discretization_interval=float(sys.argv[4]))
    acc.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)), k)
    print(acc.get_epsilon(1e-5))
else:
    raise SystemExit(f"unknown tool {tool!r}: tightdp or dp-accounting")
