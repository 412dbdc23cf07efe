"""Framework integrations: ``tightdp.integrations.dp_accounting`` (dp_accounting's ``DpEvent`` trees),
``tightdp.integrations.opacus`` (an Opacus accountant with certified epsilon) and ``tightdp.integrations.torch``
(per-example accounting for PyTorch training).

Each submodule is imported on its own, since Opacus and PyTorch are optional extras; the package itself exports
nothing.
"""

from __future__ import annotations

__all__: list[str] = []
