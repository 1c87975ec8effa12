"""fl_privacy: the fl-privacy Rust crates from Python.

* :mod:`fl_privacy.paillier` -- python-paillier (``phe``) compatible Paillier encryption.
* :mod:`fl_privacy.phe` -- the same in phe's package layout (``paillier``, ``encoding``,
  ``util``, ``command_line``): ``import fl_privacy.phe as phe``, or
  ``fl_privacy.phe.install_as_phe()`` for code that imports ``phe`` itself.
* :mod:`fl_privacy.ldp` -- exact local-DP mechanisms over numpy arrays, realised ε returned.
* :mod:`fl_privacy.signds` -- SignDS client encoding and server aggregation.
* :mod:`fl_privacy.audit` -- in-process conformance audits of Python mechanisms (fl-audit).
"""

from fl_privacy import audit, ldp, paillier, signds

__all__ = ["audit", "ldp", "paillier", "signds"]
__version__ = "0.1.0"
