"""fl_privacy on Flower (``pip install "./python[flower]"``; tested with flwr 1.42.0).

Built on Flower's Message API (``flwr.app``, ``flwr.clientapp``, ``flwr.serverapp``):

* :class:`SignDSStrategy` -- a ServerApp strategy (Flower's FedAvg with SignDS
  aggregation on fl-signds' server: report validation, step-size state machine, MagRR);
* :class:`SignDSMod` -- a ClientApp mod that turns the wrapped app's trained model into
  one SignDS report (fl-signds' wire bytes) and sends only that, with the round's ε and
  the client's running total in the reply's metrics;
* :class:`LaplaceEvalMod` -- a ClientApp mod that releases the evaluate reply's
  probability vector through fl-ldp's exact lattice Laplace; :func:`clustering_metrics`
  computes the server's clustering scores from the noisy vectors.

Example (a ClientApp whose ``train`` returns the trained ArrayRecord and
``num-examples``)::

    from flwr.clientapp import ClientApp
    from flwr.serverapp import ServerApp
    from fl_privacy.flower import SignDSMod, SignDSStrategy

    client_app = ClientApp(mods=[SignDSMod(top_k_fraction=0.2, epsilon=10.0)])
    strategy = SignDSStrategy(top_k_fraction=0.2, epsilon=10.0, fraction_evaluate=0.0)

A complete app (simulation on Ray and a local deployment) is in
``python/examples/flower_digits``; docs/DEPLOYING.md says how to run it.
"""

try:
    import flwr  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the installation
    raise ImportError(
        'fl_privacy.flower needs Flower: pip install "./python[flower]" (flwr 1.42.0)'
    ) from e

from fl_privacy.flower.laplace import LaplaceEvalMod, cluster_scores, clustering_metrics
from fl_privacy.flower.accounting import PureEpsilonAccountant, PureEpsilonEvent
from fl_privacy.flower.signds import PrivateClientApp, RoundFailed, SignDSMod, SignDSStrategy

#: The Flower release this module is tested with (the ``flower`` extra pins it).
FLOWER_VERSION = "1.42.0"

__all__ = [
    "FLOWER_VERSION",
    "LaplaceEvalMod",
    "PrivateClientApp",
    "PureEpsilonAccountant",
    "PureEpsilonEvent",
    "RoundFailed",
    "SignDSMod",
    "SignDSStrategy",
    "cluster_scores",
    "clustering_metrics",
]
