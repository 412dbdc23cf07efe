"""Per-example privacy on scikit-learn's digits: DP-SGD histograms and a filtered DP-GD run (Koskela et al. 2023, Figs. 1-2, 6-7).

    python examples/individual_dpsgd.py --out DIR [--epochs 20] [--gd-steps 60]

Part 1 trains a small MLP with DP-SGD (Poisson sampling) and accounts every
example individually (``IndividualAccountant``, dominating bucket PLDs,
Koskela et al. 2023, App. D), next to the per-example RDP upper bounds (Koskela et al. 2023, Fig. 1). Part 2
runs full-batch DP-GD with the individual GDP filter
(Koskela et al. 2023, Alg. 1): the budget is what the worst case spends in ``--gd-steps``
steps, and training continues for twice as many steps; examples whose budget
is spent drop out. Writes ``DIR/summary.json``, ``DIR/epsilon_histogram.png``
and ``DIR/filtered_dpgd.png``. Offline, CPU, well under a minute with defaults.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np


def _data(seed: int):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    return train_test_split(x, d.target, test_size=0.25, random_state=seed, stratify=d.target)


def _model(torch, hidden: int, seed: int):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(64, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 10))


def _per_class_accuracy(torch, model, x, y):
    with torch.no_grad():
        pred = model(x).argmax(dim=1).numpy()
    yy = y.numpy()
    return {int(c): float(np.mean(pred[yy == c] == c)) for c in range(10)}, float(np.mean(pred == yy))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--epochs", type=float, default=20.0, help="DP-SGD epochs (default 20)")
    p.add_argument("--batch-size", type=float, default=64.0, help="expected DP-SGD batch size")
    p.add_argument("--sigma", type=float, default=1.0, help="DP-SGD noise multiplier")
    p.add_argument("--clip", type=float, default=1.0, help="clipping norm C")
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--gd-sigma", type=float, default=20.0, help="DP-GD noise multiplier")
    p.add_argument("--gd-steps", type=int, default=60, help="worst-case DP-GD steps defining the budget")
    p.add_argument("--gd-lr", type=float, default=2.0)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    for name in ("epochs", "batch_size", "sigma", "clip", "lr", "gd_sigma", "gd_lr"):
        if not getattr(args, name) > 0:
            p.error(f"--{name.replace('_', '-')} must be > 0")
    if args.gd_steps < 1 or args.hidden < 1:
        p.error("--gd-steps and --hidden must be >= 1")

    import torch

    torch.set_num_threads(1)  # tiny model: threads only add contention
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tightdp.individual import IndividualAccountant
    from tightdp.integrations.torch import IndividualDPTrainer

    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    xtr, xte, ytr, yte = _data(args.seed)
    X, Y = torch.from_numpy(xtr), torch.from_numpy(ytr).long()
    Xt, Yt = torch.from_numpy(xte), torch.from_numpy(yte).long()
    n = X.shape[0]
    loss_fn = torch.nn.functional.cross_entropy

    # ---- part 1: DP-SGD with per-example accounting
    q = min(1.0, args.batch_size / n)
    steps = max(1, int(round(args.epochs / q)))
    model = _model(torch, args.hidden, args.seed)
    acc = IndividualAccountant(num_examples=n, noise_multiplier=args.sigma, clip_norm=args.clip, sampling_rate=q)
    tr = IndividualDPTrainer(model, loss_fn, torch.optim.SGD(model.parameters(), lr=args.lr), acc, seed=args.seed)
    for _ in range(steps):
        tr.step(X, Y)
    eps = acc.epsilons(args.delta).upper
    eps_rdp = acc.epsilons(
        args.delta, method="rdp"
    ).upper  # per-example RDP (the baseline of Koskela et al. 2023, Fig. 1)
    worst = acc.worst_case_epsilon(args.delta).upper
    per_class_acc, test_acc = _per_class_accuracy(torch, model, Xt, Yt)
    classes = {}
    for c in range(10):
        e = eps[ytr == c]
        classes[str(c)] = {
            "mean_epsilon": float(np.mean(e)),
            "median_epsilon": float(np.median(e)),
            "max_epsilon": float(np.max(e)),
            "test_accuracy": per_class_acc[c],
            "train_examples": int(e.size),
        }
    fig, ax = plt.subplots(figsize=(6, 4))
    bins = np.linspace(0.0, 1.02 * max(float(np.max(eps_rdp)), worst), 50)
    ax.hist(eps_rdp, bins=bins, color="tab:orange", alpha=0.6, label="per-example epsilon, RDP")
    ax.hist(eps, bins=bins, color="tab:blue", alpha=0.6, label="per-example epsilon, PLD")
    ax.axvline(worst, color="tab:red", ls="--", label=f"worst case {worst:.2f}")
    ax.set_xlabel(f"epsilon (delta={args.delta:g})")
    ax.set_ylabel("examples")
    ax.set_title(f"DP-SGD on digits: {steps} steps, q={q:.3f}, sigma={args.sigma:g}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "epsilon_histogram.png"), dpi=100)
    plt.close(fig)

    # ---- part 2: filtered DP-GD past the worst-case budget
    gd = IndividualAccountant(num_examples=n, noise_multiplier=args.gd_sigma, clip_norm=args.clip, sampling_rate=1.0)
    probe = IndividualAccountant(num_examples=1, noise_multiplier=args.gd_sigma, clip_norm=args.clip, sampling_rate=1.0)
    probe.record_steps(np.full((args.gd_steps, 1), np.nan))
    budget = probe.worst_case_epsilon(args.delta).upper
    model2 = _model(torch, args.hidden, args.seed)
    tr2 = IndividualDPTrainer(
        model2,
        loss_fn,
        torch.optim.SGD(model2.parameters(), lr=args.gd_lr),
        gd,
        budget=(budget, args.delta),
        seed=args.seed + 1,
    )
    history = []
    for t in range(2 * args.gd_steps):
        info = tr2.step(X, Y)
        pc, _ = _per_class_accuracy(torch, model2, Xt, Yt)
        history.append({"step": t + 1, "active": info["active"], "per_class_accuracy": pc})
    gd_eps = gd.epsilons(args.delta).upper
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    st = [h["step"] for h in history]
    a1.plot(st, [h["active"] for h in history], color="k")
    a1.axvline(args.gd_steps, color="tab:red", ls="--", label="worst-case budget reached")
    a1.set_xlabel("DP-GD step")
    a1.set_ylabel("active examples")
    a1.legend()
    for c in range(10):
        a2.plot(st, [h["per_class_accuracy"][c] for h in history], label=str(c))
    a2.axvline(args.gd_steps, color="tab:red", ls="--")
    a2.set_xlabel("DP-GD step")
    a2.set_ylabel("test accuracy per class")
    a2.legend(ncol=2, fontsize=7)
    fig.suptitle(f"Filtered DP-GD (Koskela et al. 2023, Alg. 1), budget eps={budget:.3f}, delta={args.delta:g}")
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "filtered_dpgd.png"), dpi=100)
    plt.close(fig)

    summary = {
        "delta": args.delta,
        "dpsgd": {
            "steps": steps,
            "sampling_rate": q,
            "noise_multiplier": args.sigma,
            "clip_norm": args.clip,
            "worst_case_epsilon": worst,
            "mean_epsilon": float(np.mean(eps)),
            "median_epsilon": float(np.median(eps)),
            "max_epsilon": float(np.max(eps)),
            "median_epsilon_rdp": float(np.median(eps_rdp)),
            "test_accuracy": test_acc,
            "per_class": classes,
        },
        "filtered_dpgd": {
            "noise_multiplier": args.gd_sigma,
            "budget_epsilon": budget,
            "worst_case_steps": args.gd_steps,
            "steps_run": 2 * args.gd_steps,
            "max_epsilon": float(np.max(gd_eps)),
            "final_active": history[-1]["active"],
            "final_per_class_accuracy": history[-1]["per_class_accuracy"],
            "active_by_step": [h["active"] for h in history],
        },
        "seconds": time.time() - t0,
    }
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(
        f"DP-SGD: worst-case eps {worst:.3f}, mean per-example eps {np.mean(eps):.3f}, "
        f"test accuracy {test_acc:.3f}; filtered DP-GD: max eps {np.max(gd_eps):.3f} <= budget {budget:.3f}, "
        f"{history[-1]['active']} of {n} active at the end; {summary['seconds']:.1f} s -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
