"""Figures in words a person reads: human durations, counts with thousands separators, and
message templates that leave a clause out when a figure in it is missing.

A template is `str.format` text with three extra format specs and optional clauses:

- `{x:ms}` reads `x` as milliseconds, `{x:s}` as seconds, `{x:ns}` as nanoseconds, and prints
  a human duration (`duration_ms`): ms below 1 s, s below 2 min, then min, then h;
- `{x:n}` prints a count with thousands separators (an int with no spec does too), and
  `{x:n request}` the count with its noun, plural unless the count is 1 (`1 request`,
  `2 requests`);
- `[ ... ]` is a clause: it is left out, brackets and all, when any figure in it is missing
  (None). A missing figure outside any clause drops the comma-, semicolon- or
  parenthesis-delimited part of the sentence it stands in, so no "n/a" is ever printed.

>>> fmt("p99 TTFT {a:ms}[ inside vs {b:ms} outside]; {n} requests", {"a": 17346762, "n": 12345})
'p99 TTFT 4.8 h; 12,345 requests'
>>> fmt("{share:.0%} queued (median {q:ms}, outside {o:ms})", {"share": 0.57, "q": 429.2})
'57% queued (median 429 ms)'
>>> fmt("{a:n request} timed out, {b:n request} failed", {"a": 1, "b": 1200})
'1 request timed out, 1,200 requests failed'
>>> fmt("TPOT {a:ms}, gap {b:ms} (2× the floor)", {"a": 16})
'TPOT 16 ms (2× the floor)'
>>> fmt("{what}[; {n:n error}]", {"what": "max seq len (262144), (18.35 GiB)", "n": None})
'max seq len (262144), (18.35 GiB)'
"""

from __future__ import annotations

import re
import string
from typing import Any

MISSING = "\x00"
"""Stands for a missing figure while a message is built; never printed."""
_CLAUSE = re.compile(r"\[([^\[\]]*)\]")
_PART = re.compile(r"[^,;()]*" + MISSING + r"[^,;()]*")
_DROPPED = "\x01"  # where a part was dropped, while the sentence closes up


def duration_ms(ms: float) -> str:
    """A duration in the unit a person reads it in.

    >>> [duration_ms(x) for x in (0.015, 0.42, 17.4, 429.2, 1393, 26_617, 119_000, 754_000)]
    ['15 µs', '0.42 ms', '17 ms', '429 ms', '1.4 s', '27 s', '119 s', '13 min']
    >>> duration_ms(17_346_762)
    '4.8 h'
    """
    if ms != ms:  # NaN
        return MISSING
    sign, ms = ("-", -ms) if ms < 0 else ("", ms)
    if ms == 0:
        return "0 s"
    if ms < 0.1:  # a step's per-request or per-token cost
        text = f"{ms * 1e3:.2g} µs"
    elif ms < 1:
        text = f"{ms:.2f} ms"
    elif ms < 9.95:
        text = f"{ms:.1f} ms"
    elif ms < 999.5:
        text = f"{ms:.0f} ms"
    elif ms < 9_950:
        text = f"{ms / 1e3:.1f} s"
    elif ms < 119_500:
        text = f"{ms / 1e3:.0f} s"
    elif ms < 3_600_000:
        text = f"{ms / 60e3:.0f} min"
    else:
        text = f"{ms / 3.6e6:.1f} h"
    return sign + text


def count(n: float) -> str:
    """A count with thousands separators (`12,345`); a fractional count keeps one decimal.

    >>> count(1234567), count(2.5), count(3.0)
    ('1,234,567', '2.5', '3')
    """
    if isinstance(n, float) and not n.is_integer():
        return f"{n:,.1f}"
    return f"{int(n):,}"


def counted(n: float, noun: str) -> str:
    """A count with its noun, plural unless the count is 1 (the `{x:n noun}` spec).

    >>> counted(1, "GPU"), counted(2, "GPU"), counted(1200, "request")
    ('1 GPU', '2 GPUs', '1,200 requests')
    """
    return f"{count(n)} {noun}{'' if n == 1 else 's'}"


def number(v: Any) -> str:
    """A parameter's or setting's value with thousands separators (`60,000`); anything else
    as it is.

    >>> number(60000), number(0.95), number(2048.0), number("on")
    ('60,000', '0.95', '2,048', 'on')
    """
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    return f"{v:,g}" if abs(v) < 1e15 else str(v)


_UNITS = {"ms": 1.0, "s": 1e3, "ns": 1e-6}


class _Formatter(string.Formatter):
    def get_value(self, key: Any, args: Any, kwargs: Any) -> Any:
        return kwargs.get(key) if isinstance(key, str) else super().get_value(key, args, kwargs)

    def format_field(self, value: Any, spec: str) -> str:
        if value is None:
            return MISSING
        if spec in _UNITS:
            try:
                return duration_ms(float(value) * _UNITS[spec])
            except (TypeError, ValueError):
                return str(value)
        if spec.startswith("n ") and isinstance(value, int | float):
            return counted(value, spec[2:].strip())
        if spec == "n" or (spec == "" and isinstance(value, int) and not isinstance(value, bool)):
            try:
                return count(value)
            except (TypeError, ValueError):
                return str(value)
        try:
            return super().format_field(value, spec)
        except (ValueError, TypeError):
            return str(value)


def fmt(template: str, values: dict[str, Any]) -> str:
    """Fill `template` (see the module docstring) with `values`; missing figures leave their
    clause out."""
    text = " ".join(template.split())
    filled = _Formatter().format(text, **values)
    previous = None
    while previous != filled:  # innermost clauses first: `[a[ vs b]]`
        previous = filled
        filled = _CLAUSE.sub(lambda m: "" if MISSING in m.group(1) else m.group(1), filled)
    if MISSING in filled:
        # a part dropped between a comma and a parenthesis closes up as " (": only there,
        # not in a figure's own text (a quoted log line's "(262144), (18.35 GiB …")
        filled = _PART.sub(_DROPPED, filled)
        filled = re.sub(r"\s*[,;]\s*" + _DROPPED + r"\s*(?=\()", " ", filled)
        filled = filled.replace(_DROPPED, "")
    return _tidy(filled)


def _tidy(text: str) -> str:
    """Close the gaps a dropped part leaves: empty parentheses, doubled or dangling commas."""
    previous = None
    while previous != text:
        previous = text
        text = re.sub(r"\(\s*[,;]?\s*\)", "", text)
        text = re.sub(r"\(\s*[,;]\s*", "(", text)
        text = re.sub(r"\s*[,;]\s*\)", ")", text)
        text = re.sub(r"\s*([,;])\s*[,;]", r"\1", text)
        text = re.sub(r"^\s*[,;]\s*|\s*[,;]\s*$", "", text)
        text = re.sub(r"\s+([,;.)])", r"\1", text)
        text = re.sub(r"\s{2,}", " ", text)
    return text.strip()
