"""python-paillier's (``phe`` 1.5) package layout on fl_privacy's implementation.

phe's modules, with the same names and contents, all built on :mod:`fl_privacy.paillier`:

* :mod:`fl_privacy.phe.paillier` -- keys, ``EncryptedNumber``, ``generate_paillier_keypair``;
* :mod:`fl_privacy.phe.encoding` -- ``EncodedNumber`` (subclasses may set another ``BASE``);
* :mod:`fl_privacy.phe.util` -- phe.util's number theory and base64 helpers;
* :mod:`fl_privacy.phe.command_line` -- ``pheutil``'s command line (needs ``click``).

Two ways to use it::

    import fl_privacy.phe as phe            # code you write or can edit
    from fl_privacy.phe import paillier, util

    import fl_privacy.phe                   # code you cannot edit that says `import phe`:
    fl_privacy.phe.install_as_phe()         # call once at start-up, before it imports phe
    import phe.paillier                     # now fl_privacy's

The classes are the same objects as :mod:`fl_privacy.paillier`'s. python-paillier 1.5's own
test suite runs against this package in CI; the tests that fail are the deliberate
deviations listed in python/README.md (keys under 2048 bits, chiefly).
"""

import importlib
import sys

from fl_privacy.paillier import (
    EncodedNumber,
    EncryptedNumber,
    PaillierPrivateKey,
    PaillierPrivateKeyring,
    PaillierPublicKey,
    generate_paillier_keypair,
)
from fl_privacy.phe import encoding, paillier, util

try:  # as phe: the command line is there when click is installed
    from fl_privacy.phe import command_line
except ImportError:  # pragma: no cover - click absent
    command_line = None

#: The python-paillier release whose API (and test suite) this package follows.
__version__ = "1.5.0"

__all__ = [
    "EncodedNumber",
    "EncryptedNumber",
    "PaillierPrivateKey",
    "PaillierPrivateKeyring",
    "PaillierPublicKey",
    "encoding",
    "generate_paillier_keypair",
    "install_as_phe",
    "paillier",
    "util",
]

_SUBMODULES = ("paillier", "encoding", "util", "command_line")


def install_as_phe():
    """Make ``import phe`` (and ``phe.paillier``, ``phe.encoding``, ``phe.util``,
    ``phe.command_line``) give this package, for code that imports python-paillier by name.

    Call it once, before anything imports ``phe``; calling it again is harmless.

    Raises:
      RuntimeError: if python-paillier's own ``phe`` is already imported (its objects and
        fl_privacy's would be mixed).
    """
    this = sys.modules[__name__]
    existing = sys.modules.get("phe")
    if existing is this:
        return
    if existing is not None:
        raise RuntimeError(
            "python-paillier's own `phe` (%s) is already imported: call "
            "fl_privacy.phe.install_as_phe() before anything imports phe"
            % getattr(existing, "__file__", existing)
        )
    sys.modules["phe"] = this
    for name in _SUBMODULES:
        try:
            module = importlib.import_module("%s.%s" % (__name__, name))
        except ImportError:  # command_line without click, as phe
            continue
        sys.modules["phe." + name] = module
