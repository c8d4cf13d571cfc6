"""What the What if page asks of the engine model `traceq whatif` calibrates (traceq/whatif/,
docs/WHATIF.md), and its charts; no Streamlit here (traceq/app/data.py caches these).

The curves replay the run's own requests (seed 0, the trace replay) at `CURVE_POINTS` rates
from a little above zero to past the highest max sustainable rate, under the run's settings
and under the changed ones: what reaches the browser is one row per rate and setting, never a
request.

>>> rate_grid(12.0, 4)
[3.0, 6.0, 9.0, 12.0]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import altair as alt
import polars as pl

from traceq.app.charts import PADDING, SERIES_COLORS, WIDTH
from traceq.whatif.limits import Limits, SettingError, SettingValue
from traceq.whatif.model import Observed, Outcome
from traceq.whatif.predict import Calibrated, backtest, low_confidence_warning
from traceq.whatif.replay import replay
from traceq.whatif.search import max_rate

CURVE_POINTS = 24
"""Rates each curve is replayed at: enough to see where latency turns up, and one row each is
all a chart ships (two curves of 24 points)."""

SPAN = 1.25
"""The curves reach this multiple of the highest max sustainable rate (or of the run's own
rate, when that is higher), so the knee and what lies past it are both on the chart."""

ATTAINMENT = 0.95
"""The attainment the max rates are searched at and the target line drawn at: 95 %, as
`traceq whatif --max-rate` defaults to (DEFAULT_ATTAINMENT in traceq/whatif/predict.py)."""

SEED = (0,)
"""The page searches with the trace replay alone: the CLI's `--max-rate` adds resampled runs
for an interval; a page redrawn at each change of a setting keeps to one."""

SLIDER_STEPS = 200
"""Positions of the rate slider across the curves' span: steps of 0.5 % of it."""

INPUT_STEP_SHARE = 8
"""The setting inputs step by an eighth of the run's value (256 → 288 or 224): a change big
enough to move a curve in a click or two."""

OBSERVED = "as observed"
CHANGED = "with the changes"


@dataclass(frozen=True)
class Curves:
    """Both curves as one frame, the run's own point, and what the page says beside them."""

    frame: pl.DataFrame
    """rate_rps, settings (OBSERVED / CHANGED), ttft_p99_ms, tpot_p50_ms, attainment and
    goodput_rps: one row per rate and setting."""
    observed: pl.DataFrame
    """One row: the run's rate, TTFT p99 and SLO attainment, from its own requests."""
    max_rates: dict[str, float]
    """Max sustainable rate per curve, req/s (the trace replay's)."""
    warning: str = ""
    """The back-test's low-confidence sentence, or why the changed settings cannot run."""


def rate_grid(top: float, points: int = CURVE_POINTS) -> list[float]:
    """`points` evenly spaced rates up to `top` (none at zero: no traffic, no latency)."""
    return [top * (i + 1) / points for i in range(points)]


def settings_sets(
    cal: Calibrated, changes: Mapping[str, SettingValue]
) -> tuple[dict[str, Limits], str]:
    """The limits of each curve (as observed; with the changes, when vLLM would take them)
    and, when it would not, why."""
    sets = {OBSERVED: cal.limits}
    if not changes:
        return sets, ""
    try:
        sets[CHANGED] = cal.limits.with_settings(dict(changes))
    except SettingError as exc:
        return sets, f"The changed settings cannot run: {exc}."
    return sets, ""


def curves(
    cal: Calibrated,
    observed: Observed,
    changes: Mapping[str, SettingValue],
    slo: dict[str, float | None],
    price: float,
) -> Curves:
    """TTFT p99 and SLO attainment against the rate, as observed and with `changes`."""
    sets, warning = settings_sets(cal, changes)
    bt = backtest(cal, observed, slo, price)
    if bt.low_confidence:
        warning = " ".join(filter(None, [_capital(low_confidence_warning(bt)) + ".", warning]))
    model = cal.model
    found = {
        name: max_rate(model, lim, slo, ATTAINMENT, price, seeds=SEED).rate_rps
        for name, lim in sets.items()
    }
    top = SPAN * max(*found.values(), model.workload.rate_rps)
    rows = [
        _row(replay(model, lim, rate, 0, slo, price), name)
        for name, lim in sets.items()
        for rate in rate_grid(top)
    ]
    seen = pl.DataFrame(
        {
            "rate_rps": [model.workload.rate_rps],
            "ttft_p99_ms": [observed.ttft_ms.p99 if observed.ttft_ms else None],
            "attainment": [observed.slo_attainment],
        },
        schema={"rate_rps": pl.Float64, "ttft_p99_ms": pl.Float64, "attainment": pl.Float64},
    )
    return Curves(pl.DataFrame(rows), seen, found, warning)


def at_rate(
    cal: Calibrated,
    changes: Mapping[str, SettingValue],
    slo: dict[str, float | None],
    price: float,
    rate: float,
) -> dict[str, dict[str, float | str | None]]:
    """The replay at one rate, as observed and with the changes: curve name → figures."""
    sets, _ = settings_sets(cal, changes)  # curves() says why a change cannot run
    model = cal.model
    return {name: _row(replay(model, lim, rate, 0, slo, price), name) for name, lim in sets.items()}


def _row(o: Outcome, name: str) -> dict[str, float | str | None]:
    return {
        "rate_rps": o.rate_rps,
        "settings": name,
        "ttft_p99_ms": o.ttft_ms.p99 if o.ttft_ms else None,
        "tpot_p50_ms": o.tpot_ms.p50 if o.tpot_ms else None,
        "attainment": o.slo_attainment,
        "goodput_rps": o.goodput_rps,
    }


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


# -- charts ---------------------------------------------------------------------------------
def _x(top: float) -> alt.X:
    return alt.X(
        "rate_rps:Q",
        title="arrival rate (req/s)",
        scale=alt.Scale(domain=[0, top], nice=False),
        axis=alt.Axis(format=",.4~g"),
    )


def _color(names: list[str]) -> alt.Color:
    """One colour per curve drawn, the legend above the plot (not over the curves)."""
    return alt.Color(
        "settings:N",
        title=None,
        scale=alt.Scale(domain=names, range=list(SERIES_COLORS[: len(names)])),
        legend=alt.Legend(orient="top", direction="horizontal"),
    )


def curve_chart(c: Curves, metric: str, rate: float) -> alt.LayerChart:
    """One metric (`ttft_p99_ms` or `attainment`) against the rate: a line per setting, the
    run's own point as a black diamond, the slider's rate as a vertical rule and, for
    attainment, the 95 % target as a dashed line."""
    attainment = metric == "attainment"
    title = "SLO attainment" if attainment else "TTFT p99"
    y_title = "requests meeting the SLO" if attainment else "TTFT p99 (ms, log scale)"
    y_scale = alt.Scale(domain=[0, 1]) if attainment else alt.Scale(type="log")
    y_format = ".0%" if attainment else ",.0f"
    top = float(c.frame["rate_rps"].max() or 1.0)
    names = [n for n in (OBSERVED, CHANGED) if n in c.frame["settings"].to_list()]
    y = alt.Y(f"{metric}:Q", title=y_title, scale=y_scale, axis=alt.Axis(format=y_format))
    tip = [
        alt.Tooltip("rate_rps:Q", title="req/s", format=",.2f"),
        alt.Tooltip(f"{metric}:Q", title=title, format=".1%" if attainment else ",.0f"),
    ]
    lines = (
        alt.Chart(c.frame.drop_nulls(metric))
        .mark_line(point=alt.OverlayMarkDef(size=20))
        .encode(x=_x(top), y=y, color=_color(names), tooltip=["settings:N", *tip])
    )
    seen = (
        alt.Chart(c.observed.drop_nulls(metric))
        .mark_point(shape="diamond", size=140, filled=True, color="#000000")
        .encode(x=_x(top), y=y, tooltip=[alt.Tooltip("rate_rps:Q", title="the run, req/s",
                                                     format=",.2f"), tip[1]])
    )  # fmt: skip
    rule = (
        alt.Chart(pl.DataFrame({"rate_rps": [rate]})).mark_rule(color="#888888").encode(x=_x(top))
    )
    layers = [lines, seen, rule]
    if attainment:
        target = pl.DataFrame({"attainment": [ATTAINMENT]})
        layers.append(alt.Chart(target).mark_rule(strokeDash=[4, 4], color="#e15759").encode(y=y))
    return alt.layer(*layers).properties(
        width=WIDTH, height=260, padding=PADDING, title=f"{title} against the arrival rate"
    )
