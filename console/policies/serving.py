"""What each governed route is served as: model, tensor parallelism and KV dtype.

The sizes of a policy come from one analysis, which assumed one model, one KV dtype and
one TP degree (its `params`, copied into the body's evidence, so signed). A route is the
model name requests carry; kvscope knows it when it is a preset name or a preset's
Hugging Face id. The body may say per route how it is served (`serving`: {route: {tp,
kv_dtype}}); otherwise a route is served as the analysis assumed. Exports serve each
route's model by its Hugging Face id under the route's own name (--served-model-name),
and checks warn where a route differs from what the sizes assumed.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from analysis.profiles import DTYPE_BYTES, HF_IDS, PRESETS, ProfileError, profile_from_config

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


@dataclass(frozen=True)
class Served:
    route: str
    model: str  # what the engine loads: a Hugging Face id where kvscope knows one
    preset: str | None  # the preset the route names, if any
    tp: int
    kv_dtype: str
    model_dtype: str

    @property
    def vllm_kv_dtype(self) -> str:
        if self.kv_dtype == self.model_dtype:
            return "auto"
        return VLLM_KV_DTYPE.get(self.kv_dtype, "auto")


def route_preset(route: str) -> str | None:
    """The preset a route names (its preset name or Hugging Face id, any case)."""
    return _BY_NAME.get(route.strip().lower())


def sizing(params: dict | None) -> Sizing | None:
    """The analysis's assumptions from its parameters (None without an analysis)."""
    if not params:
        return None
    preset = route_preset(str(params.get("model") or ""))
    model_dtype = "bf16"
    if isinstance(params.get("model_config"), dict):
        preset = None
        with contextlib.suppress(ProfileError):  # unreadable: the default stays
            model_dtype = profile_from_config(params["model_config"]).dtype
    elif preset is not None:
        model_dtype = PRESETS[preset].dtype
    kv_dtype = params.get("kv_dtype") or model_dtype
    return Sizing(
        model=str(params.get("model") or "?"),
        preset=preset,
        model_dtype=model_dtype,
        kv_dtype=kv_dtype if kv_dtype in DTYPE_BYTES else model_dtype,
        tp=max(1, int(params.get("tp") or 1)),
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
            model = HF_IDS.get(preset, route)
            model_dtype = PRESETS[preset].dtype
        elif size is not None and size.preset is not None:
            # a route name kvscope does not know: serve the model the sizes assumed
            model, model_dtype = HF_IDS.get(size.preset, size.model), size.model_dtype
        else:
            model, model_dtype = route, size.model_dtype if size else "bf16"
        own = overrides.get(route) or {}
        out.append(
            Served(
                route=route,
                model=model,
                preset=preset,
                tp=int(own.get("tp") or (size.tp if size else 1)),
                kv_dtype=own.get("kv_dtype") or (size.kv_dtype if size else model_dtype),
                model_dtype=model_dtype,
            )
        )
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
