"""Independent reference for ``tests/accountants/test_connect_dots.py``: delta(eps) of the k-fold Poisson-subsampled
Gaussian, remove direction, by Lugannani-Rice saddle-point tail approximations, with every integral done
by mpmath (no tightdp or peer code).

    delta(eps) = P(S > eps) - e^eps Q(S > eps),  S = sum of k privacy losses,

with the single-step cumulant generating function K(t) = log E_Q[(p/q)^(1+t)] under P and K(t - 1)
under Q. The approximation's relative error is O(1/k); at k = 5000 it separates epsilon values a few
hundredths apart. Usage (prints one line per epsilon):

    python tests/data/saddlepoint_reference.py SIGMA Q K EPS [EPS ...]

The values used by the tests are in ``saddlepoint_reference.json`` (written by hand from this output).
"""

import sys

import mpmath as mp

mp.mp.dps = 40
sig, q = mp.mpf(sys.argv[1]), mp.mpf(sys.argv[2])
k = int(sys.argv[3])
eps_list = [mp.mpf(e) for e in sys.argv[4:]]


def logr(x):  # log(p/q_) at output x
    return mp.log((1 - q) + q * mp.exp((2 * x - 1) / (2 * sig**2)))


def phi(x):
    return mp.exp(-x * x / (2 * sig**2)) / (sig * mp.sqrt(2 * mp.pi))


def moments(t):
    # under the tilt: E_P[e^{tL}] = E_Q[r^{1+t}]; also first two derivatives of log M
    f0 = lambda x: phi(x) * mp.exp((1 + t) * logr(x))
    # peak location of integrand for splitting
    pts = [-mp.inf, -5 * sig, 0, 1, 5, 20, 60, mp.inf]
    M0 = mp.quad(f0, pts)
    M1 = mp.quad(lambda x: f0(x) * logr(x), pts)
    M2 = mp.quad(lambda x: f0(x) * logr(x) ** 2, pts)
    K = mp.log(M0)
    K1 = M1 / M0
    K2 = M2 / M0 - K1**2
    return K, K1, K2


def tail(eps, shift):
    # P(S > eps) for S with CGF k*K(t + shift) - k*K(shift) (shift=-1: Q measure since K_Q(t) = K_P(t-1))
    Ks = moments(shift)[0]
    t = mp.findroot(lambda tt: k * moments(tt + shift)[1] - eps, mp.mpf("0.5"))
    K, _K1, K2 = moments(t + shift)
    Kt = k * (K - Ks)
    w = mp.sign(t) * mp.sqrt(2 * (t * eps - Kt))
    u = t * mp.sqrt(k * K2)
    return mp.ncdf(-w) + mp.npdf(w) * (1 / u - 1 / w)


for eps in eps_list:
    P = tail(eps, 0)
    Qt = tail(eps, -1)
    print(float(eps), "delta ~", mp.nstr(P - mp.exp(eps) * Qt, 8), "P tail", mp.nstr(P, 6), flush=True)
