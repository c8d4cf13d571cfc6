"""Writers of GPU telemetry files in the layouts the real tools print, from explicit values.

Each writer takes samples (dicts of field → value, None = unavailable) and renders them the way
nvidia-smi, nvidia-smi dmon, dcgm-exporter, the Prometheus HTTP API or dcgmi would.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

NS = 1_000_000_000
T0 = int(datetime(2025, 3, 1, 8, 0, 0, tzinfo=UTC).timestamp()) * NS

# nvidia-smi --query-gpu fields and the unit nvidia-smi prints with them
SMI_UNITS = {
    "timestamp": "",
    "index": "",
    "uuid": "",
    "name": "",
    "pci.bus_id": "",
    "utilization.gpu": "%",
    "utilization.memory": "%",
    "memory.total": "MiB",
    "memory.used": "MiB",
    "power.draw": "W",
    "temperature.gpu": "",
    "clocks.current.sm": "MHz",
    "clocks.current.memory": "MHz",
    "pstate": "",
}


def smi_time(ns: int, tz: str) -> str:
    """`YYYY/MM/DD HH:MM:SS.mmm` in host-local time, as nvidia-smi prints it."""
    when = datetime.fromtimestamp(ns / NS, ZoneInfo(tz))
    return when.strftime("%Y/%m/%d %H:%M:%S.") + f"{when.microsecond // 1000:03d}"


def smi_csv(
    samples: list[dict],
    fields: list[str],
    *,
    header: bool = True,
    units: bool = True,
    tz: str = "UTC",
    na: str = "[N/A]",
    header_line: str | None = None,
) -> str:
    """nvidia-smi --query-gpu=<fields> --format=csv[,noheader][,nounits] output."""
    lines = []
    if header:
        default = ", ".join(
            f"{f} [{SMI_UNITS[f]}]" if SMI_UNITS.get(f) else f for f in fields
        )  # nvidia-smi keeps the [unit] in the header even with nounits
        lines.append(header_line or default)
    for s in samples:
        cells = []
        for f in fields:
            v = s.get(f)
            if f == "timestamp":
                cells.append(smi_time(v, tz))  # type: ignore[arg-type]
            elif v is None:
                cells.append(na)
            elif units and SMI_UNITS.get(f):
                cells.append(f"{v} {SMI_UNITS[f]}")
            else:
                cells.append(str(v))
        lines.append(", ".join(cells))
    return "\n".join(lines) + "\n"


def dmon(
    names: list[str],
    units: list[str],
    rows: list[list],
    *,
    repeat_every: int | None = None,
) -> str:
    """nvidia-smi dmon text: right-aligned columns under two `#` header lines."""
    cells = [[("-" if v is None else str(v)) for v in row] for row in rows]
    widths = [
        max(6, len(n), len(u), *(len(r[i]) for r in cells)) + 2
        for i, (n, u) in enumerate(zip(names, units, strict=True))
    ]

    def line(values: list[str]) -> str:
        return "".join(v.rjust(w) for v, w in zip(values, widths, strict=True))

    def header() -> list[str]:
        return ["#" + line(names)[1:], "#" + line(units)[1:]]

    out = header()
    for i, row in enumerate(cells):
        if repeat_every and i and i % repeat_every == 0:
            out += header()
        out.append(line(row))
    return "\n".join(out) + "\n"


def labels(d: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in d.items()) + "}"


def exposition(series: list[tuple[str, dict[str, str], object]], *, help_type: bool) -> str:
    """One dcgm-exporter scrape: (metric, labels, value[, ms timestamp]) per line."""
    out = []
    seen = set()
    for item in series:
        name, labs, value = item[0], item[1], item[2]
        if help_type and name not in seen:
            out += [f"# HELP {name} {name} help.", f"# TYPE {name} gauge"]
            seen.add(name)
        stamp = f" {item[3]}" if len(item) > 3 else ""
        out.append(f"{name}{labels(labs)} {value}{stamp}")
    return "\n".join(out) + "\n"


def iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / NS, UTC).isoformat().replace("+00:00", "Z")


def prom_matrix(series: list[tuple[dict[str, str], list[tuple[float, str]]]]) -> str:
    """A /api/v1/query_range response."""
    result = [{"metric": m, "values": [[t, v] for t, v in vals]} for m, vals in series]
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}})


def prom_vector(series: list[tuple[dict[str, str], tuple[float, str]]]) -> str:
    """A /api/v1/query (instant) response."""
    result = [{"metric": m, "value": [t, v]} for m, (t, v) in series]
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})


def dcgmi(command: str, names: list[str], rows: list[tuple[str, list[str]]]) -> str:
    """dcgmi dmon output: the command, `#Entity …` / `ID` header, fixed-width rows."""
    out = [command, "#Entity   " + "".join(n.ljust(28) for n in names), "ID".ljust(100)]
    for entity, values in rows:
        out.append(entity.ljust(10) + "".join(v.ljust(28) for v in values))
    return "\n".join(out) + "\n"
