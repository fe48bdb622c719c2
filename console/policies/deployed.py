"""What a fleet really runs, read from an uploaded configuration: one normalized record per
engine (a `vllm serve` command, a Helm modelSpec, an LMCache file) for the drift check
(console.policies.drift) to compare with the approved version.

Units are each engine's own (shared/docs/engines.md), kept with the basis they are on, so
the comparison sets them against the exporter's own figure for the same basis:
- "total": vLLM --kv-offloading-size (GiB over all TP ranks), OffloadingConnector
  cpu_bytes_to_use (bytes, total);
- "per_rank": LMCache max_local_cpu_size / max_local_disk_size, Helm
  cpuOffloadingBufferSize / diskOffloadingBufferSize, SGLang --hicache-size (GB per TP
  worker; LMCache's and Helm's GB mean the same number as the policy's GiB, as in the
  exports);
- "server": LMCache MP `lmcache server --l1-size-gb` (one store a replica's ranks share).

The scope salt and the lifetime are declarations, not settings an engine enforces:
cache_salt is a field of each request (vLLM), which no server configuration can show is
sent, and no engine has a retention lifetime (LMCache's retention TTL, PR #4456, is not
merged; its --l1-*-ttl-seconds are lock TTLs). So a salt counts as present when the file
sets `cache_salt` outside a comment (a key, an argument), declares it in a comment, or
runs LMCache's IsolatedLRU eviction (one LRU per salt). A comment counts only where it
declares the salt (kvscope's 'every request must carry "cache_salt" = …', or 'a
per-tenant cache_salt'), not where it merely names it (a gap saying an engine ignores
cache_salt declares nothing). It cannot tell a per-tenant salt from a per-user one, nor
prove a gateway sends it. A lifetime counts as configured when the file says "block
lifetime N s" (the exports' header line) or sets lmcache_retention_ttl_sec.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

# the formats read, as stored and shown
FORMATS = {
    "vllm_cli": "vllm serve command line",
    "vllm_config": "vLLM config file (CLI keys)",
    "lmcache_yaml": "LMCache YAML",
    "lmcache_server": "LMCache server command line",
    "sglang_cli": "SGLang launch_server arguments",
    "helm_values": "production-stack Helm values",
}
TIER_NAMES = {"cpu_ram": "CPU RAM", "local_disk": "local disk", "remote": "remote store"}
# a setting (cache_salt on a line outside a comment) or a declaration in a comment
_SALT = re.compile(
    r'^[^#\n]*\bcache_salt\b|"cache_salt" = |\bper-(?:tenant|user) cache_salt\b',
    re.MULTILINE,
)
_LIFETIME = re.compile(r"block lifetime ([0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?) s\b")
_RETENTION = re.compile(r"lmcache_retention_ttl_sec\W{1,3}([0-9]+(?:\.[0-9]+)?)")


class DeployedError(ValueError):
    """An uploaded configuration kvscope cannot read: the file, the line and why."""

    def __init__(self, file_name: str, line: int | None, reason: str):
        where = f"{file_name}, line {line}" if line else file_name
        super().__init__(f"{where}: {reason}")
        self.file_name, self.line, self.reason = file_name, line, reason


@dataclass
class Tier:
    """One offload tier as deployed. enabled None: not set in this file (it lives in a
    file or server named by `elsewhere`); size_gib None with the tier on: not stated."""

    enabled: bool | None = False
    size_gib: float | None = None
    basis: str = ""  # "total", "per_rank" or "server" (see the module's docstring)
    setting: str = ""  # the flag or key the size was read from
    elsewhere: str = ""


@dataclass
class Deployed:
    """One engine as the file deploys it."""

    format: str
    line: int  # where in the file it starts
    model: str | None = None  # what the engine loads
    # the names requests reach it by (--served-model-name; else the model itself)
    names: list[str] = field(default_factory=list)
    tp: int | None = None  # None: the file does not say
    kv_dtype: str | None = None  # the engine's own value ("auto", "fp8", …); None: no such key
    ram: Tier = field(default_factory=Tier)
    disk: Tier = field(default_factory=Tier)
    remote: Tier = field(default_factory=Tier)
    salt: str = ""  # how a scope salt was found ("" none)
    lifetime_s: float | None = None
    lifetime_from: str = ""

    @property
    def route(self) -> str | None:
        return self.names[0] if self.names else None

    def as_json(self) -> dict:
        return asdict(self) | {"route": self.route}


@dataclass(frozen=True)
class Deployment:
    """An uploaded file, read."""

    file_name: str
    format: str
    records: list[Deployed]

    def as_json(self) -> list[dict]:
        return [record.as_json() for record in self.records]


def declarations(text: str, records: list[Deployed]) -> list[Deployed]:
    """The file's salt and lifetime declarations (module docstring) on every record."""
    salt = "cache_salt set or declared in the file" if _SALT.search(text) else ""
    if not salt and re.search(r"--eviction-policy[= ]+IsolatedLRU\b", text):
        salt = "LMCache eviction policy IsolatedLRU (one LRU per cache_salt)"
    lifetime, source = None, ""
    if found := _LIFETIME.search(text):
        lifetime, source = float(found.group(1)), "the file's “block lifetime” line"
    elif found := _RETENTION.search(text):
        lifetime, source = float(found.group(1)), "lmcache_retention_ttl_sec"
    for record in records:
        record.salt, record.lifetime_s, record.lifetime_from = salt, lifetime, source
    return records


def number(value: object, file_name: str, line: int | None, setting: str) -> float:
    """A size or count as a float (YAML gives numbers or quoted strings: "30")."""
    if isinstance(value, bool):
        raise DeployedError(file_name, line, f"{setting} is {value}, not a number")
    try:
        out = float(str(value).strip())
    except ValueError:
        raise DeployedError(file_name, line, f"{setting} {value!r} is not a number") from None
    if out != out or out < 0 or out == float("inf"):
        raise DeployedError(file_name, line, f"{setting} {value!r} is not a size")
    return out


def count(value: object, file_name: str, line: int | None, setting: str) -> int:
    """A tensor-parallel degree: a whole number of at least 1."""
    out = number(value, file_name, line, setting)
    if out < 1 or out != int(out):
        raise DeployedError(file_name, line, f"{setting} {value!r} is not a whole number ≥ 1")
    return int(out)


def line_of(text: str, key: str, after: int = 0) -> int | None:
    """The first line naming a key after line `after` (where a bad value in a parsed
    YAML or JSON is)."""
    pattern = re.compile(rf"(^|[\s\"'{{,-]){re.escape(key)}[\"']?\s*:")
    for number_, line in enumerate(text.splitlines(), start=1):
        if number_ > after and pattern.search(line):
            return number_
    return None


def truthy(value: object) -> bool:
    """A YAML boolean or an environment string ("True", "false", "1")."""
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def lmcache_tiers(config: dict, file_name: str, line_for) -> tuple[Tier, Tier, Tier]:
    """RAM, disk and remote tiers of an LMCache configuration (its YAML keys, or its
    LMCACHE_* variables lower-cased without the prefix), at LMCache's documented defaults
    for keys not given (local_cpu true, max_local_cpu_size 5.0 GB per rank)."""

    def size(key: str, default: float) -> float:
        value = config.get(key, default)
        return default if value is None else number(value, file_name, line_for(key), key)

    ram = Tier(
        enabled=truthy(config.get("local_cpu", True)),
        basis="per_rank",
        setting="max_local_cpu_size",
    )
    if ram.enabled:
        ram.size_gib = size("max_local_cpu_size", 5.0)
    disk_gib = size("max_local_disk_size", 0.0)
    disk = Tier(
        enabled=bool(config.get("local_disk")) or disk_gib > 0,
        basis="per_rank",
        setting="max_local_disk_size",
    )
    if disk.enabled:
        disk.size_gib = disk_gib
    remote = Tier(enabled=bool(config.get("remote_url")), setting="remote_url")
    return ram, disk, remote
