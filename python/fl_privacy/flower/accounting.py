"""Privacy accounting of pure-ε releases (SignDS reports, Laplace vectors) in the shape of
Flower's ``PrivacyAccountant`` protocol (``flwr.serverapp.PrivacyAccountant``, Flower ≥
1.42), so that code reading a Flower accountant reads SignDS's too.

Flower's accountants compose *sampled Gaussian* events (its DP wrappers add Gaussian noise
to a clipped aggregate: central DP, (ε, δ) through RDP). A SignDS report is a pure
ε-LDP release of one client's update, so :class:`PureEpsilonAccountant` composes
:class:`PureEpsilonEvent` instead and refuses a ``GaussianPrivacyEvent`` (TypeError): the
two models do not mix in one ledger.

After k releases of ε_1, ..., ε_k each (the neighbouring relation is the mechanism's: for
SignDS, any two updates of one client in a round), the accountant reports

* basic composition: (Σ ε_i, 0), exact for δ = 0;
* the optimal composition bound of Kairouz, Oh and Viswanath (ICML 2015, Theorem 3.3),
  with ε* = max ε_i (every release is ε*-DP): (ε, δ(ε)) for
  δ(ε) = (1 + e^ε*)^(−k) Σ_{l: ε*(k − 2l) > ε} C(k, l) (e^(ε*(k − l)) − e^(ε + ε* l)),
  the tightest (ε, δ) that k-fold composition of ε*-DP mechanisms admits;

and :meth:`get_epsilon` returns the smaller of the two at the given δ. No amplification by
sampling is claimed (a client that is not sampled spends nothing; one that is spends ε).
"""

import math
from typing import NamedTuple, Optional

__all__ = ["PureEpsilonAccountant", "PureEpsilonEvent", "optimal_composition_delta",
           "optimal_composition_epsilon"]


class PureEpsilonEvent(NamedTuple):
    """One ε-DP release (``epsilon`` finite and > 0)."""

    epsilon: float


class _Config(NamedTuple):
    """The accountant's configuration where Flower's ``PrivacyConfig`` is unavailable."""

    target_delta: float
    population_size: int
    max_epsilon: Optional[float]
    neighboring_relation: str = "add-or-remove-one"
    sampling_method: str = "no-amplification"


class _Spent(NamedTuple):
    """Flower's ``PrivacySpent`` where Flower's is unavailable."""

    epsilon: float
    delta: float
    num_releases: int
    accounting_method: str
    optimal_order: Optional[float] = None


def _positive(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError("%s must be a number, got %s" % (name, type(value).__name__))
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError("%s must be finite and > 0, got %r" % (name, value))
    return value


def _probability(name, value, allow_zero=False):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError("%s must be a number, got %s" % (name, type(value).__name__))
    value = float(value)
    if not (math.isfinite(value) and (0 <= value if allow_zero else 0 < value) and value < 1):
        raise ValueError("%s must be in %s0, 1), got %r" % (name, "[" if allow_zero else "(",
                                                             value))
    return value


def _composition_args(epsilon, k, epsilon0):
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError("k must be an int >= 0, got %r" % (k,))
    return _positive("epsilon0", epsilon0), k


def optimal_composition_delta(epsilon, k, epsilon0):
    """δ(ε) of the k-fold composition of ε0-DP mechanisms (Kairouz–Oh–Viswanath, exact):
    the privacy-loss distribution of k randomized responses at ε0, summed in log space."""
    epsilon0, k = _composition_args(epsilon, k, epsilon0)
    epsilon = float(epsilon)
    if math.isnan(epsilon):
        raise ValueError("epsilon must be a number, got nan")
    if k == 0 or epsilon >= k * epsilon0:
        return 0.0
    log_norm = k * (epsilon0 + math.log1p(math.exp(-epsilon0)))  # k·log(1 + e^ε0)
    terms = []
    for l in range(k + 1):
        loss = epsilon0 * (k - 2 * l)
        if loss <= epsilon:
            break
        log_binom = math.lgamma(k + 1) - math.lgamma(l + 1) - math.lgamma(k - l + 1)
        terms.append(log_binom + epsilon0 * (k - l) + math.log(-math.expm1(epsilon - loss))
                     - log_norm)
    if not terms:
        return 0.0
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in terms))


def optimal_composition_epsilon(delta, k, epsilon0):
    """The smallest ε (to 1e-9 relative, rounded up) with
    :func:`optimal_composition_delta` (ε, k, ε0) ≤ δ; k·ε0 at δ = 0."""
    epsilon0, k = _composition_args(0.0, k, epsilon0)
    delta = _probability("delta", delta, allow_zero=True)
    if k == 0:
        return 0.0
    high = k * epsilon0
    if delta <= 0:
        return high
    low = 0.0
    if optimal_composition_delta(low, k, epsilon0) <= delta:
        return 0.0
    while high - low > 1e-9 * max(1.0, high):
        mid = 0.5 * (low + high)
        if optimal_composition_delta(mid, k, epsilon0) <= delta:
            high = mid
        else:
            low = mid
    return high


class PureEpsilonAccountant:
    """A ledger of pure ε-DP releases with the methods of Flower's ``PrivacyAccountant``.

    ``target_delta`` (in (0, 1)): the δ at which :meth:`get_privacy_spent` reports by
    default; ``max_epsilon``: the budget :meth:`would_exceed` checks (optional);
    ``population_size``: recorded in :attr:`config` (Flower's ``PrivacyConfig`` where
    installed, with no amplification by sampling).
    """

    def __init__(self, *, target_delta=1e-6, max_epsilon=None, population_size=1):
        target_delta = _probability("target_delta", target_delta)
        if max_epsilon is not None:
            max_epsilon = _positive("max_epsilon", max_epsilon)
        if isinstance(population_size, bool) or not isinstance(population_size, int) \
                or population_size < 1:
            raise ValueError("population_size must be an int >= 1, got %r" % (population_size,))
        try:
            from flwr.supercore.privacy_accounting import (
                NeighboringRelation,
                PrivacyConfig,
                SamplingMethod,
            )
        except ImportError:  # Flower before 1.42, or no Flower: the same fields
            self._config = _Config(target_delta, population_size, max_epsilon)
        else:
            self._config = PrivacyConfig(
                target_delta=target_delta, population_size=population_size,
                neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE,
                sampling_method=SamplingMethod.NO_AMPLIFICATION, max_epsilon=max_epsilon)
        self._epsilons = []

    @property
    def config(self):
        """The configuration (Flower's ``PrivacyConfig`` where installed)."""
        return self._config

    @property
    def num_releases(self):
        """The number of composed releases."""
        return len(self._epsilons)

    @staticmethod
    def _event(event):
        if not isinstance(event, PureEpsilonEvent):
            raise TypeError("PureEpsilonAccountant composes PureEpsilonEvent (pure ε-DP "
                            "releases), got %s: Gaussian events belong in Flower's RDP "
                            "accountant" % type(event).__name__)
        return _positive("event.epsilon", event.epsilon)

    @staticmethod
    def _count(count):
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError("count must be an int >= 1, got %r" % (count,))
        return count

    def compose(self, event, count=1):
        """Adds ``count`` releases of ``event``."""
        epsilon = self._event(event)
        self._epsilons.extend([epsilon] * self._count(count))

    @staticmethod
    def _epsilon_of(epsilons, delta):
        if not epsilons:
            return 0.0
        try:
            basic = math.fsum(epsilons)
        except OverflowError:
            basic = math.inf
        if delta <= 0:
            return basic
        return min(basic, optimal_composition_epsilon(delta, len(epsilons), max(epsilons)))

    def get_epsilon(self, delta):
        """The composed ε at ``delta`` (in [0, 1)): basic composition at 0, otherwise the
        smaller of basic composition and the optimal composition bound."""
        return self._epsilon_of(self._epsilons, _probability("delta", delta, allow_zero=True))

    def get_delta(self, epsilon):
        """The composed δ at ``epsilon`` (≥ 0): 0 from basic composition's ε on."""
        if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) \
                or not math.isfinite(epsilon) or epsilon < 0:
            raise ValueError("epsilon must be a finite number >= 0, got %r" % (epsilon,))
        if not self._epsilons or epsilon >= self._epsilon_of(self._epsilons, 0.0):
            return 0.0
        return optimal_composition_delta(epsilon, len(self._epsilons), max(self._epsilons))

    def get_privacy_spent(self, delta=None):
        """Flower's ``PrivacySpent`` (ε at ``delta``, default the configured target δ)."""
        delta = self._config.target_delta if delta is None else \
            _probability("delta", delta, allow_zero=True)
        epsilon = self._epsilon_of(self._epsilons, delta)
        basic = self._epsilon_of(self._epsilons, 0.0)
        method = "pure-epsilon basic composition" if epsilon >= basic else \
            "pure-epsilon optimal composition (Kairouz-Oh-Viswanath)"
        try:
            from flwr.supercore.privacy_accounting import PrivacySpent
        except ImportError:
            PrivacySpent = _Spent
        return PrivacySpent(epsilon=epsilon, delta=delta if epsilon < basic else 0.0,
                            num_releases=self.num_releases, accounting_method=method)

    def would_exceed(self, event, max_epsilon=None, count=1):
        """Whether composing ``count`` more ``event`` would take ε at the target δ above
        ``max_epsilon`` (default the configured one; False when neither is set)."""
        limit = self._config.max_epsilon if max_epsilon is None else \
            _positive("max_epsilon", max_epsilon)
        if limit is None:
            return False
        after = self._epsilons + [self._event(event)] * self._count(count)
        return self._epsilon_of(after, self._config.target_delta) > limit

    def state_dict(self):
        """The ledger as plain data."""
        return {"epsilons": list(self._epsilons)}

    def load_state_dict(self, state):
        """Restores :meth:`state_dict`'s ledger (every ε finite and > 0)."""
        if not isinstance(state, dict) or not isinstance(state.get("epsilons"), list):
            raise ValueError("state must be a dict with a list 'epsilons'")
        self._epsilons = [_positive("state epsilon", e) for e in state["epsilons"]]
