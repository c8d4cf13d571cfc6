"""Predictions a playbook cites as its check: a playbook's `prediction:` names a setting change
(`traceq whatif --set`) and a sentence; for each incident root of that playbook (a
consequence's change is its root's), the change is replayed on the run's own calibrated
engine model and the sentence filled with what the replay predicts, beside the replay of the
run as it was and the run's own figures (`Finding.prediction`).

The figures a `says` template can use, per metric `ttft`, `tpot` and `tbt` and statistic
`p50`, `p90`, `p99` and `max` (ms): `predicted_<m>_<s>` (with the change), `asis_<m>_<s>`
(the replay of the run as it was) and `observed_<m>_<s>` (the run's own); and `setting`
(`replicas=2`). A value `×F` is F times the run's own limit (`replicas: ×2` on a run of one
replica replays two). The run is calibrated and back-tested once, whatever the number of roots
that cite a change, with `traceq whatif`'s steps (traceq/whatif/predict.py). A run that cannot
be calibrated (no per-chunk timing, too short), or whose replay as it was misses its own
figures by more than the back-test's bound, gets no prediction: a number the model could not
reproduce on the run itself is not cited. A caller that already holds the run's calibration
(the report's Headroom, traceq/report/headroom.py) hands it over and it is not fitted again.

`diagnose_and_cite` is the playbook engine's `diagnose` followed by `cite`: what
`traceq diagnose`, the app's Findings page and `traceq report` run on a DuckDB session.

>>> from traceq.whatif.cite import figures
>>> sorted(figures(None, None, None))[:2]
['asis_tbt_max', 'asis_tbt_p50']
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from traceq.findings import Diagnosis, Finding
from traceq.playbooks import Options, diagnose
from traceq.playbooks.model import Playbook, Prediction
from traceq.playbooks.words import MISSING, fmt
from traceq.session import QueryError, Session
from traceq.slo import DEFAULT_GPU_HOUR_USD, DEFAULT_SLO
from traceq.whatif.limits import Limits, SettingError, parse_settings
from traceq.whatif.model import BackTest, Observed, Outcome, Quantiles
from traceq.whatif.predict import Calibrated, WhatIfInputError, backtest, calibrate, observe
from traceq.whatif.replay import replay

METRICS = ("ttft", "tpot", "tbt")
STATS = ("p50", "p90", "p99", "max")
RELATIVE = re.compile(r"^[x×](\d+(?:\.\d+)?)$")
"""A `prediction.set` value relative to the run's own limit: `×2`, `x1.5`."""


def diagnose_and_cite(
    session: Session,
    playbooks: Sequence[Playbook],
    options: Options | None = None,
    calibrated: Calibrated | None = None,
) -> Diagnosis:
    """Run `playbooks` on `session`'s dataset (traceq.playbooks.diagnose), then fill the
    predictions their incident roots cite (`cite`, with `calibrated` when given)."""
    result = diagnose(session, list(playbooks), options)
    cite(session, result, playbooks, calibrated)
    return result


def cite(
    session: Session,
    diagnosis: Diagnosis,
    playbooks: Sequence[Playbook],
    calibrated: Calibrated | None = None,
) -> None:
    """Fill `prediction` on every failing finding (an incident's root) whose playbook cites
    one and whose `when` cause, if any, is confirmed. The run is calibrated on `session`
    only then, and only when `calibrated` (the same dataset's engine model) is not given."""
    specs = {pb.id: pb.prediction for pb in playbooks if pb.prediction is not None}
    wanted = [
        (finding, spec)
        for finding in diagnosis.findings
        if (spec := specs.get(finding.id)) is not None
        and finding.status == "fail"
        and _holds(spec, finding)
    ]
    if not wanted:
        return
    try:
        cal = calibrated if calibrated is not None else calibrate(session)
        observed = observe(session, DEFAULT_SLO)
    except (WhatIfInputError, SettingError, QueryError):
        return
    bt = backtest(cal, observed, DEFAULT_SLO, DEFAULT_GPU_HOUR_USD)
    if bt.low_confidence:
        return
    for finding, spec in wanted:
        finding.prediction = predict(cal, bt, spec)


def _holds(spec: Prediction, finding: Finding) -> bool:
    return not spec.when or any(
        c.id == spec.when and c.status == "confirmed" for c in finding.causes
    )


def predict(cal: Calibrated, bt: BackTest, spec: Prediction) -> str:
    """`spec.says` filled with the replay of its setting change at the observed rate; empty
    when the setting is unknown to `traceq whatif` or a relative one has no numeric limit."""
    pairs = _pairs(cal.limits, spec.settings)
    try:
        changed = cal.limits.with_settings(parse_settings(pairs)) if pairs else None
    except SettingError:
        return ""
    if changed is None:
        return ""
    rate = cal.model.workload.rate_rps
    outcome = replay(
        cal.model, changed, rate, 0, DEFAULT_SLO, DEFAULT_GPU_HOUR_USD, "cited", observed_speed=True
    )
    values = figures(outcome, bt.predicted, bt.observed)
    values["setting"] = ", ".join(_shown(pair) for pair in pairs)
    text = fmt(spec.says, values)
    return "" if MISSING in text else text


def _pairs(limits: Limits, settings: dict[str, str]) -> list[str]:
    """`--set` pairs of `settings`, each `×F` resolved against the run's own limits; empty
    when such a limit is not a number."""
    out = []
    for key, value in settings.items():
        if m := RELATIVE.match(value):
            base = limits.items[key].value if key in limits.items else None
            if isinstance(base, bool) or not isinstance(base, int | float):
                return []
            value = str(max(1, round(base * float(m[1]))))
        out.append(f"{key}={value}")
    return out


def _shown(pair: str) -> str:
    """A `--set` pair as a sentence shows it, whole numbers with separators, as `traceq
    whatif` prints settings.

    >>> _shown("kv_cache_tokens=10000"), _shown("chunked_prefill=on")
    ('kv_cache_tokens=10,000', 'chunked_prefill=on')
    """
    key, _, value = pair.partition("=")
    return f"{key}={int(value):,}" if value.isdigit() else pair


def figures(
    predicted: Outcome | None, asis: Outcome | None, observed: Observed | None
) -> dict[str, Any]:
    """`predicted_<m>_<s>`, `asis_<m>_<s>` and `observed_<m>_<s>` (ms; None where unknown)."""
    out: dict[str, Any] = {}
    for prefix, source in (("predicted", predicted), ("asis", asis), ("observed", observed)):
        for m in METRICS:
            q: Quantiles | None = source.metric(f"{m}_ms") if source is not None else None
            for s in STATS:
                out[f"{prefix}_{m}_{s}"] = q.get(s) if q is not None else None
    return out
