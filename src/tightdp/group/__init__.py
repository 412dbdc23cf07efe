"""Group-level privacy of DP-SGD via mixture-of-Gaussians mechanisms (Ganesh 2024).

A *group* is a set of up to ``k`` examples that may all be added or removed
together (Ganesh 2024, Def. 2.5: add-/remove-up-to-k adjacency), e.g. every record of one
user. DP-SGD's group-level privacy is exactly that of a scalar
mixture-of-Gaussians (MoG) mechanism composed over the steps:

* Poisson sampling with rate ``q``: sensitivity ``Binom(k, q)``, noise ``sigma``
  (Ganesh 2024, Thm 3.1);
* fixed batch size ``B`` drawn without replacement from a data set of at least
  ``n`` examples: sensitivity ``2 * Hypergeom(B, n + k, k)`` (Ganesh 2024, Thm 3.3);
* a schedule of segments ``(sigma, q or B, steps)``: the composition of the
  segments' MoG mechanisms (Ganesh 2024, Lemma 2.6 with Sec. 2.2).

The dominating pairs are tight (Ganesh 2024, Sec. 3.3), and the PLD engine gives
certified two-sided bounds on their composition.

Two baselines (Ganesh 2024, Sec. 4):

* the group-privacy lemma (Ganesh 2024, Lemma 1.1, Vadhan 2017 Lemma 2.2): an
  example-level ``(eps', delta')`` guarantee gives ``(k eps', delta' S(eps'))``
  for groups of ``k``, ``S(e) = 1 + e^e + ... + e^{(k-1) e}``. We apply it to the
  *certified* example-level curve (upper bounds), so the result is a proven
  bound; ``S`` and ``delta'`` are handled in log space, and where the required
  ``delta'`` cannot be certified the answer is ``None`` with a note.
* the linear reference ``k * eps_1`` (Ganesh 2024, Sec. 4, "lower bound"), with
  ``eps_1`` the example-level epsilon at the same delta. Ganesh 2024 uses it as the
  yardstick of linear growth; it is not a theorem for arbitrary mechanisms, so
  it is reported as a reference line, computed from the certified *lower*
  bound on ``eps_1``.

Every scheme of ``tightdp.sampling`` declares its ``group_analysis``: ``MIXTURE`` (Poisson, fixed batches:
the MoG step above), ``NO_AMPLIFICATION`` (below) or ``NONE`` (``group_reason`` says why). Where Ganesh 2024's
mixture-of-Gaussians analysis does not apply:

* ``random-allocation`` (1 of ``t`` steps per epoch, drawn afresh every epoch, add/remove): ``upper`` is the
  smaller of (a) the group-privacy lemma (Ganesh 2024, Lemma 1.1) on the certified example-level curve of the
  allocation epochs (the example-level guarantee holds for every pair of add/remove neighbours, and a
  group of ``k`` is a chain of ``k`` of them) and (b) no amplification: for every allocation of the
  group's members the epoch's mean shift has L2 norm ``sqrt(sum_i c_i^2) <= k`` (``c_i`` members in
  step ``i``), so by joint convexity over the data-independent allocation ``E`` epochs are
  ``k sqrt(E)/sigma``-GDP. ``lower``: the example-level certified lower bound (a group of up to ``k``
  includes a group of one), loose.
* ``shuffle`` ("zero-out" neighbouring of Chua et al. 2403.17673, up to ``k`` records zeroed): the same
  argument (b) gives ``k sqrt(E)/sigma``-GDP, which is also the GDP group-privacy bound of the
  example-level ``sqrt(E)/sigma``-GDP (Dong, Roth, Su 2022, Thm 2.14); ``lower`` as above (Chua et al.'s
  attack on one record).
* ``truncated-poisson``: not applicable. Ganesh 2025's dominating pair holds for one data-set size
  ``n``, while a group's add/remove chain passes through ``k`` sizes, and adding records can displace
  others from a truncated batch; no certified group analysis is known. The substitute-relation schemes and
  cyclic allocation: not applicable either (their ``group_reason``).

Every function takes the run as keywords (``sampling`` a registered name or a scheme object) or as
``run=TrainingRun(...)``.

The package: ``_lemma`` (the group-privacy-lemma baseline), ``_epsilon`` (group mechanisms and
``group_epsilon``) and ``_report`` (``group_report``, ``group_curve``).
"""

# the private helpers are re-exported for the tests that exercise them
from ._epsilon import _make_accountant as _make_accountant
from ._epsilon import group_epsilon, group_epsilon_schedule, group_ledger, group_mechanism
from ._lemma import ExampleCurve, LemmaResult, group_privacy_lemma_epsilon
from ._lemma import _lemma_accountant as _lemma_accountant
from ._lemma import _LemmaConnectDots as _LemmaConnectDots
from ._lemma import _log_group_factor as _log_group_factor
from ._report import GroupReport, group_curve, group_report

__all__ = [
    "group_mechanism",
    "group_ledger",
    "group_epsilon",
    "group_epsilon_schedule",
    "group_privacy_lemma_epsilon",
    "ExampleCurve",
    "LemmaResult",
    "GroupReport",
    "group_report",
    "group_curve",
]
