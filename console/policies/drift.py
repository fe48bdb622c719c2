"""Drift: a deployment (console.policies.deployed) set field by field against the approved
version governing its routes. Compliant, or each difference named by kind.

The expected values are the exporter's own (exports.common.sizes: each route's RAM and disk size
per rank and in total, from metrics.md section 8; serving.Served: model, TP, the KV dtype
the engine holds), so a deployment of kvscope's export is compliant by construction and a
size is compared on the basis the file states it in (per rank, or over the TP ranks). Two
sizes within the exporter's 0.01 GB rounding step are the same size.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from console.policies.deployed import TIER_NAMES, Deployed, Deployment, Tier
from console.policies.exports import RouteSize, lmcache_files
from console.policies.exports.common import sizes
from console.policies.serving import Served, route_preset

# the kinds of difference, as stored and as the page names them
KINDS = {
    "route not governed": "Route not governed",
    "model": "Another model",
    "tp": "Tensor parallelism",
    "size": "Size",
    "dtype": "KV dtype",
    "disabled tier enabled": "Disabled tier enabled",
    "scope salt missing": "Scope salt missing",
    "lifetime absent": "Lifetime absent",
    "lifetime": "Another lifetime",
}
TOLERANCE_GIB = 0.01  # the exporter rounds every size up to the next 0.01
_LIFETIME_TOLERANCE_S = 0.5
_BASIS = {
    "total": "in total over the route's TP ranks",
    "per_rank": "per TP rank",
    "server": "for the LMCache server (the route's total over its TP ranks)",
}
# vLLM / SGLang --kv-cache-dtype values as kvscope's KV dtypes ("auto": the model's own)
_DTYPES = {
    "bfloat16": "bf16",
    "bf16": "bf16",
    "float16": "fp16",
    "fp16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "fp32": "fp32",
    "float": "fp32",
}


class DriftError(ValueError):
    """A check that cannot be made as asked (said in words for the form)."""


@dataclass(frozen=True)
class Difference:
    kind: str  # a KINDS key
    route: str
    message: str
    expected: object = None
    found: object = None
    tier: str = ""


@dataclass
class Drift:
    differences: list[Difference] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the file left unchecked, and why
    routes: list[str] = field(default_factory=list)  # the governed routes it was set against

    @property
    def compliant(self) -> bool:
        return not self.differences

    def add(self, difference: Difference) -> None:
        """A difference, once: a file-level one (the salt, the lifetime) holds for every
        command of a route, and is said once per route."""
        if difference not in self.differences:
            self.differences.append(difference)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def kinds(self) -> list[str]:
        return sorted({d.kind for d in self.differences})

    def as_json(self) -> list[dict]:
        return [asdict(d) for d in self.differences]


def compare(deployment: Deployment, body: dict, route: str | None = None) -> Drift:
    """Every record of the deployment against the body's routes. `route` names the route
    of records that name none (an LMCache file, an LMCache server)."""
    rows = {s.route: (s, ram, disk) for s, ram, disk in sizes(body)}
    drift = Drift()
    for record in deployment.records:
        target = _target(record, rows, route, body, drift)
        if target is None:
            names = ", ".join(record.names) or route or "?"
            drift.add(
                Difference(
                    "route not governed",
                    names,
                    f"{names} (line {record.line}) is not a route this version governs "
                    f"(it governs {', '.join(rows)}).",
                    expected=list(rows),
                    found=names,
                )
            )
            continue
        if target not in drift.routes:
            drift.routes.append(target)
        _compare_record(record, *rows[target], body, drift)
    return drift


def _target(record: Deployed, rows: dict, asked: str | None, body: dict, drift: Drift):
    """The governed route a record serves (None: not one of the version's)."""
    if record.names:
        by_lower = {r.lower(): r for r in rows}
        return next((by_lower[n.lower()] for n in record.names if n.lower() in by_lower), None)
    if asked:
        return asked if asked in rows else None
    files = lmcache_files(body)
    if len(files) != 1:
        listed = "; ".join(f"{name}: {', '.join(routes)}" for name, routes in files)
        raise DriftError(
            "The file names no model, and this version's routes need different LMCache "
            f"files ({listed}): choose the route it serves."
        )
    routes = files[0][1]
    drift.note(
        f"The file names no model: set against {routes[0]}"
        + (f", whose sizes {', '.join(routes[1:])} share" if len(routes) > 1 else "")
        + "."
    )
    return routes[0]


def _compare_record(record: Deployed, s: Served, ram, disk, body: dict, drift: Drift) -> None:
    add, where = drift.add, f"{s.route} (line {record.line})"
    if record.model and not _same_model(record.model, s.model):
        add(
            Difference(
                "model",
                s.route,
                f"{where} serves {record.model}; the policy serves it as {s.model}.",
                expected=s.model,
                found=record.model,
            )
        )
    if record.tp is not None and record.tp != s.tp:
        add(
            Difference(
                "tp",
                s.route,
                f"{where} runs at TP {record.tp}; the policy's sizes are for TP {s.tp}.",
                expected=s.tp,
                found=record.tp,
            )
        )
    if record.kv_dtype is not None:
        found = _kv_dtype(record.kv_dtype, s.model_dtype)
        if found != s.engine_kv_dtype:
            add(
                Difference(
                    "dtype",
                    s.route,
                    f"{where} holds KV as {found} (--kv-cache-dtype {record.kv_dtype}); "
                    f"the policy's sizes are for {s.engine_kv_dtype} (--kv-cache-dtype "
                    f"{s.vllm_kv_dtype}).",
                    expected=s.engine_kv_dtype,
                    found=record.kv_dtype,
                )
            )
    tiers = body["tiers"]
    found_tiers = {
        "cpu_ram": (record.ram, ram),
        "local_disk": (record.disk, disk),
        "remote": (record.remote, None),
    }
    elsewhere = {t.elsewhere: None for t, _ in found_tiers.values() if t.enabled is None}
    if elsewhere:  # an LMCache connector: its tiers are in the LMCache file it reads
        unchecked = [TIER_NAMES[n] for n, (t, _) in found_tiers.items() if t.enabled is None]
        drift.note(
            f"{where}: its {', '.join(unchecked)} tiers are set {' and '.join(elsewhere)}, "
            "not in this file: check that file too."
        )
    for name, (found_tier, expected) in found_tiers.items():
        _compare_tier(record, s, name, found_tier, expected, bool(tiers[name]["enabled"]), drift)
    _compare_declarations(record, s, body, drift)


def _compare_tier(
    record: Deployed,
    s: Served,
    name: str,
    found: Tier,
    expected: RouteSize | None,
    allowed: bool,
    drift: Drift,
) -> None:
    tier, where = TIER_NAMES[name], f"{s.route} (line {record.line})"
    if found.enabled is None:  # said once for the record (_compare_record)
        return
    if not allowed:
        if found.enabled:
            drift.add(
                Difference(
                    "disabled tier enabled",
                    s.route,
                    f"{where} has a {tier} tier ({found.setting}); the policy disables it.",
                    expected="off",
                    found="on",
                    tier=name,
                )
            )
        return
    if expected is None:  # a remote store the policy allows: it sizes none
        return
    if found.enabled and found.size_gib is None:
        why = f" ({found.elsewhere})" if found.elsewhere else ""
        drift.note(f"{where}: the {tier} tier's size is not in the file{why}.")
        return
    if name == "local_disk" and not found.enabled:
        # a disk the policy allows but does not require (kvscope's own vLLM command has
        # none): less is kept than allowed, which no retention rule forbids
        drift.note(
            f"{where}: the policy allows a {tier} tier of "
            f"{expected.per_rank:g} GiB per TP rank; this deployment has none."
        )
        return
    basis = found.basis or ("total" if record.format.startswith("vllm") else "per_rank")
    want = expected.per_rank if basis == "per_rank" else expected.total
    got = found.size_gib if found.enabled else 0.0
    if abs(got - want) > TOLERANCE_GIB + 1e-9:
        setting = f" ({found.setting})" if found.setting and found.enabled else ""
        drift.add(
            Difference(
                "size",
                s.route,
                f"{where}: the {tier} tier is {got:g} GiB {_BASIS[basis]}{setting}"
                + ("" if found.enabled else " (off)")
                + f"; the policy's is {want:g} GiB.",
                expected=want,
                found=got,
                tier=name,
            )
        )


def _compare_declarations(record: Deployed, s: Served, body: dict, drift: Drift) -> None:
    scope, lifetime = body["scope"], body.get("lifetime_s")
    if scope in ("tenant", "user") and not record.salt:
        drift.add(
            Difference(
                "scope salt missing",
                s.route,
                f"{s.route}: the policy shares blocks per {scope}, but the file names no "
                "cache_salt (nor LMCache's IsolatedLRU): nothing keeps one "
                f"{scope}'s blocks from another's.",
                expected=f"per-{scope} cache_salt",
                found="none",
            )
        )
    if lifetime is None:
        return
    if record.lifetime_s is None:
        drift.add(
            Difference(
                "lifetime absent",
                s.route,
                f"{s.route}: the policy's blocks live {lifetime:g} s, but the file configures "
                "no lifetime.",
                expected=lifetime,
                found=None,
            )
        )
    elif abs(record.lifetime_s - lifetime) > _LIFETIME_TOLERANCE_S:
        drift.add(
            Difference(
                "lifetime",
                s.route,
                f"{s.route}: the file's lifetime is {record.lifetime_s:g} s "
                f"({record.lifetime_from}); the policy's is {lifetime:g} s.",
                expected=lifetime,
                found=record.lifetime_s,
            )
        )


def _kv_dtype(value: str, model_dtype: str) -> str:
    """An engine's --kv-cache-dtype as the KV dtype it holds."""
    value = value.strip().lower()
    if value == "auto":
        return model_dtype
    if value.startswith("fp8"):  # fp8, fp8_e4m3, fp8_e5m2: one byte per element
        return "fp8"
    return _DTYPES.get(value, value)


def _same_model(found: str, expected: str) -> bool:
    """The same model by name, Hugging Face id or preset (any case)."""
    if found.strip().lower() == expected.strip().lower():
        return True
    preset = route_preset(found)
    return preset is not None and preset == route_preset(expected)
