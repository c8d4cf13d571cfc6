"""Regression thresholds: the shipped defaults (thresholds.yaml, each with its reason) merged
with a user's file (`--thresholds FILE`, same layout)."""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from traceq.report.kpis import BY_NAME


class ThresholdError(ValueError):
    """A thresholds file that cannot be read or names an unknown KPI / key."""


@dataclass(frozen=True)
class Rule:
    """When a change of one KPI counts: at least `abs` (KPI unit) and `rel` × baseline."""

    abs: float
    rel: float


@dataclass(frozen=True)
class Thresholds:
    confidence: float
    resamples: int
    seed: int
    block_exponent: float
    rules: dict[str, Rule]

    def rule(self, kpi: str) -> Rule:
        return self.rules[kpi]


def _defaults() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("thresholds.yaml").read_text()
    return yaml.safe_load(text)


def _merge(base: dict[str, Any], extra: dict[str, Any], where: str) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if key not in ("confidence", "resamples", "seed", "block_exponent", "groups", "kpis"):
            raise ThresholdError(f"{where}: unknown key {key!r}")
        if key in ("groups", "kpis"):
            if not isinstance(value, dict):
                raise ThresholdError(f"{where}: {key} must be a mapping")
            for name, rule in value.items():
                if key == "kpis" and name not in BY_NAME:
                    raise ThresholdError(f"{where}: unknown KPI {name!r}")
                if not isinstance(rule, dict) or set(rule) - {"abs", "rel"}:
                    raise ThresholdError(f"{where}: {key}.{name} takes abs and rel only")
                out.setdefault(key, {}).setdefault(name, {}).update(rule)
        else:
            out[key] = value
    return out


def load_thresholds(path: str | os.PathLike[str] | None = None) -> Thresholds:
    """The defaults, overridden by the YAML (or JSON) file at `path` when given."""
    data = _defaults()
    if path is not None:
        try:
            extra = yaml.safe_load(Path(path).read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise ThresholdError(f"thresholds {path}: {exc}") from exc
        if not isinstance(extra, dict):
            raise ThresholdError(f"thresholds {path}: expected a mapping")
        data = _merge(data, extra, str(path))
    try:
        confidence = float(data["confidence"])
        resamples = int(data["resamples"])
        seed = int(data["seed"])
        block_exponent = float(data["block_exponent"])
        rules = {}
        for name, kpi in BY_NAME.items():
            merged = {**data["groups"].get(kpi.group, {}), **data.get("kpis", {}).get(name, {})}
            rules[name] = Rule(abs=float(merged.get("abs", 0.0)), rel=float(merged.get("rel", 0.0)))
    except (KeyError, TypeError, ValueError) as exc:
        raise ThresholdError(f"thresholds: {exc}") from exc
    if not 0 < confidence < 1 or resamples < 100:
        raise ThresholdError("thresholds: confidence must be in (0, 1) and resamples >= 100")
    if not 0 <= block_exponent < 1:
        raise ThresholdError("thresholds: block_exponent must be in [0, 1)")
    return Thresholds(confidence, resamples, seed, block_exponent, rules)
