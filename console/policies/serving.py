"""What each governed route is served as: model, tensor parallelism and KV dtype.

The sizes of a policy come from one analysis, which assumed one model, one KV dtype and
one TP degree (its `params`, copied into the body's evidence, so signed). A route is the
model name requests carry; kvscope knows it when it is a preset name or a preset's
Hugging Face id. The body may say per route how it is served (`serving`: {route: {tp,
kv_dtype}}); otherwise a route is served as the analysis assumed. Exports serve each
route's model by its Hugging Face id under the route's own name (--served-model-name),
and checks warn where a route differs from what the sizes assumed.

A route's profile is what kvscope knows of the model it serves (its preset, or the
analysis's model for a route name kvscope does not know when the analysis used a preset);
exports size each route from it (metrics.md section 8), and fall back to the policy's
total / TP only without one.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from analysis.profiles import (
    DTYPE_BYTES,
    HF_IDS,
    PRESETS,
    KVProfile,
    ProfileError,
    profile_from_config,
)

# vLLM --kv-cache-dtype values for kvscope's KV dtypes ("auto" = the model's own dtype);
# vLLM has no fp16/fp32 KV cache other than the model's own
VLLM_KV_DTYPE = {"fp8": "fp8", "bf16": "bfloat16"}
_BY_NAME = {name.lower(): name for name in PRESETS} | {
    hf.lower(): name for name, hf in HF_IDS.items()
}


@dataclass(frozen=True)
class Sizing:
    """What the analysis behind the sizes assumed."""

    model: str  # the preset name, or the label of a config.json
    preset: str | None  # the preset, when the analysis used one
    model_dtype: str  # the model's own KV element type
    kv_dtype: str
    tp: int
    profile: KVProfile | None = None  # None when the config.json cannot be read


@dataclass(frozen=True)
class Served:
    route: str
    model: str  # what the engine loads: a Hugging Face id where kvscope knows one
    preset: str | None  # the preset the route names, if any
    tp: int
    kv_dtype: str
    model_dtype: str
    profile: KVProfile | None = None  # what kvscope knows of the model served

    @property
    def vllm_kv_dtype(self) -> str:
        if self.kv_dtype == self.model_dtype:
            return "auto"
        return VLLM_KV_DTYPE.get(self.kv_dtype, "auto")

    @property
    def engine_kv_dtype(self) -> str:
        """The KV dtype vLLM holds with `vllm_kv_dtype`: "auto" is the model's own, so a
        KV dtype vLLM has no value for (fp32, fp16 on a bf16 model) is not what it holds."""
        if self.kv_dtype == self.model_dtype or self.kv_dtype in VLLM_KV_DTYPE:
            return self.kv_dtype
        return self.model_dtype

    def dtype_mismatch(self) -> str:
        """Why the engine cannot hold the KV dtype asked for, in words ("" when it can)."""
        if self.engine_kv_dtype == self.kv_dtype:
            return ""
        asked, held = DTYPE_BYTES[self.kv_dtype], DTYPE_BYTES[self.engine_kv_dtype]
        bytes_ = f"{held} bytes per element, not {asked}" if held != asked else "as many bytes"
        return (
            f"Route “{self.route}” stores KV as {self.kv_dtype}, but vLLM has no "
            f"{self.kv_dtype} KV cache: --kv-cache-dtype auto holds the model's own "
            f"{self.engine_kv_dtype} ({bytes_}); the exports size it for {self.engine_kv_dtype}."
        )

    def tp_problem(self) -> str:
        """Why this TP cannot share the model's KV heads ("" when it can or is unknown)."""
        if self.profile is None:
            return ""
        try:
            self.profile.check_tp(self.tp)
        except ValueError as exc:
            return f"Route “{self.route}” at TP {self.tp}: {exc}."
        return ""


def route_preset(route: str) -> str | None:
    """The preset a route names (its preset name or Hugging Face id, any case)."""
    return _BY_NAME.get(route.strip().lower())


def sizing(params: dict | None) -> Sizing | None:
    """The analysis's assumptions from its parameters (None without an analysis)."""
    if not params:
        return None
    preset = route_preset(str(params.get("model") or ""))
    model_dtype, profile = "bf16", None
    if isinstance(params.get("model_config"), dict):
        preset = None
        with contextlib.suppress(ProfileError):  # unreadable: the default stays
            profile = profile_from_config(params["model_config"])
            model_dtype = profile.dtype
    elif preset is not None:
        profile = PRESETS[preset]
        model_dtype = profile.dtype
    kv_dtype = params.get("kv_dtype") or model_dtype
    return Sizing(
        model=str(params.get("model") or "?"),
        preset=preset,
        model_dtype=model_dtype,
        kv_dtype=kv_dtype if kv_dtype in DTYPE_BYTES else model_dtype,
        tp=max(1, int(params.get("tp") or 1)),
        profile=profile,
    )


def served_routes(body: dict, size: Sizing | None = None) -> list[Served]:
    """Every governed route as it is served (routes in the body's order), against the
    sizing given or else the one in the body's own evidence."""
    if size is None:
        size = sizing((body.get("evidence") or {}).get("params"))
    overrides = body.get("serving") or {}
    out = []
    for route in body["routes"]:
        preset = route_preset(route)
        if preset is not None:
            model, profile = HF_IDS.get(preset, route), PRESETS[preset]
            model_dtype = profile.dtype
        elif size is not None and size.preset is not None:
            # a route name kvscope does not know: serve the model the sizes assumed
            model, model_dtype = HF_IDS.get(size.preset, size.model), size.model_dtype
            profile = size.profile
        else:  # served as named: a model kvscope knows nothing of
            model, model_dtype, profile = route, size.model_dtype if size else "bf16", None
        own = overrides.get(route) or {}
        out.append(
            Served(
                route=route,
                model=model,
                preset=preset,
                tp=int(own.get("tp") or (size.tp if size else 1)),
                kv_dtype=own.get("kv_dtype") or (size.kv_dtype if size else model_dtype),
                model_dtype=model_dtype,
                profile=profile,
            )
        )
    return out


def route_profile(route: str, size: Sizing | None) -> KVProfile | None:
    """The profile of the model a route is served as (None when kvscope cannot know)."""
    preset = route_preset(route)
    if preset is not None:
        return PRESETS[preset]
    return size.profile if size is not None and size.preset is not None else None


def engine_problems(body: dict, size: Sizing | None) -> list[tuple[str, str]]:
    """(level, message) for each route the engine cannot serve as the body says: a TP that
    splits the KV heads unevenly (an error), a KV dtype vLLM has no value for (a warning)."""
    out = []
    for served in served_routes(body, size):
        if problem := served.tp_problem():
            out.append(("error", problem))
        if mismatch := served.dtype_mismatch():
            out.append(("warning", mismatch))
    return out


def differences(body: dict, size: Sizing | None) -> list[str]:
    """Each way a governed route differs from what the sizes assumed, in words."""
    if size is None:
        return []
    out = []
    for served in served_routes(body, size):
        if served.preset is None:
            out.append(
                f"Route “{served.route}” is not a model kvscope knows; its sizes assume "
                f"{size.model} and the exports serve {served.model}."
            )
        elif served.preset != size.preset:
            out.append(
                f"Route “{served.route}” serves {served.preset}, but the analysis sized "
                f"{size.model}: its KV bytes per token differ."
            )
        if served.kv_dtype != size.kv_dtype:
            out.append(
                f"Route “{served.route}” stores KV as {served.kv_dtype}, but the analysis "
                f"sized {size.kv_dtype}."
            )
        if served.tp != size.tp:
            out.append(
                f"Route “{served.route}” runs at TP {served.tp}, but the analysis sized "
                f"TP {size.tp}."
            )
    return out
