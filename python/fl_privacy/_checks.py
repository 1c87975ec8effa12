"""Argument checks shared by the wrappers: every argument is validated in Python, by name,
before the native code sees it, so that a wrong type is a ``TypeError`` and a wrong value a
``ValueError`` that names the argument (never a conversion error such as "can't convert
negative int to unsigned", and never a string silently parsed as a number)."""

import numbers

#: The largest value of the native unsigned 64-bit arguments (seeds, counts, weights).
U64_MAX = 2**64 - 1


def integer(name, value, minimum=None, maximum=None):
    """``value`` as an int (Python or numpy integer; not bool, float or str).

    Raises:
      TypeError: for anything else.
      ValueError: below ``minimum`` or above ``maximum``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("%s must be an int, got %s" % (name, type(value).__name__))
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError("%s must be >= %d, got %d" % (name, minimum, value))
    if maximum is not None and value > maximum:
        raise ValueError("%s must be <= %d, got %d" % (name, maximum, value))
    return value


def real(name, value):
    """``value`` as a float (Python or numpy int or float; not bool or str). NaN and
    infinities pass through: the mechanisms reject them with their own message."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError("%s must be a number (int or float), got %s" % (name, type(value).__name__))
    return float(value)


def optional_real(name, value):
    """:func:`real`, or None."""
    return None if value is None else real(name, value)


def optional_integer(name, value, minimum=None, maximum=None):
    """:func:`integer`, or None."""
    return None if value is None else integer(name, value, minimum, maximum)


def string(name, value):
    """``value`` if it is a str."""
    if not isinstance(value, str):
        raise TypeError("%s must be a str, got %s" % (name, type(value).__name__))
    return value


def callback(name, value):
    """``value`` if it is None or callable."""
    if value is not None and not callable(value):
        raise TypeError("%s must be None or a callable, got %s" % (name, type(value).__name__))
    return value


def byte_string(name, value):
    """``value`` as bytes, if it is bytes-like (bytes, bytearray or memoryview; not str).

    The bytes are the object's buffer contents, read through ``memoryview`` (a subclass's
    ``__bytes__`` hook is not consulted); a released memoryview is a TypeError.
    """
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError("%s must be bytes, got %s" % (name, type(value).__name__))
    if type(value) is bytes:
        return value
    try:
        return memoryview(value).tobytes()
    except ValueError as e:
        raise TypeError("%s: %s" % (name, e)) from None
