"""The Redis broker transport, with one fix: a worker survives a broker restart mid-task.

Celery 5.7 + kombu 5.7, prefork pool, a task running, Redis stopped: the consumer's
connection-loss handler calls `Connection.collect()` and then `Connection.close()`.
`collect()` closes the default channel, which fails half-way (its pending BRPOP read
raises ConnectionError: Redis is down) and is swallowed; `collect()` then clears the
transport's `client`. `close()` closes that half-closed channel again, and restoring its
unacknowledged message (the running task) rebuilds a Redis pool from `transport.client`,
now None: `AttributeError: 'NoneType' object has no attribute 'hostname'`, which is no
connection error, so the worker logs "Unrecoverable error" and exits. (The same lookup
runs when that task ends and acknowledges through its old channel.)

The transport below keeps its connection info once given, so a channel that outlives it
can still reach Redis or fail with a connection error, which kombu and Celery handle.
Selected by CELERY_BROKER_TRANSPORT in settings for redis:// URLs (not rediss://, whose
TLS defaults kombu chooses by the scheme's name).
"""

from __future__ import annotations

from typing import Any

from kombu.transport import redis


class RedisTransport(redis.Transport):
    """kombu's Redis transport whose `client` (the kombu Connection: host, port,
    password, options) is never cleared once set."""

    _client: Any = None

    @property  # type: ignore[override]
    def client(self) -> Any:
        return self._client

    @client.setter
    def client(self, value: Any) -> None:
        # kombu sets None to drop a reference when it closes the transport; a channel
        # still in use (closing, or acknowledging a task that ran through the outage)
        # needs it to build its Redis pool
        if value is not None:
            self._client = value
