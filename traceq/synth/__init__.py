"""Scenario generator: a seeded discrete-event simulator of a continuous-batching LLM server
that writes what real deployments write (OTLP/JSON with token events, a vLLM V1 log,
nvidia-smi CSV, dcgm-exporter scrapes) with injected faults and their ground truth
(`labels.json`). The same scenario and seed always write identical bytes.

    from traceq.synth import generate
    generate("kv-pressure", "out/kv-pressure", seed=1)
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, replace
from pathlib import Path

import orjson

from traceq.synth.config import Scenario
from traceq.synth.engine import NS, Request, StepInfo, window_ns
from traceq.synth.faults import ClientView, fault_entry, injected, summary
from traceq.synth.fit import Fitted, fit
from traceq.synth.hardware import DEFAULT as DEFAULT_HARDWARE
from traceq.synth.hardware import PROFILES, on_hardware
from traceq.synth.scenarios import SAMPLE_SCENARIOS, SCENARIOS
from traceq.synth.sim import Collect, RunInfo, plan, simulate
from traceq.synth.variants import (
    DEFAULT_INTENSITY,
    INTENSITIES,
    KNOBS,
    describe,
    resolve,
    with_intensity,
    with_window,
)
from traceq.synth.write_conventions import CONVENTIONS, DISAGG_CONVENTIONS
from traceq.synth.write_disagg import (
    DISAGG_UNSEEN,
    LOST_ERROR,
    LOST_EVERY,
    PRODUCER_NAMES,
    DisaggWriter,
)
from traceq.synth.write_gpu import GpuWriter
from traceq.synth.write_otlp import OtlpWriter
from traceq.synth.write_vllm_log import VllmLogWriter

__all__ = [
    "CONVENTIONS",
    "INTENSITIES",
    "KNOBS",
    "SAMPLE_SCENARIOS",
    "SCENARIOS",
    "Collect",
    "generate",
    "scenario",
    "simulate",
]

FILES = {
    "otlp": "traces.otlp.jsonl",
    "client_otlp": "client.otlp.jsonl",
    "vllm_log": "vllm.log",
    "nvidia_smi": "nvidia-smi.csv",
    "dcgm": "dcgm.prom",
    "labels": "labels.json",
}
GPU_LEAD_NS = 10 * NS  # GPU sampling starts this long before the engine is ready


def scenario(
    name: str,
    requests: int | None = None,
    duration_s: float | None = None,
    intensity: str | None = None,
    window: tuple[float, float] | None = None,
    seed: int = 1,
    hardware: str = DEFAULT_HARDWARE,
) -> Scenario:
    """A named scenario on `hardware` (a profile of traceq/synth/hardware.py), optionally
    rescaled to `requests` and / or an arrival span, at an `intensity` (mild / medium /
    strong; None: the scenario as committed, i.e. strong) and with its faults confined to
    `window` (seconds after the first arrival). `seed` only matters for knobs relative to the
    run's own traffic (variants.KvPeak).

    The profile applies before the rescale, so `duration_s` is the arrival span on every
    profile: without `requests`, a slower GPU's scaled-down rate gives fewer requests, not a
    longer run (a window in seconds stays where it was put among the traffic); and a KvPeak
    budget is the peak need of the traffic the profile's engine serves."""
    if name not in SCENARIOS:
        msg = f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}"
        raise KeyError(msg)
    sc = SCENARIOS[name]
    if intensity is not None:
        sc = with_intensity(sc, intensity)
    if window is not None:
        sc = with_window(sc, window, intensity or DEFAULT_INTENSITY)
    sc = on_hardware(sc, hardware)
    w = sc.workload
    if requests is not None:
        w = replace(w, requests=requests)
    if duration_s is not None:
        if requests is None:
            w = replace(w, requests=max(1, round(duration_s * (w.rate_per_s or 1.0))))
        w = replace(w, rate_per_s=w.requests / duration_s)
    sc = replace(sc, workload=w)
    if sc.name in KNOBS:
        level = intensity or DEFAULT_INTENSITY
        sc = replace(sc, intensity=level, description=describe(sc, level))
    return resolve(sc, seed)


class _Summary:
    """Request-level totals for labels.json."""

    def __init__(self) -> None:
        self.n = self.completed = self.errors = self.aborted = 0
        self.prompt = self.output = 0

    def on_finish(self, r: Request) -> None:
        self.n += 1
        self.prompt += r.prompt
        self.output += len(r.tokens)
        self.errors += r.error is not None
        self.aborted += r.finish_reason == "abort"
        self.completed += r.error is None

    def on_step(self, s: StepInfo) -> None:
        pass

    def on_preempt(self, t: int, r: Request) -> None:
        pass


def generate(
    name: str | Scenario,
    out_dir: str | os.PathLike[str],
    seed: int = 1,
    requests: int | None = None,
    duration_s: float | None = None,
    convention: str = "traceq",
    intensity: str | None = None,
    window: tuple[float, float] | None = None,
    hardware: str = DEFAULT_HARDWARE,
) -> dict:
    """Simulate a scenario and write its files into `out_dir`; returns the labels dict.

    `convention` picks the OpenTelemetry producer convention of traces.otlp.jsonl
    (`CONVENTIONS` in traceq/synth/write_conventions.py); `dynamo` and `llmd` write a whole
    disaggregated deployment instead of one engine (traceq/synth/write_disagg.py: traces and
    labels only, with the deployment's truth under `disagg`). `intensity`: mild / medium /
    strong (None: strong, the committed samples); `window`: (start, end) seconds after the
    first arrival that every fault is confined to, inside the arrival span (raise `requests`
    or `duration_s` for a long healthy run around it). `hardware`: a profile of
    traceq/synth/hardware.py (the GPU, model size and tensor parallelism).
    """
    if convention not in CONVENTIONS:
        msg = f"unknown convention {convention!r}; known: {', '.join(CONVENTIONS)}"
        raise KeyError(msg)
    if hardware not in PROFILES:
        msg = f"unknown hardware {hardware!r}; known: {', '.join(PROFILES)}"
        raise KeyError(msg)
    if isinstance(name, Scenario):
        sc = on_hardware(name, hardware)
    else:
        sc = scenario(name, requests, duration_s, intensity, window, seed, hardware)
    fitted = fit(sc, seed)
    sc = fitted.scenario
    info, _ = plan(sc, seed)  # the clock, before simulating
    if window is not None and window[1] * NS > info.span_ns:
        msg = (
            f"window end {window[1]:g} s is past the arrival span ({info.span_ns / NS:.0f} s); "
            "raise --duration or --requests"
        )
        raise ValueError(msg)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if convention in DISAGG_CONVENTIONS:
        labels = _disaggregated(sc, seed, out, convention, fitted)
    else:
        labels = _single(sc, seed, out, convention, info, fitted)
    if hardware != DEFAULT_HARDWARE:
        labels["hardware"] = hardware
    (out / FILES["labels"]).write_bytes(
        orjson.dumps(labels, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
    )
    return labels


def _single(
    sc: Scenario, seed: int, out: Path, convention: str, info: RunInfo, fitted: Fitted
) -> dict:
    """One engine's files: traces in `convention`, its vLLM log, its GPU samples."""
    f = sc.faults
    client = out / FILES["client_otlp"] if f.client_view else None
    otlp = OtlpWriter(
        out / FILES["otlp"],
        seed=seed,
        model=sc.engine.model,
        instance=sc.engine.host,
        client_path=client,
        client_times=ClientView(f, seed, sc.start_ns, fitted.client_stalls) if client else None,
        convention=convention,
    )
    log = VllmLogWriter(out / FILES["vllm_log"], sc, seed, info.t_ready, sc.engine.kv_budget_tokens)
    gpu = GpuWriter(
        out / FILES["nvidia_smi"],
        out / FILES["dcgm"],
        sc.engine,
        seed,
        info.t_ready - GPU_LEAD_NS,
        f.throttle_clock_mhz,
    )
    summary = _Summary()
    info = simulate(sc, seed, [otlp, log, gpu, summary])
    otlp.close()
    log.close(info.t_end)
    gpu.close(info.t_end)
    files = [k for k in FILES if k != "client_otlp" or client is not None]
    labels = _labels(sc, seed, info, summary, files, fitted)
    if convention != "traceq":  # the default leaves labels.json (and sample_traces/) as it was
        labels["otel_convention"] = convention
    labels["truth"]["stats_lines"] = len(log.stats)
    return labels


def _disaggregated(sc: Scenario, seed: int, out: Path, convention: str, fitted: Fitted) -> dict:
    """A routed, disaggregated deployment's traces (traceq/synth/write_disagg.py): no vLLM log
    and no GPU samples, which are one engine's; the gateway's failures are a labelled fault."""
    writer = DisaggWriter(out / FILES["otlp"], convention, sc, seed)
    summary = _Summary()
    info = simulate(sc, seed, [writer, summary], admit=writer.admit)
    writer.close()
    truth = writer.labels()
    lost = fault_entry(
        "gateway-failures",
        [{"start": info.t_first_arrival, "end": info.t_end}],
        every=LOST_EVERY,
        requests=truth["lost"],
        error=LOST_ERROR[convention],
    )
    lost_faults = [lost] if truth["lost"] else []
    absent = {name: {"absent": why} for name, why in DISAGG_UNSEEN.items()}
    labels = _labels(sc, seed, info, summary, ["otlp", "labels"], fitted, lost_faults, absent)
    labels["otel_convention"] = convention
    labels["disagg"] = truth
    traffic = sc.description.split(". ")[0].rstrip(".")  # its first sentence: the workload
    labels["description"] = (
        f"A routed, disaggregated deployment traced by {PRODUCER_NAMES[convention]} "
        f"({truth['gateway']}, {len(truth['prefill_pool'])} prefill and "
        f"{len(truth['decode_pool'])} decode workers): the clock of "
        f"{', '.join(truth['skew']['instances'])} runs {truth['skew']['offset_ms']:.1f} ms ahead "
        f"and 1 request in {LOST_EVERY} fails at the gateway. Traffic: {traffic}."
    )
    return labels


def _span_of(sc: Scenario, info: RunInfo) -> dict[str, int] | None:
    w = window_ns(sc.faults, info.t_first_arrival)
    return {"start": w[0], "end": w[1]} if w else None


def _labels(
    sc: Scenario,
    seed: int,
    info: RunInfo,
    s: _Summary,
    written: list[str],
    fitted: Fitted,
    extra_faults: list[dict] | None = None,
    absent: dict[str, dict[str, str]] | None = None,
) -> dict:
    """labels.json; `absent`: per fault, why the files written cannot show it (its
    playbooks are then tolerated, not expected)."""
    files = {k: v for k, v in FILES.items() if k in written}
    params = {k: {**v} for k, v in fitted.params.items()}
    for name, extra in (absent or {}).items():
        params[name] = {**params.get(name, {}), **extra}
    faults = injected(sc, info, params) + (extra_faults or [])
    expected, tolerated, causes = summary(faults)
    return {
        "scenario": sc.name,
        "description": sc.description,
        "seed": seed,
        "intensity": sc.intensity if faults else None,
        "window": _span_of(sc, info),
        "generator": "traceq synth",
        "files": files,
        "faults": faults,
        "expected_playbooks": expected,
        "tolerated_playbooks": tolerated,
        "expected_causes": causes,
        "clock": {
            "engine_ready_ns": info.t_ready,
            "first_arrival_ns": info.t_first_arrival,
            "arrival_span_ns": info.span_ns,
            "end_ns": info.t_end,
            "log_timezone": "UTC",
            "log_year": time.gmtime(info.t_ready // NS).tm_year,
        },
        "truth": {
            "requests": s.n,
            "completed": s.completed,
            "errors": s.errors,
            "aborted": s.aborted,
            "prompt_tokens": s.prompt,
            "output_tokens": s.output,
            "preemptions": info.preemptions,
            "kv_max_tokens": info.kv_max_tokens,
        },
        "engine": asdict(sc.engine),
        "workload": asdict(sc.workload),
        "fault_config": asdict(sc.faults),
    }
