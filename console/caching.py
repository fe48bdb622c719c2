"""Computed-once page data: cache keys made of the versions of the rows a value comes
from (Django's cache, console.settings.CACHES), so no page view repeats engine work."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TypeVar

from django.core.cache import caches

T = TypeVar("T")


def cache_key(kind: str, *parts: object) -> str:
    """A short key for `parts` (memcached and Redis refuse long or spaced keys)."""
    digest = hashlib.sha256(repr(parts).encode()).hexdigest()[:32]
    return f"kvscope:{kind}:{digest}"


def computed_once(
    kind: str, parts: tuple, compute: Callable[[], T], *, alias: str = "default"
) -> T:
    """The cached value for `parts` in the cache `alias`, computed (and cached) on the
    first call."""
    key = cache_key(kind, *parts)
    cache = caches[alias]
    value = cache.get(key)
    if value is None:
        value = compute()
        cache.set(key, value)
    return value
