"""The keys of a run's context (``ductline.context().set`` / ``get``): the one rule
the step (in its child, or in the in-process executor) and the store both apply.

A key is stored as database text, and a bound string is made storable on its way
in (`ductline.codec.safe_text`): a NUL or a lone surrogate would be kept as its
escape, so ``"k\\ud800"`` and the six characters ``k\\ud800`` would name one row,
and a write of the one would replace the other's value. Such keys are refused.
"""

from __future__ import annotations

from ductline.dsl.graph import is_unicode


def check_key(key: object) -> str:
    """``key`` if it can name a context value.

    Raises:
        TypeError: not a non-empty ``str``, or holding a NUL or a lone surrogate
            (the message names which).
    """
    if not isinstance(key, str) or not key:
        raise TypeError(f"context keys are non-empty str, got {key!r}")
    if "\x00" in key:
        raise TypeError(f"context keys cannot contain NUL, got {key!r}")
    if not is_unicode(key):
        raise TypeError(f"context keys cannot contain lone surrogates (stored as their escape, the key would "
                        f"name another one), got {key!r}")
    return key
