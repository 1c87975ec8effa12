"""fl_privacy on Flower (``pip install "./python[flower]"``; Flower 1.21.0 to the newest
1.x, both ends tested in CI).

Built on Flower's Message API (``flwr.app``, ``flwr.clientapp``, ``flwr.serverapp``):

* :class:`SignDSStrategy` -- a ServerApp strategy (Flower's FedAvg with SignDS
  aggregation on fl-signds' server: report validation, step-size state machine, MagRR);
* :class:`SignDSMod` -- a ClientApp mod that turns the wrapped app's trained model into
  one SignDS report (fl-signds' wire bytes) and sends only that, with the round's ε and
  the client's whole-history total (its ledger) in the reply's metrics;
  :class:`PrivateClientApp`, Flower's ClientApp that lets the mod answer the strategy's capability handshake;
* :class:`LaplaceEvalMod` -- a ClientApp mod that releases the evaluate reply's
  probability vector through fl-ldp's exact lattice Laplace; :func:`clustering_metrics`
  computes the server's clustering scores from the noisy vectors;
* :func:`read_ledger` -- a client's privacy ledger (:mod:`fl_privacy.flower.ledger`: the
  file SignDSMod charges every report to, across runs and SuperNode restarts) with its
  whole-history ε (basic and optimal composition);
* :class:`PureEpsilonAccountant` -- Flower's ``PrivacyAccountant`` interface for pure-ε
  releases (basic and optimal composition), the strategy's per-node ledger;
* ``fl-privacy-flwr-run`` (:mod:`fl_privacy.flower.run`) -- ``flwr run`` that exits 1 with
  one line when the run fails (Flower's exits 0 whatever the run's outcome).

Every reply that leaves a client through these mods is a SignDS report, a Laplace release
or a refusal with a fixed text; any other reply only for a category the user names in
``allow_unprotected``. Mistakes (a wrong argument, a client without the mod, a round with
no accepted report) stop the run with one line.

Example (a ClientApp whose ``train`` returns the trained ArrayRecord and
``num-examples``)::

    from fl_privacy.flower import PrivateClientApp, SignDSMod, SignDSStrategy

    client_app = PrivateClientApp(mods=[SignDSMod(top_k_fraction=0.2, epsilon=10.0)])
    strategy = SignDSStrategy(top_k_fraction=0.2, epsilon=10.0)

A complete app (simulation on Ray and a local deployment) is in
``python/examples/flower_digits``; docs/DEPLOYING.md says how to run it.
"""

try:
    import flwr  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the installation
    raise ImportError(
        'fl_privacy.flower needs Flower: pip install "./python[flower]" (flwr >= 1.21, < 2)'
    ) from e

from fl_privacy.flower.laplace import LaplaceEvalMod, cluster_scores, clustering_metrics
from fl_privacy.flower.accounting import PureEpsilonAccountant, PureEpsilonEvent
from fl_privacy.flower.ledger import Ledger, LedgerError, read_ledger
from fl_privacy.flower.signds import PrivateClientApp, RoundFailed, SignDSMod, SignDSStrategy

#: The oldest Flower release this module supports (the Message API's first); the ``flower``
#: extra asks for ``>= FLOWER_OLDEST, < 2``, and CI tests both ends.
FLOWER_OLDEST = "1.21.0"

__all__ = [
    "FLOWER_OLDEST",
    "LaplaceEvalMod",
    "Ledger",
    "LedgerError",
    "PrivateClientApp",
    "PureEpsilonAccountant",
    "PureEpsilonEvent",
    "RoundFailed",
    "SignDSMod",
    "SignDSStrategy",
    "cluster_scores",
    "clustering_metrics",
    "read_ledger",
]
