"""Audit a real DP-SGD run in one run: Opacus on scikit-learn's digits with white-box Dirac gradient canaries.

The model is a softmax regression on the 64 pixel features plus one extra weight per canary. Canary
``j`` is an example whose only gradient is ``-scale * e_j`` on its own weight (a Dirac canary, Nasr et
al. 2023; Andrew et al. 2024): clipping makes it exactly ``-C e_j``, the real examples never touch
those weights, so the canaries do not interfere. Each canary is put in the training set with
probability 1/2 (Steinke, Nasr, Jagielski 2023) and Opacus's Poisson sampler draws it like any example.
The auditor reads the canary weights after every step (white box: the accounting releases every
iterate), so each step gives ``x_t = 1[canary sampled] + N(0, sigma^2)`` in units of C, and scores each
canary with the likelihood ratio of the claimed subsampled Gaussian, ``sum_t log(1 - q + q exp((2 x_t - 1)
/ (2 sigma^2)))``.

Two implementations, one claimed accounting (noise multiplier ``sigma``, Poisson rate ``q``, ``steps``):

* ``correct``: Opacus as is;
* ``broken``: the noise calibrated to the *mean* (``sigma C / B``) but added to the *sum* of the
  clipped gradients (a mistake the accounting does not see).

``tightdp.audit.audit_run`` then gives the empirical lower bound, the certified interval of the
claimed run, what an optimal attack on a correct implementation shows, and the verdict.

    python examples/audit_digits.py            # both runs, ~1 minute on 2 cores
    python examples/audit_digits.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings

import numpy as np

SIGMA, RATE, STEPS, CANARIES, DELTA, BETA = 2.0, 0.5, 20, 2000, 1e-5, 0.05
METHOD = "fdp-eps-delta"


def train_with_canaries(
    *,
    canaries: int = CANARIES,
    noise_multiplier: float = SIGMA,
    sampling_rate: float = RATE,
    steps: int = STEPS,
    broken: bool = False,
    seed: int = 0,
    clip: float = 1.0,
    lr: float = 0.5,
):
    """One Opacus training run with ``canaries`` Dirac canaries; returns ``(in_scores, out_scores, accuracy)``."""
    import torch
    from opacus import PrivacyEngine
    from sklearn.datasets import load_digits
    from torch import nn

    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    member = rng.random(canaries) < 0.5
    idx = np.flatnonzero(member)
    n_real = x.shape[0]
    feats = np.zeros((n_real + idx.size, 64 + canaries), np.float32)
    feats[:n_real, :64] = x
    feats[n_real + np.arange(idx.size), 64 + idx] = 1.0  # canary j: one-hot on its own weight
    labels = np.concatenate([y, np.zeros(idx.size, int)]).astype(np.int64)
    data = torch.utils.data.TensorDataset(torch.from_numpy(feats), torch.from_numpy(labels))
    batch = max(1, round(sampling_rate * len(data)))
    loader = torch.utils.data.DataLoader(data, batch_size=batch)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Linear(64, 10)
            self.canary = nn.Linear(canaries, 1, bias=False)
            nn.init.zeros_(self.canary.weight)

        def forward(self, z):
            return self.body(z[:, :64]), self.canary(z[:, 64:])

    model = Model()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    engine = PrivacyEngine(accountant="prv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, opt, loader = engine.make_private(
            module=model,
            optimizer=opt,
            data_loader=loader,
            noise_multiplier=noise_multiplier,
            max_grad_norm=clip,
            poisson_sampling=True,
        )
    q = loader.sample_rate
    if broken:  # noise with the mean's scale added to the sum
        opt.noise_multiplier = noise_multiplier / opt.expected_batch_size
    ce = nn.CrossEntropyLoss(reduction="none")
    w = [np.zeros(canaries)]
    done = 0
    while done < steps:
        for zb, yb in loader:
            if done == steps:
                break
            opt.zero_grad()
            logits, out = model(zb)
            is_canary = zb[:, 64:].sum(dim=1)
            loss = (
                ((1 - is_canary) * ce(logits, yb) - is_canary * 1e3 * clip * out[:, 0]).mean()
                if zb.shape[0]
                else (logits.sum() * 0 + out.sum() * 0)
            )
            loss.backward()
            opt.step()
            w.append(model._module.canary.weight.detach().numpy()[0].astype(float).copy())
            done += 1
    xs = np.diff(np.array(w), axis=0) * opt.expected_batch_size / (lr * clip)  # (steps, canaries): 1[sampled] + noise
    s2 = noise_multiplier**2
    score = np.sum(np.logaddexp(math.log1p(-q) if q < 1 else -np.inf, math.log(q) + (2 * xs - 1) / (2 * s2)), axis=0)
    with torch.no_grad():
        logits, _ = model(torch.from_numpy(feats[:n_real]))
        acc = float((logits.argmax(1).numpy() == y).mean())
    return score[member], score[~member], acc, q


def audit(broken: bool, seed: int = 0, expected: bool = True, **kw):
    """Train (``train_with_canaries(**kw)``) and audit; returns ``(AuditVerdict, info)``."""
    from tightdp.audit import audit_run

    t0 = time.perf_counter()
    ins, outs, acc, q = train_with_canaries(broken=broken, seed=seed, **kw)
    t1 = time.perf_counter()
    v = audit_run(
        in_scores=ins,
        out_scores=outs,
        delta=DELTA,
        beta=BETA,
        method=METHOD,
        test_curve=True,
        noise_multiplier=kw.get("noise_multiplier", SIGMA),
        sampling_rate=q,
        steps=kw.get("steps", STEPS),
        seed=seed,
        expected=expected,
    )
    return v, {"accuracy": acc, "train_seconds": t1 - t0, "audit_seconds": time.perf_counter() - t1, "sampling_rate": q}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="write the two verdicts here")
    args = ap.parse_args(argv)
    out = {}
    t = time.perf_counter()
    for name, broken in (("correct", False), ("broken", True)):
        v, info = audit(broken, seed=args.seed)
        out[name] = {**v.to_dict(), **info}
        print(
            f"{name:8s} accuracy {info['accuracy']:.3f} · empirical eps >= {v.empirical.epsilon_lower:.3f} "
            f"(95 %) · certified [{v.certified_lower:.3f}, {v.certified_upper:.3f}] · correct run shows "
            f"~{v.expected.epsilon_lower:.3f}\n         {v.message}"
        )
    out["seconds"] = time.perf_counter() - t
    print(f"total {out['seconds']:.1f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
