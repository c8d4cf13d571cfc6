"""Clock checks of one ingest: the year of yearless logs, and the warnings a user must see.

A vLLM log prints `MM-DD HH:MM:SS`: no year. Rather than guess it from the file's mtime (a
fresh clone puts a 2025 log in the clone's year), the year is taken from the other sources of
the dataset when exactly one year puts the log's stamps beside their time ranges
(`infer_year`). Only when none can be matched does the mtime year stand, with a warning.

After each source is read, `source_warnings` says when its stamps lie after the file's mtime
(a wrong year, zone or anchor), and `overlap_warnings` when it shares no time with the other
sources of the dataset (their joins would find nothing).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any
from zoneinfo import ZoneInfo

NS = 1_000_000_000
DAY_NS = 86_400 * NS
# A log may begin well before the traces (a server up for days before the load test); a
# wrong year is 365 days off. Stamps within this distance of another source's time range
# match it: a week tells the years apart with room to spare.
YEAR_MATCH_SLACK_NS = 7 * DAY_NS
# Sources of one dataset that are further apart than this share no time (1 min: the
# sampling interval of the coarsest telemetry, so adjacent scrapes still count as overlap).
OVERLAP_SLACK_NS = 60 * NS
# Stamps later than the file's mtime by more than this cannot be right (5 min: clock skew
# between the writer and the file system, buffered writes).
MTIME_SLACK_NS = 300 * NS
# Valid years of `--year` and of `--start` / `--t0` instants.
YEAR_MIN, YEAR_MAX = 1971, 2100

# Clock domains whose stamps are absolute without a guess (see each family's manifest entry).
_TRUSTED_DOMAINS = ("unix_ns", "host_local_time", "log_local_time")
# Clock domains of load-test exports whose stamps count from the tool's own zero.
# (llmperf's `request_relative`, no start times at all, says so in its assumptions.)
RELATIVE_DOMAINS = ("steady_clock_ns", "perf_counter_relative")
_GUESSED = ("file mtime", "mtime")


def check_year(year: int | None) -> str | None:
    """An error message for a `--year` outside YEAR_MIN–YEAR_MAX, else None."""
    if year is None or YEAR_MIN <= year <= YEAR_MAX:
        return None
    return f"--year {year}: expected a four-digit year {YEAR_MIN}–{YEAR_MAX}"


def check_instant(name: str, ns: int | None) -> str | None:
    """An error message for an instant (ns since the epoch) outside YEAR_MIN–YEAR_MAX."""
    if ns is None:
        return None
    lo = _epoch_ns(YEAR_MIN)
    hi = _epoch_ns(YEAR_MAX + 1)
    if lo <= ns < hi:
        return None
    hint = ""
    for unit, scale in (("seconds", NS), ("milliseconds", 1_000_000), ("microseconds", 1_000)):
        if lo <= ns * scale < hi:
            hint = f"; it reads as {iso(ns * scale)} in {unit}: give nanoseconds"
            break
    return f"{name} {ns}: not an instant in {YEAR_MIN}–{YEAR_MAX} as ns since the epoch{hint}"


def _epoch_ns(year: int) -> int:
    return int(dt.datetime(year, 1, 1, tzinfo=dt.UTC).timestamp()) * NS


def iso(ns: int) -> str:
    """`ns` since the epoch as `YYYY-MM-DDTHH:MM:SSZ`."""
    return dt.datetime.fromtimestamp(ns // NS, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def reference_ranges(sources: Iterable[dict[str, Any]]) -> list[tuple[int, int]]:
    """Time ranges of manifest sources whose clock is absolute and was not guessed."""
    out = []
    for s in sources:
        tr = s.get("time_range")
        domain = str(s.get("clock_domain") or "")
        if not tr or s.get("status") == "failed" or not domain.startswith(_TRUSTED_DOMAINS):
            continue
        if any(g in str(v) for v in (s.get("assumptions") or {}).values() for g in _GUESSED):
            continue
        out.append((int(tr["start_ns"]), int(tr["end_ns"])))
    return out


def infer_year(
    first: str, last: str | None, tz: str, references: Sequence[tuple[int, int]]
) -> tuple[int, str] | None:
    """(year of `first`, why) when exactly one year puts the log's `MM-DD HH:MM:SS` stamps
    `first` … `last` within YEAR_MATCH_SLACK_NS of the reference time ranges; else None."""
    if not references:
        return None
    years: set[int] = set()
    for lo, hi in references:
        for ns in (lo, hi):
            y = dt.datetime.fromtimestamp(ns // NS, dt.UTC).year
            years |= {y - 1, y, y + 1}
    matches = []
    for year in sorted(years):
        span = _span(year, first, last, tz)
        if span is None:
            continue
        gap = min(_gap(span, ref) for ref in references)
        if gap <= YEAR_MATCH_SLACK_NS:
            matches.append(year)
    if len(matches) != 1:
        return None
    n = len(references)
    return matches[0], f"matched to the time range of {n} other source{'s' * (n != 1)}"


def _span(year: int, first: str, last: str | None, tz: str) -> tuple[int, int] | None:
    """ns range of the stamps `first` … `last` (`MM-DD HH:MM:SS`) with `first` in `year`."""
    start = _local_ns(year, first, tz)
    if start is None:
        return None
    if last is None:
        return start, start
    end = _local_ns(year, last, tz)
    if end is None or end < start:  # the log wrapped into the next year
        end = _local_ns(year + 1, last, tz)
    return (start, end) if end is not None else (start, start)


def _local_ns(year: int, stamp: str, tz: str) -> int | None:
    try:
        when = dt.datetime.strptime(f"{year}-{stamp}", "%Y-%m-%d %H:%M:%S")
    except ValueError:  # 02-29 in a year without one, or a garbled stamp
        return None
    return int(when.replace(tzinfo=ZoneInfo(tz)).timestamp()) * NS


def _gap(a: tuple[int, int], b: tuple[int, int]) -> int:
    """Distance between two ranges (0 when they overlap)."""
    return max(0, max(a[0], b[0]) - min(a[1], b[1]))


def source_warnings(entry: dict[str, Any], mtime_ns: int) -> list[str]:
    """Warnings about one source's clock: stamps after its mtime, a time taken from mtime."""
    out = []
    tr = entry.get("time_range")
    if tr and int(tr["end_ns"]) > mtime_ns + MTIME_SLACK_NS:
        out.append(
            f"its last stamp ({tr['end']}) lies after the file's mtime ({iso(mtime_ns)}): "
            "a wrong --year, --tz or --t0?"
        )
    if entry.get("clock_domain") in RELATIVE_DOMAINS:
        out.append(
            f"its stamps count from the tool's own zero ({entry['clock_domain']}): they do not "
            "line up with other sources; pass --t0 (ns since the epoch of its first request)"
        )
    assumptions = entry.get("assumptions") or {}
    if assumptions.get("start_from", "").startswith("file mtime"):
        out.append(
            "no clock in the file: the last sample was placed at the file's mtime "
            f"({iso(int(assumptions['end_ns']))}); pass --start if that is wrong"
        )
    return out


def overlap_warnings(
    entries: Sequence[dict[str, Any]], sources: Sequence[dict[str, Any]]
) -> dict[str, str]:
    """source_id → warning, for each of `entries` whose time range is further than
    OVERLAP_SLACK_NS from every other timed source of the dataset (`sources`)."""

    def timed(s: dict[str, Any]) -> bool:  # relative clocks have their own warning
        relative = s.get("clock_domain") in RELATIVE_DOMAINS
        return bool(s.get("time_range")) and s.get("status") != "failed" and not relative

    out: dict[str, str] = {}
    for e in entries:
        if not timed(e):
            continue
        own = (int(e["time_range"]["start_ns"]), int(e["time_range"]["end_ns"]))
        others = [s for s in sources if timed(s) and s["source_id"] != e["source_id"]]
        if not others:
            continue
        gaps = [(_gap(own, _range(s)), s) for s in others]
        gap, nearest = min(gaps, key=lambda g: g[0])
        if gap > OVERLAP_SLACK_NS:
            out[e["source_id"]] = (
                f"shares no time with the other sources ({_human(gap)} from the nearest, "
                f"{source_name(nearest)}): joins across them will find nothing"
            )
    return out


def _range(s: dict[str, Any]) -> tuple[int, int]:
    return int(s["time_range"]["start_ns"]), int(s["time_range"]["end_ns"])


def source_name(s: dict[str, Any]) -> str:
    """The file name of a manifest entry, for messages."""
    return str(s.get("path", s["source_id"])).rsplit("/", 1)[-1]


def _human(ns: int) -> str:
    s = ns / NS
    for unit, size in (("days", 86_400), ("h", 3_600), ("min", 60)):
        if s >= size:
            return f"{s / size:.1f} {unit}"
    return f"{s:.0f} s"


def clock_lines(rows: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(summary lines, warnings) for the clock_offsets rows of one source."""
    lines: list[str] = []
    warnings: list[str] = []
    for r in rows:
        if r["reference"]:
            lines.append(f"{r['instance']}: reference clock")
            continue
        if r["bound_ms"] is None:
            lines.append(f"{r['instance']}: offset unknown (no causal link to the reference)")
            warnings.append(
                f"clock of {r['instance']} is not bounded by any span of the reference "
                "instance: its stamps are not corrected"
            )
            continue
        lines.append(f"{r['instance']}: offset {r['offset_ms']:+.3f} ms ± {r['bound_ms']:.3f} ms")
        if r["lo_ms"] is not None and r["hi_ms"] is not None and r["lo_ms"] > r["hi_ms"]:
            warnings.append(
                f"clock of {r['instance']}: the spans contradict each other (lowest offset "
                f"{r['lo_ms']:+.3f} ms above the highest {r['hi_ms']:+.3f} ms)"
            )
        corrects = r.get("corrects_ms")
        if corrects is not None and r["bound_ms"] > corrects:
            warnings.append(
                f"clock of {r['instance']}: bound ±{r['bound_ms']:.3f} ms is wider than the "
                f"phases it corrects (median {corrects:.3f} ms)"
            )
    return lines, warnings
