"""What every engine export shares: the header naming the signed policy, each governed
route's sizes in the engines' units, the notes on what the sizes assumed, and the lines
on a fleet's replicas.

Sizes (metrics.md section 8): a policy's RAM and disk sizes are replica totals for the
analysis's (model, KV dtype, TP), i.e. size / its replica bytes per token cached tokens.
A route keeps as many tokens: per rank = tokens x the route's per-rank bytes per token (at
the KV dtype its engine holds), total = per rank x the route's TP; rounded up to 0.01 GB.
A route kvscope has no profile for keeps the policy's total / TP, said in a comment.

With a fleet in the evidence (console.policies.fleet), those sizes are each replica's, and
every export names the router the sizes are for and why. A pooled store (only when the
author picks it) is said first, in WARNING lines: its sizes are each replica's share of
one store of N x that size, not a local cache per replica.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from fractions import Fraction

from console.policies.fleet import fleet_lines, policy_fleet, pooled_warning
from console.policies.serving import Served, Sizing, served_routes, sizing

GIB = 1 << 30


class ExportChoice(ValueError):
    """An export that needs to know which of several files is wanted."""


@dataclass(frozen=True)
class RouteSize:
    """A tier's size for one route, in the engines' units (GiB; LMCache, SGLang, Dynamo and
    Helm say GB and mean the same number)."""

    per_rank: float  # what each TP rank allocates (LMCache, SGLang, Dynamo, Helm)
    total: float  # over the route's TP ranks (vLLM --kv-offloading-size, LMCache server L1)
    note: str  # "" when sized by metrics.md section 8; else why not, for a comment


def header(meta: dict, body: dict | None = None) -> list[str]:
    """The lines every export starts with: a pooled store's warning, the signed policy
    and its digest, the lifetime and scope, and the fleet."""
    fleet = policy_fleet(body) if body is not None else None
    return [
        *(pooled_warning(fleet) if fleet else []),  # first: the sizes are not local caches
        f"kvscope policy {meta['name']!r} version {meta['version']} (approved "
        f"{meta['approved_at']} by {meta['approved_by']})",
        f"policy sha256: {meta['digest']}",
        f"block lifetime {meta['lifetime_s']:g} s, sharing scope {meta['scope']}"
        + (
            " (send a per-tenant cache_salt with every request)"
            if meta["scope"] == "tenant"
            else " (send a per-user cache_salt with every request)"
            if meta["scope"] == "user"
            else ""
        ),
        *(fleet_lines(fleet) if fleet else []),
    ]


def salt_lines(body: dict) -> list[str]:
    """Which cache_salt every request must carry under the body's scope (none: global).
    vLLM keys a request's first block by it (docs/design/prefix_caching.md); the LMCache
    server isolates by it (docs/source/mp/configuration.rst, IsolatedLRU)."""
    scope = body["scope"]
    if scope == "global":
        return []
    if scope == "tenant":
        tenants = body.get("tenants") or []
        which = f"one of: {', '.join(tenants)}" if tenants else "the policy names no tenants"
        who = f"the id of the request's tenant ({which})"
    else:
        who = "the id of the request's user"
    return [
        f'every request must carry "cache_salt" = {who}, set by the gateway, never by the '
        "client (top-level in /v1/completions and /v1/chat/completions bodies)",
        "vLLM's docs ask for a random, secret salt of ~256 bits: map each id to one and use "
        "it wherever a salt is named here",
    ]


def exact(value: float | None) -> Fraction:
    """The decimal a person typed (8.3, not the binary 8.300000000000000710…)."""
    return Fraction(repr(float(value or 0.0)))


def round_up(value: Fraction) -> float:
    """Up to the next 0.01: an export never gives a route less than it needs."""
    return float(Fraction(math.ceil(value * 100), 100))


def num(value: float) -> str:
    """A size as the engines read it: 0.01 steps, no trailing zeros ("12.5", "800")."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def gib_bytes(value: float) -> int:
    """A size in GiB as a byte count (vLLM's cpu_bytes_to_use), up to the next byte."""
    return math.ceil(exact(value) * GIB)


def route_size(size_gib: float | None, s: Served, size: Sizing | None) -> RouteSize:
    """A tier's size for route s. The policy's size is a replica total for the analysis's
    (model, KV dtype, TP); it holds size / (the analysis's replica bytes per token) cached
    tokens, and the route keeps as many: per rank = tokens x the route's own per-rank bytes
    per token (metrics.md section 8, at the KV dtype the engine holds), total = per rank x
    its TP. Without a profile for both sides, the policy's total / the route's TP, as
    said in the note."""
    total = exact(size_gib)
    why = ""
    if size is None or size.profile is None:
        why = "no analysis with a model kvscope can read is behind the sizes"
    elif s.profile is None:
        why = f"kvscope does not know the KV bytes per token of {s.model}"
    elif s.tp_problem():
        why = f"TP {s.tp} cannot share its KV heads evenly"
    else:
        try:
            planned = size.profile.replica_kv_bytes_per_token(size.tp, size.kv_dtype)
        except ValueError:  # an analysis stored before its TP was checked
            why = f"the analysis's TP {size.tp} cannot share its model's KV heads evenly"
    if why:
        return RouteSize(
            per_rank=round_up(total / s.tp),
            total=round_up(total),
            note=f"route {s.route}: sizes are the policy's total / TP {s.tp} ({why}; "
            "metrics.md section 8 not applied: check them by hand)",
        )
    own = s.profile.kv_bytes_per_token_per_rank(s.tp, s.engine_kv_dtype)
    per_rank = round_up(total * Fraction(own, planned))
    return RouteSize(per_rank=per_rank, total=round_up(exact(per_rank) * s.tp), note="")


Sized = tuple[Served, RouteSize | None, RouteSize | None]


def sizes(body: dict) -> list[Sized]:
    """Every governed route with its RAM and disk sizes (None for a tier that is off)."""
    size = sizing((body.get("evidence") or {}).get("params"))
    tiers = body["tiers"]
    ram, disk = tiers["cpu_ram"], tiers["local_disk"]
    return [
        (
            s,
            route_size(ram["size_gib"], s, size) if ram["enabled"] else None,
            route_size(disk["size_gib"], s, size) if disk["enabled"] else None,
        )
        for s in served_routes(body, size)
    ]


def notes(s: Served, ram: RouteSize | None, disk: RouteSize | None) -> list[str]:
    """What the sizes assumed for a route: LMCache stores what the engine holds, so its
    YAML has no dtype key; the engine must run with the matching --kv-cache-dtype."""
    lines = [
        f"route {s.route}: model {s.model}, TP {s.tp}, KV dtype {s.kv_dtype} "
        f"(vLLM --kv-cache-dtype {s.vllm_kv_dtype})"
    ]
    if mismatch := s.dtype_mismatch():
        lines.append("WARNING: " + mismatch.replace("“", "").replace("”", ""))
    note = (ram or disk).note if (ram or disk) else ""
    if note:
        lines.append("WARNING: " + note)
    return lines


def slug(route: str) -> str:
    return "-".join("".join(c if c.isalnum() else " " for c in route.lower()).split()) or "route"


def per_replica(commands: list[str], fleet: dict | None) -> list[str]:
    """The commands as they are without a fleet; with one, each under its replica's name."""
    if fleet is None:
        return commands
    out = []
    for i, command in enumerate(commands, start=1):
        out += [f"# replica {i} of {len(commands)}", command]
    return out


def replicas(body: dict) -> tuple[dict | None, int]:
    """The body's fleet (None: one cache) and how many engines each route runs."""
    fleet = policy_fleet(body)
    return fleet, fleet["replicas"] if fleet else 1


def env_word(name: str, value: str) -> str:
    """A variable set in front of a command: the name bare, as the shell needs it."""
    return f"{name}={shlex.quote(value)}"


def comments(lines: list[str]) -> str:
    return "".join(f"# {line}\n" for line in lines)
