"""`traceq whatif` as text: the calibration in a few lines, the back-test and the scenarios as
short tables, the max sustainable rate in a sentence. Data in traceq/whatif/model.py.

>>> ms(0.042), ms(0.42), ms(3.14), ms(38.04), ms(1520.0), ms(None)
('42 µs', '0.42 ms', '3.1 ms', '38 ms', '1.5 s', '—')
"""

from __future__ import annotations

import polars as pl

from traceq.playbooks.words import counted, duration_ms
from traceq.render import render_frame
from traceq.whatif.limits import KNOBS, Limit, SettingValue
from traceq.whatif.model import Capacity, Outcome, Quantiles, WhatIf
from traceq.whatif.search import MIN_FACTOR
from traceq.whatif.speed import Speed
from traceq.whatif.workload import Workload


def ms(v: float | None) -> str:
    """A duration in ms as diagnose prints it (traceq/playbooks/words.py); a dash in a table
    cell when unknown."""
    return "—" if v is None else duration_ms(v)


def rate(v: float) -> str:
    if 0 < v < 0.1:
        return f"{v:.2g} req/s"
    return f"{v:,.2f} req/s" if v < 100 else f"{v:,.0f} req/s"


def pct(v: float | None) -> str:
    return "—" if v is None else f"{v * 100:.1f} %"


def render_text(r: WhatIf) -> str:
    cal = r.calibration
    lines = [f"traceq whatif {r.dataset}".rstrip(), ""]
    if r.low_confidence:
        lines += ["LOW CONFIDENCE: " + r.warnings[0].removeprefix("low confidence: "), ""]
    lines += _calibration(r)
    bt = cal.backtest
    verdict = "outside" if bt.low_confidence else "within"
    lines += [
        "",
        "Back-test: the observed rate and settings replayed, against the run's own KPIs "
        f"({verdict} the {bt.bound * 100:.0f} % bound)",
    ]
    lines.append(_backtest_table(r))
    if r.scenarios:
        lines += ["", f"Scenarios (SLO {_slo(r.slo)}; cost at ${r.gpu_hour_usd:,.2f} per GPU-hour)"]
        lines.append(_scenario_table(r.scenarios, cal.limits.settings()))
        for s in r.scenarios:
            for w in s.warnings:
                lines.append(f"  note ({s.label}, {rate(s.rate_rps)}): {w}")
    if r.max_rate is not None:
        m = r.max_rate
        lo, hi = m.interval
        bound = "at least " if m.capped else ""
        changed = _changed(m.settings, cal.limits.settings())
        under = f" with {changed}" if changed else ""
        lines += [
            "",
            f"Max sustainable rate{under}: {bound}{rate(m.rate_rps)} with {pct(m.attainment)} of "
            f"requests meeting {_slo(r.slo)} ({rate(lo)} to {rate(hi)} over {len(m.per_seed)} "
            "replays: the run's own arrivals and resampled ones)",
        ]
    if r.capacity is not None:
        lines += ["", *_capacity(r)]
    rest = [w for w in r.warnings if not w.startswith("low confidence")]
    if rest:
        lines += ["", *[f"warning: {w}" for w in rest]]
    return "\n".join(lines) + "\n"


def _capacity(r: WhatIf) -> list[str]:
    """The --target-rate plan: the per-replica rate, then the replicas, GPUs and their price,
    without and with headroom."""
    c = r.capacity
    assert c is not None
    per = c.per_replica
    lo, hi = per.interval
    gpus = c.gpus_per_replica
    changed = _changed(per.settings, r.calibration.limits.settings() | {"replicas": 1})
    under = f", with {changed}" if changed else ""
    head = (
        f"Capacity for {rate(c.target_rps)} ({pct(r.attainment)} of requests meeting "
        f"{_slo(r.slo)}{under}; ${r.gpu_hour_usd:,.2f} per GPU-hour):"
    )
    if c.replicas is None:
        floor = rate(r.calibration.workload.rate_rps * MIN_FACTOR)
        return [head, "  no number of replicas meets it: one replica misses the SLO even at "
                f"{floor}, 1/{1 / MIN_FACTOR:.0f} of the run's rate (the SLO is tighter than "
                "the engine's latency without load)"]  # fmt: skip
    lines = [
        head,
        f"  one replica ({_count(int(gpus.value), 'GPU')}: {gpus.detail}) sustains "
        f"{'at least ' if per.capped else ''}{rate(per.rate_rps)} ({rate(lo)} to {rate(hi)} "
        f"over {len(per.per_seed)} replays)",
    ]
    bound = "at most " if c.upper_bound_only else ""
    low, high = c.replicas_interval
    spread = f" ({low:,} to {high:,} replicas over the replays)" if low != high else ""
    extra = c.target_rps * (1 + c.headroom)
    return [*lines, f"  needed: {bound}{_fleet(c, c.replicas)}{spread}",
            f"  with {c.headroom * 100:.0f} % headroom ({rate(extra)}): {bound}"
            f"{_fleet(c, c.replicas_with_headroom)}"]  # fmt: skip


def _fleet(c: Capacity, replicas: int | None) -> str:
    usd = c.usd_per_hour(replicas)
    cost = "" if usd is None else f", ${usd:,.2f} an hour"
    return f"{_count(replicas, 'replica')}, {_count(c.gpus(replicas), 'GPU')}{cost}"


def _count(n: int | None, noun: str) -> str:
    return "none" if n is None else counted(n, noun)


def _speed(speed: Speed | None) -> list[str]:
    """The GPU's speed timeline, where it changed over the run (traceq/whatif/speed.py)."""
    if speed is None:
        return []
    d = speed.to_dict()
    return [
        f"  GPU speed changed over the run: step costs × {d['fastest']:.2f} – "
        f"{d['slowest']:.2f} by {d['window_s']:.0f} s window; the run as it was replays "
        "them, other scenarios run at × 1"
    ]


def _instances(factors: dict[str, float] | None) -> list[str]:
    if not factors:
        return []
    each = ", ".join(f"{name} {f:.2f}×" for name, f in factors.items())
    return [
        f"  instances not alike, step costs against the fit: {each}; a replay with "
        f"{len(factors):,} replicas runs each at its instance's"
    ]


def _timeout(wl: Workload) -> list[str]:
    if not wl.timeout_ns:
        return []
    return [
        f"  client timeout: {ms(wl.timeout_ns / 1e6)} after arrival ({wl.timed_out:,} requests "
        "aborted at it); every replay ends requests at it"
    ]


def _calibration(r: WhatIf) -> list[str]:
    cal = r.calibration
    t = cal.steps.terms
    fit = f"R² {cal.steps.r2:.3f}, " if cal.steps.r2 is not None else ""
    wl = cal.workload
    lengths = wl.to_dict()
    version = f"; vLLM {cal.limits.version}" if cal.limits.version else ""
    where = ", ".join(cal.instances) + version
    lines = [
        f"Calibrated on {wl.total_requests:,} requests and {cal.steps.steps:,} engine steps "
        f"({where})",
        f"  step time ({fit}rms {ms(cal.steps.rms_s * 1e3)}): {_terms(t)}",
        *_speed(cal.speed),
        *_instances(cal.instance_speed),
        f"  arrival to queue: {ms(cal.front.base_s * 1e3)}"
        f" + {cal.front.per_token_s * 1e6:.2f} µs per prompt token",
        f"  workload: {rate(wl.rate_rps)}, burstiness {wl.burstiness:.2f} (1 = Poisson), "
        f"prompt median {lengths['prompt_tokens']['p50']:,.0f} tokens, output median "
        f"{lengths['output_tokens']['p50']:,.0f} tokens, "
        f"prefix-cache hits {pct(wl.prefix_hit_rate)}",
        *_timeout(wl),
        "  limits:",
    ]
    for lim in cal.limits.items.values():
        lines.append(f"    {_limit(lim)}")
    if wl.n < wl.total_requests:
        lines.append(f"  replays use the first {wl.n:,} of the {wl.total_requests:,} requests")
    return lines


def _limit(lim: Limit) -> str:
    reached = {True: "; reached in the run", False: "; not reached in the run", None: ""}[
        lim.reached
    ]
    return f"{lim.name} {_value(lim.value)} ({lim.detail}{reached})"


def _terms(t: dict[str, float]) -> str:
    """The fitted step time, its terms that the fit kept (a term fitted to 0 is left out).

    >>> _terms({"step_overhead_s": 0.014, "decode_per_seq_s": 0.0,
    ...         "decode_per_kv_token_s": 4e-8, "prefill_per_token_s": 2.7e-5})
    '14 ms + 40 µs per 1,000 KV tokens held + 27 ms per 1,000 prefill tokens'
    """
    terms = [
        (t["step_overhead_s"] * 1e3, ""),
        (t["decode_per_seq_s"] * 1e3, " per decoding request"),
        (t["decode_per_kv_token_s"] * 1e6, " per 1,000 KV tokens held"),
        (t["prefill_per_token_s"] * 1e6, " per 1,000 prefill tokens"),
    ]
    return " + ".join(ms(v) + what for v, what in terms if v) or "0 s"


def _value(v: SettingValue) -> str:
    if isinstance(v, bool):
        return "on" if v else "off"
    return f"{v:,}"


def _slo(slo: dict[str, float | None]) -> str:
    names = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "e2e_ms": "e2e"}
    parts = [f"{names[k]} ≤ {ms(v)}" for k, v in slo.items() if v is not None and k in names]
    return ", ".join(parts) or "no limit"


def _backtest_table(r: WhatIf) -> str:
    bt = r.calibration.backtest
    errs = bt.errors()
    rows = []
    for metric, name in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("tbt_ms", "TBT")):
        obs, pred = bt.observed.metric(metric), bt.predicted.metric(metric)
        for stat in ("p50", "p99", "max"):
            key = f"{metric.removesuffix('_ms')}_{stat}"
            err = errs.get(key)
            rows.append(
                {
                    "figure": f"{name} {stat}",
                    "observed": ms(obs.get(stat) if obs else None),
                    "replayed": ms(pred.get(stat) if pred else None),
                    "error": "—" if err is None else f"{err * 100:+.1f} %",
                }
            )
    rows.append(
        {
            "figure": "SLO attainment",
            "observed": pct(bt.observed.slo_attainment),
            "replayed": pct(bt.predicted.slo_attainment),
            "error": "",
        }
    )
    return _table(rows)


def _scenario_table(scenarios: list[Outcome], observed: dict[str, SettingValue]) -> str:
    rows = []
    for s in scenarios:
        rows.append(
            {
                "rate": rate(s.rate_rps),
                "settings": _changed(s.settings, observed) or "as observed",
                "TTFT p50": _stat(s.ttft_ms, "p50"),
                "TTFT p99": _stat(s.ttft_ms, "p99"),
                "TPOT p50": _stat(s.tpot_ms, "p50"),
                "TBT max": _stat(s.tbt_ms, "max"),
                "attainment": pct(s.slo_attainment),
                "goodput": rate(s.goodput_rps),
                "tokens/s": f"{s.output_tokens_per_s:,.0f}",
                "$/1M tokens": "—"
                if s.cost_per_1m_tokens is None
                else f"{s.cost_per_1m_tokens:,.3f}",
            }
        )
    return _table(rows)


def _changed(settings: dict[str, SettingValue], observed: dict[str, SettingValue]) -> str:
    """The settings that differ from the run's own, as `k=v, …` (empty when none)."""
    return ", ".join(
        f"{k}={_value(v)}" for k, v in settings.items() if k in KNOBS and observed.get(k) != v
    )


def _stat(q: Quantiles | None, name: str) -> str:
    return ms(q.get(name)) if q is not None else "—"


def _table(rows: list[dict[str, str]]) -> str:
    return render_frame(pl.DataFrame(rows), "table").rstrip("\n")
