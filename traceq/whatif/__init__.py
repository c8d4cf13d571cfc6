"""`traceq whatif`: capacity and settings predicted from one run's traces (docs/WHATIF.md).

The engine model of `traceq synth` (traceq/synth/engine.py) is calibrated from the dataset —
step times fitted to what each rebuilt step did, the engine's limits from its start-up lines,
the workload's arrivals and lengths — back-tested against the run's own KPIs, then replayed
at other rates and settings.

Modules: `limits.py` (limits, their sources, `--set`), `startup.py` (what the start-up lines
print), `calibrate.py` (step-time and front fits), `workload.py` (the requests to replay),
`replay.py` (one scenario through the engine), `search.py` (max sustainable rate, the
replicas for a target rate), `model.py` (results as data, the JSON), `predict.py`
(`whatif()` and its steps), `render.py` (text), `cite.py` (the predictions playbooks cite).

>>> from traceq.session import Session
>>> from traceq.whatif import whatif
>>> with Session("run.tq") as s:                                     # doctest: +SKIP
...     print(whatif(s, rates=[2.0]).to_dict()["scenarios"][0]["ttft_ms"])
"""

from __future__ import annotations

from traceq.whatif.limits import KNOBS, SettingError, parse_settings
from traceq.whatif.model import SCHEMA_VERSION, WhatIf
from traceq.whatif.predict import WhatIfInputError, whatif

__all__ = [
    "KNOBS",
    "SCHEMA_VERSION",
    "SettingError",
    "WhatIf",
    "WhatIfInputError",
    "parse_settings",
    "whatif",
]
