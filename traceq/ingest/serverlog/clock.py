"""Log timestamps → ns since the Unix epoch (UTC).

vLLM prints `MM-DD HH:MM:SS` in the container's local time: no year, no zone. The year is
`--year`, else the year that puts the stamps beside the UTC stamps a container runtime put in
front of the same lines (`docker logs -t`, `kubectl logs --timestamps`, a node's CRI files,
Docker's json-file `time`), else beside the dataset's other sources
(`traceq/ingest/clocks.py`), else the latest year that puts the first real date no more than a
day after the file's mtime (the log began the year before, or a zone ahead of UTC wrote the
new year first), with a warning; it rolls over at each Dec → Jan wrap; the zone is `--tz`
(default UTC). SGLang prints the full date, in local time too.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

import polars as pl

from traceq.ingest.serverlog import patterns as p
from traceq.ingest.source import HEAD_BYTES, Source

# A month that falls by more than this from one stamp to the next is a year wrap (Dec → Jan);
# smaller steps back are out-of-order lines from parallel processes.
WRAP_MONTH_DROP = 6
# A local stamp may run this far ahead of the file's UTC mtime and still be from its year:
# zones reach UTC+14.
MTIME_SLACK = dt.timedelta(days=1)


@dataclass
class Clock:
    """Year / zone assumptions and the state carried from one block to the next."""

    tz: str
    year: int | None  # year of the first stamp, once known
    mtime: float | None = None  # file mtime, for the default year
    last_month: int | None = None
    wraps: int = 0
    year_from: str = "--year"

    def assumptions(self) -> dict[str, object]:
        if self.year is None:  # no yearless stamp read (an SGLang log prints full dates)
            return {"tz": self.tz}
        return {
            "year": self.year,
            "year_from": self.year_from,
            "tz": self.tz,
            "year_wraps": self.wraps,
        }

    def _first_year(self, stamps: pl.Series) -> int:
        """The year of the first real date among `stamps` (`MM-DD…`): the latest year that
        does not put it after the file was last written (the year before the mtime's when
        the log began then; the year after when a zone ahead of UTC already wrote it)."""
        if self.year is None:
            when = dt.datetime.fromtimestamp(self.mtime or 0, dt.UTC)
            self.year, self.year_from = when.year, "file mtime"
            first = _month_day(stamps.head(1000).to_list())
            latest = when.date() + MTIME_SLACK
            month, day = first or (0, 0)
            for year in range(when.year + 1, when.year - 8, -1) if first else ():
                try:
                    if dt.date(year, month, day) <= latest:
                        self.year = year
                        break
                except ValueError:  # 29 February outside a leap year
                    continue
        return self.year

    def vllm_ts(self, stamp: pl.Series) -> pl.Series:
        """ns stamps of `MM-DD HH:MM:SS` rows (in file order); null where invalid."""
        month = stamp.str.head(2).cast(pl.Int64, strict=False)
        valid = month.drop_nulls()
        if valid.is_empty():
            return pl.Series("ts", [None] * len(stamp), dtype=pl.Int64)
        base = self._first_year(stamp.filter(month.is_not_null()))
        prev = month.forward_fill().shift(1, fill_value=self.last_month)
        wrapped = (prev - month > WRAP_MONTH_DROP).fill_null(False)
        n_wraps = int(wrapped.sum())
        year = base + self.wraps
        self.wraps += n_wraps
        self.last_month = int(valid[-1])
        if n_wraps == 0:  # one year for the whole block (the rule): no per-row text to build
            return self._to_ns(stamp, prefix=f"{year}-")
        text = pl.concat_str((year + wrapped.cum_sum()).cast(pl.String), pl.lit("-"), stamp)
        return self._to_ns(pl.select(text).to_series())

    def iso_ts(self, text: pl.Series) -> pl.Series:
        """ns stamps of `YYYY-MM-DD HH:MM:SS[.f]` or ISO `T` local times; null where invalid."""
        return self._to_ns(text.str.replace("T", " ", literal=True))

    def _to_ns(self, text: pl.Series, prefix: str = "") -> pl.Series:
        """ns stamps of `prefix` + `text` rows (local times); null where invalid."""
        # Stamps repeat (one-second resolution): each distinct one is parsed once.
        distinct = text.drop_nulls().unique()
        full = pl.select(pl.lit(prefix) + pl.lit(distinct)).to_series() if prefix else distinct
        parsed = full.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", time_unit="ns", strict=False)
        local = parsed.dt.replace_time_zone(self.tz, ambiguous="earliest", non_existent="null")
        ns = local.dt.epoch("ns")
        return text.replace_strict(distinct, ns, default=None, return_dtype=pl.Int64).alias("ts")


_STAMP = re.compile(rb"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d{2}-\d{2} \d{2}:\d{2}:\d{2})")
_ANSI = re.compile(rb"\x1b\[[0-9;]*[A-Za-z]")


def head_and_tail(source: Source) -> tuple[bytes, bytes]:
    """The log's first and (uncompressed files) last `HEAD_BYTES`, colour codes removed: its
    time span without reading it all. The tail is the head for a short or compressed file."""
    head = _ANSI.sub(b"", source.head)
    if source.compression is None and source.size > HEAD_BYTES:
        with open(source.path, "rb") as fh:
            fh.seek(source.size - HEAD_BYTES)
            return head, _ANSI.sub(b"", fh.read())
    return head, head


def stamp_range(head: bytes, tail: bytes) -> tuple[str, str | None] | None:
    """The first and last `MM-DD HH:MM:SS` stamps of a vLLM log (`head_and_tail`)."""
    first = _STAMP.search(head)
    if first is None:
        return None
    stamps = _STAMP.findall(tail)
    return first.group(1).decode(), stamps[-1].decode() if stamps else None


# A container runtime's UTC stamp in front of a line (patterns.LINE_PREFIX), or the `time` of
# a Docker json-file line: to the second, in UTC (`Z`).
_COLLECTOR_STAMP = re.compile(
    rf"(?m)(?:^{p.RUNTIME_NAME}?|\"time\": ?\")(\d{{4}}-\d{{2}}-\d{{2}}T\d{{2}}:\d{{2}}:\d{{2}})"
    r"(?:\.\d+)?Z".encode()
)


def collector_range(head: bytes, tail: bytes) -> tuple[int, int] | None:
    """ns of the first and last UTC stamps a container runtime wrote in front of the log's
    lines (`head_and_tail`); None without any."""
    found = _COLLECTOR_STAMP.findall(head)
    if not found:
        return None
    last = _COLLECTOR_STAMP.findall(tail) or found

    def ns(stamp: bytes) -> int:
        when = dt.datetime.fromisoformat(stamp.decode()).replace(tzinfo=dt.UTC)
        return int(when.timestamp()) * 10**9

    return ns(found[0]), ns(last[-1])


def _month_day(stamps: list[str | None]) -> tuple[int, int] | None:
    """(month, day) of the first of `stamps` (`MM-DD…`) that is a date in some year."""
    for text in stamps:
        try:
            month, day = int(text[:2]), int(text[3:5])  # type: ignore[index]
            dt.date(2000, month, day)  # a leap year: 29 February is a date
        except (TypeError, ValueError):
            continue
        return month, day
    return None
