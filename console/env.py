"""Reading the environment: the one place settings come from.

Every helper fails loudly (ImproperlyConfigured) on a value it cannot parse, so a
typo in a deployment stops the process at start-up instead of running with a default.
"""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r}: expected one of 1/0, true/false, yes/no, on/off")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r}: expected an integer") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value}: must be at least {minimum}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_secret(name: str, default: str | None = None) -> str | None:
    """A secret from NAME, or from the file named by NAME_FILE (Docker/K8s secrets)."""
    path = os.environ.get(f"{name}_FILE")
    if path:
        try:
            with open(path, encoding="utf-8") as fh:
                return fh.read().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={path!r}: {exc.strerror}") from None
    return os.environ.get(name, default)
