"""Run tags: the rule for the labels a run carries (``{"customer": "acme"}``), by which
runs are found later (`ductline runs --tag customer=acme`).

A run has at most `MAX_TAGS` tags. A key is 1 to `MAX_KEY_CHARS` characters of
letters, digits and ``_ . - : /`` (so ``key=value`` on a command line and in a query
string splits at the first ``=``); a value is a ``str`` of at most `MAX_VALUE_CHARS`
characters without NUL (PostgreSQL text cannot hold NUL) or lone surrogates (not
text in UTF-8: stored, they could no longer be found by their value) and may be empty. The
limits keep the tags table and its ``(key, value)`` index small and every tag cheap
to show; they are checked before anything is written.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from ductline.dsl.graph import is_unicode

MAX_TAGS = 20
MAX_KEY_CHARS = 64
MAX_VALUE_CHARS = 256

_KEY = re.compile(r"[A-Za-z0-9_.:/-]+")

Tags = tuple[tuple[str, str], ...]
"""Checked tags: ``((key, value), ...)`` sorted by key, each key once."""


def check_key(key: Any) -> str:
    """Check one tag key.

    Raises:
        TypeError: not a ``str``.
        ValueError: empty, longer than `MAX_KEY_CHARS`, or with a character other than
            letters, digits and ``_ . - : /``.
    """
    if not isinstance(key, str):
        raise TypeError(f"a tag key must be a str, not {type(key).__name__} ({key!r:.60})")
    if not 1 <= len(key) <= MAX_KEY_CHARS:
        raise ValueError(f"a tag key must be 1 to {MAX_KEY_CHARS} characters (the limit), "
                         f"got {len(key)}: {key[:40]!r}")
    if not _KEY.fullmatch(key):
        raise ValueError(f"tag key {key!r} may hold only letters, digits and _ . - : /")
    return key


def check_value(key: str, value: Any) -> str:
    """Check the value of tag ``key``.

    Raises:
        TypeError: not a ``str``.
        ValueError: longer than `MAX_VALUE_CHARS`, or containing NUL or a lone surrogate.
    """
    if not isinstance(value, str):
        raise TypeError(f"tag {key!r}: a tag value must be a str, not {type(value).__name__} ({value!r:.60})")
    if len(value) > MAX_VALUE_CHARS:
        raise ValueError(f"tag {key!r}: a tag value may have at most {MAX_VALUE_CHARS} characters (the limit), "
                         f"got {len(value)}")
    if "\x00" in value:
        raise ValueError(f"tag {key!r}: a tag value cannot contain NUL")
    if not is_unicode(value):
        raise ValueError(f"tag {key!r}: a tag value cannot contain lone surrogates")
    return value


def check_tags(tags: Any) -> Tags:
    """Check the tags of one run: ``None`` or a mapping of ``str`` keys to ``str`` values.

    Returns:
        The tags as ``((key, value), ...)`` sorted by key (empty for ``None``).

    Raises:
        TypeError: not a mapping, or a key or value that is not a ``str``.
        ValueError: more than `MAX_TAGS` tags, or a key or value past its limit.
    """
    if tags is None:
        return ()
    if not isinstance(tags, Mapping):
        raise TypeError(f"tags must be a dict of str to str, not {type(tags).__name__}")
    if len(tags) > MAX_TAGS:
        raise ValueError(f"a run may have at most {MAX_TAGS} tags (the limit), got {len(tags)}")
    return tuple(sorted((check_key(k), check_value(k, v)) for k, v in tags.items()))


def parse_tag(text: str) -> tuple[str, str]:
    """``"customer=acme"`` -> ``("customer", "acme")``: split at the first ``=``
    (a value may contain ``=``), both sides checked as `check_tags` checks them.

    Raises:
        ValueError: no ``=``, or a key or value past its limit.
    """
    key, sep, value = text.partition("=")
    if not sep:
        raise ValueError(f"a tag is KEY=VALUE, got {text[:60]!r}")
    return check_key(key), check_value(key, value)


def check_filter(pairs: Iterable[tuple[str, str]]) -> Tags:
    """Tags to filter runs by (every one must match): checked, deduplicated, sorted.

    Raises:
        TypeError, ValueError: as `check_key` and `check_value`; more than `MAX_TAGS`
            distinct pairs, or one key asked with two values (no run can match).
    """
    found = sorted({(check_key(k), check_value(k, v)) for k, v in pairs})
    if len(found) > MAX_TAGS:
        raise ValueError(f"filter by at most {MAX_TAGS} tags (the limit), got {len(found)}")
    keys = [k for k, _ in found]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise ValueError(f"tag {dup!r} is asked with two values; a run has one value per key")
    return tuple(found)


def as_dict(rows: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Tag rows (``{key, value}``) as a dict in key order."""
    return {str(r["key"]): str(r["value"]) for r in sorted(rows, key=lambda r: str(r["key"]))}
