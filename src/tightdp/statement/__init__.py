"""A one-call privacy statement for a DP-SGD run, in the style of TensorFlow Privacy's
``compute_dp_sgd_privacy_statement``, but certified.

``privacy_statement(...)`` answers, for the sampling scheme that actually ran:

* **example-level** epsilon at the chosen delta, as a certified interval
  (``tightdp.dpsgd_epsilon`` with the default, dominance-based accountant; the
  PLD accountants of Koskela et al. 2020 and Gopi et al. 2021);
* **group-level** epsilon for groups of up to ``k`` examples (e.g. every record
  of one user) from Ganesh's mixture-of-Gaussians reduction (Ganesh 2024, Thm 3.1 / 3.3),
  certified by the same engine (``tightdp.group_epsilon``); where no group
  analysis exists for the scheme, the row says "not applicable" and why;
* in plain language, what the guarantee assumes (the neighbouring relation, the
  sampling scheme, what an attacker sees) and what it does **not** cover
  (hyper-parameter tuning, data-dependent preprocessing, ...).

``tradeoff_lower_curve`` turns a certified upper delta(epsilon) curve into a
certified *lower* bound on the f-DP trade-off function beta(alpha)
(Dong, Roth, Su 2022, Prop. 2.12 / Cor. 2.13; Ganesh 2024, Sec. 2 uses the same
hypothesis-testing view).

The statement's text and JSON (``PrivacyStatement.to_text`` / ``to_dict``) are what
``tightdp statement`` prints; the privacy report reuses ``guarantee_paragraphs``.

The package: ``_text`` (plain language, ``GroupRow``, ``PrivacyStatement``), ``_kinds`` (the tuning,
correlated-noise and schedule statements) and ``_build`` (``privacy_statement``, ``statement_from_config``).
"""

from ._build import privacy_statement, statement_from_config
from ._text import GroupRow, PrivacyStatement, guarantee_paragraphs

__all__ = ["GroupRow", "PrivacyStatement", "privacy_statement", "guarantee_paragraphs", "statement_from_config"]
