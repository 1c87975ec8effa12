"""fl_privacy: the fl-privacy Rust crates from Python.

* :mod:`fl_privacy.paillier` -- python-paillier (``phe``) compatible Paillier encryption.
"""

from fl_privacy import paillier

__all__ = ["paillier"]
__version__ = "0.1.0"
