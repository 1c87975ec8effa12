"""phe.encoding: ``EncodedNumber`` (:class:`fl_privacy.paillier.EncodedNumber`; a subclass
may set another ``BASE``, as phe documents)."""

from fl_privacy.paillier import EncodedNumber

__all__ = ["EncodedNumber"]
