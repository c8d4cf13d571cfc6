"""Ingest throughput of per-token timing encodings, as a ratio to the gen_ai.token event path on
the same requests (docs/PERFORMANCE.md, "Per-token timing encodings").

Writes the same requests (same token stamps, same attributes) as OTLP/JSON lines, once per
encoding. Two references, each an event path:

  events        one `gen_ai.token` event per token (traceq's convention): token times only
  step-events   vLLM's `token_scheduled` / `token_generated` pair per step (PR 32573), with
                `iter_batch_size`: token times, scheduled times and batch sizes

and the per-token arrays, each with the same information as one reference:

  otel-array    `gen_ai.latency.per_token_generation_time` as an OTel double[] (offsets from
                the span start, 9 decimals): the same information as `events`
  json-text     the same array as JSON text
  compressed    the Alipay fork's shape: JSON (4 decimals) gzip + base64
  bytes         orjson bytes (first step absolute, later offsets from it) as bytesValue
  X+steps       the same four with `…per_token_scheduled_time` and `…per_token_batch_size`
                added (three arrays): the same information as `step-events`

sized so the otel-array+steps file is at least --mb megabytes; `--proto` also writes each file
as a Collector protobuf stream (length-prefixed ExportTraceServiceRequest messages, built field
by field with the opentelemetry-proto classes, arrays as wire bytes by numpy: byte-identical
to protobuf's ParseDict and about 10x faster) and ingests that. Each file is ingested by
`traceq.ingest()` in its own process (bench/harness.py); printed: MB, wall and CPU seconds
(all threads: less sensitive to other work on the machine), requests/s, peak RSS (VmHWM), and
the ratio reference time ÷ this encoding's time (higher is better; target ≥ 1.0), against
`events` for the plain arrays and `step-events` for the +steps ones.

    python bench/otel_token_encodings.py --mb 200 [--proto]
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import random
import shutil
import struct
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from harness import run_python

T0 = 1_750_000_000_000_000_000
ARRAYS = ("otel-array", "json-text", "compressed", "bytes")
ENCODINGS = (
    "events",
    *ARRAYS,
    "step-events",
    *(f"{a}+steps" for a in ARRAYS),
)
PER_LINE = 16


def _kv(key: str, value: dict) -> str:
    return json.dumps({"key": key, "value": value}, separators=(",", ":"))


def _arrays(encoding: str, t: int, gen: list[int], sched: list[int], batch: list[int]) -> list[str]:
    steps = encoding.endswith("+steps")
    encoding = encoding.removesuffix("+steps")
    out = _arrays_all(encoding, t, gen, sched, batch)
    return out if steps else out[:1]


def _arrays_all(
    encoding: str, t: int, gen: list[int], sched: list[int], batch: list[int]
) -> list[str]:
    def off(xs: list[int], dp: int) -> list[float]:
        return [round((x - t) / 1e9, dp) for x in xs]

    keys = (
        "gen_ai.latency.per_token_generation_time",
        "gen_ai.latency.per_token_scheduled_time",
    )
    if encoding == "otel-array":
        vals = [{"values": [{"doubleValue": v} for v in off(xs, 9)]} for xs in (gen, sched)]
        out = [_kv(k, {"arrayValue": v}) for k, v in zip(keys, vals, strict=True)]
        ints = {"values": [{"intValue": str(b)} for b in batch]}
        return [*out, _kv("gen_ai.iteration.per_token_batch_size", {"arrayValue": ints})]
    if encoding == "json-text":
        out = [
            _kv(k, {"stringValue": json.dumps(off(xs, 9))})
            for k, xs in zip(keys, (gen, sched), strict=True)
        ]
        return [
            *out,
            _kv("gen_ai.iteration.per_token_batch_size", {"stringValue": json.dumps(batch)}),
        ]
    if encoding == "compressed":

        def pack(v: list) -> str:
            return base64.b64encode(gzip.compress(json.dumps(v).encode(), mtime=0)).decode()

        out = [
            _kv(k, {"stringValue": pack(off(xs, 4))})
            for k, xs in zip(keys, (gen, sched), strict=True)
        ]
        return [*out, _kv("gen_ai.iteration.per_token_batch_size", {"stringValue": pack(batch)})]
    base = sched[0]

    def rel(xs: list[int]) -> list[float]:
        return [x / 1e9 if s == base else (x - base) / 1e9 for x, s in zip(xs, sched, strict=True)]

    def b64(v: list) -> str:
        return base64.b64encode(orjson.dumps(v)).decode()

    out = [
        _kv(keys[0], {"bytesValue": b64(rel(gen))}),
        _kv(keys[1], {"bytesValue": b64(rel(sched))}),
    ]
    return [*out, _kv("gen_ai.iteration.per_token_batch_size", {"bytesValue": b64(batch)})]


def _request(rng: random.Random, trace: int, t: int) -> dict[str, str]:
    trace_id, span_id = f"{trace:032x}", f"{2 * trace + 1:016x}"
    n = rng.randint(20, 400)
    first = t + rng.randint(20, 250) * 10**6
    gen = [first]
    for _ in range(n - 1):
        gen.append(gen[-1] + rng.randint(15_000, 60_000) * 1000 + rng.randint(0, 999))
    # each step scheduled 0.2 ms after the previous token (vLLM's stamps never coincide)
    sched = [t + rng.randint(1, 19) * 10**6, *(g + 200_000 for g in gen[:-1])]
    batch = [rng.randint(1, 64) for _ in range(n)]
    common = [
        _kv("gen_ai.request.id", {"stringValue": f"cmpl-{trace:08x}-0"}),
        _kv("gen_ai.usage.prompt_tokens", {"intValue": str(rng.randint(50, 4000))}),
        _kv("gen_ai.usage.completion_tokens", {"intValue": str(n)}),
    ]
    head = (
        '{"traceId":"%s","spanId":"%s","parentSpanId":"","name":"llm_request","kind":2,'
        '"startTimeUnixNano":"%d","endTimeUnixNano":"%d",' % (trace_id, span_id, t, gen[-1])
    )
    out = {}
    for enc in ENCODINGS:
        if enc == "events":
            events = ",".join(
                '{"timeUnixNano":"%d","name":"gen_ai.token","attributes":[]}' % s for s in gen
            )
            attrs = common
        elif enc == "step-events":
            events = ",".join(
                '{"timeUnixNano":"%d","name":"token_scheduled","attributes":[{"key":'
                '"iter_batch_size","value":{"intValue":"%d"}}]},{"timeUnixNano":"%d","name":'
                '"token_generated","attributes":[{"key":"new_token_ids","value":{"arrayValue":'
                '{"values":[{"intValue":"%d"}]}}}]}' % (s, b, g, 1000 + i)
                for i, (s, g, b) in enumerate(zip(sched, gen, batch, strict=True))
            )
            attrs = common
        else:
            events = ""
            attrs = common + _arrays(enc, t, gen, sched, batch)
        out[enc] = head + '"attributes":[%s],"events":[%s],"status":{}}' % (",".join(attrs), events)
    return out


def generate(root: Path, megabytes: int, seed: int = 11) -> tuple[int, dict[str, Path]]:
    rng = random.Random(seed)
    paths = {e: root / f"{e}.jsonl" for e in ENCODINGS}
    files = {e: p.open("w") for e, p in paths.items()}
    pending: dict[str, list[str]] = {e: [] for e in ENCODINGS}
    n, t, target = 0, T0, megabytes * 1_000_000
    while files["otel-array+steps"].tell() < target:
        for enc, span in _request(rng, n, t).items():
            pending[enc].append(span)
        n += 1
        t += rng.randint(1, 40) * 10**6
        if n % PER_LINE == 0:
            for enc, spans in pending.items():
                files[enc].write(
                    '{"resourceSpans":[{"resource":{"attributes":[]},"scopeSpans":[{"spans":[%s]}]}]}\n'
                    % ",".join(spans)
                )
                spans.clear()
    for enc, spans in pending.items():
        if spans:
            files[enc].write(
                '{"resourceSpans":[{"resource":{"attributes":[]},"scopeSpans":[{"spans":[%s]}]}]}\n'
                % ",".join(spans)
            )
        files[enc].close()
    return n, paths


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative ints: two's complement, as protobuf writes them
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _array_wire(values: list[dict]) -> bytes | None:
    """An ArrayValue of all-double or all-int elements as protobuf wire bytes, or None.

    Each element is the tag of `values` (0x0A), its length, then `double_value` (tag 0x21, 8
    bytes little-endian) or `int_value` (tag 0x18, varint): numpy writes thousands at once.
    """
    if values and all("doubleValue" in v for v in values):
        nums = np.array([v["doubleValue"] for v in values])
        if nums.dtype != np.float64:  # "NaN" / "Infinity" strings: the general path
            return None
        cells = np.empty((len(nums), 11), dtype=np.uint8)
        cells[:, :3] = (0x0A, 9, 0x21)
        cells[:, 3:] = nums.astype("<f8").view(np.uint8).reshape(-1, 8)
        return cells.tobytes()
    if values and all("intValue" in v for v in values):
        ints = [int(v["intValue"]) for v in values]
        if all(0 <= i < 0x80 for i in ints):
            cells = np.empty((len(ints), 4), dtype=np.uint8)
            cells[:, :3] = (0x0A, 2, 0x18)
            cells[:, 3] = ints
            return cells.tobytes()
        return b"".join(b"\x0a" + bytes([1 + len(v)]) + b"\x18" + v for v in map(_varint, ints))
    return None


def _set_value(target: Any, value: dict) -> None:
    """One OTLP/JSON AnyValue into the protobuf AnyValue `target`."""
    ((kind, v),) = value.items()
    if kind == "stringValue":
        target.string_value = v
    elif kind == "intValue":
        target.int_value = int(v)
    elif kind == "doubleValue":
        target.double_value = float(v)
    elif kind == "boolValue":
        target.bool_value = v
    elif kind == "bytesValue":
        target.bytes_value = base64.b64decode(v)
    elif kind == "arrayValue":
        elements = v.get("values", [])
        wire = _array_wire(elements)
        if wire is not None:
            target.array_value.MergeFromString(wire)
        else:
            for element in elements:
                _set_value(target.array_value.values.add(), element)


def _set_attributes(target: Any, attributes: list[dict]) -> None:
    for a in attributes:
        kv = target.add()
        kv.key = a["key"]
        _set_value(kv.value, a["value"])


def to_proto_stream(src: Path, dst: Path) -> None:
    """The JSON lines as the Collector's `format: proto` file (length-prefixed
    ExportTraceServiceRequest messages), built field by field with the opentelemetry-proto
    classes (protobuf's ParseDict took hours for the 200 MB set)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    with open(src, "rb") as lines, open(dst, "wb") as out:
        for line in lines:
            message = ExportTraceServiceRequest()
            for rs in orjson.loads(line)["resourceSpans"]:
                resource_spans = message.resource_spans.add()
                resource_spans.resource.SetInParent()
                _set_attributes(resource_spans.resource.attributes, rs["resource"]["attributes"])
                for ss in rs["scopeSpans"]:
                    scope = resource_spans.scope_spans.add()
                    for span in ss["spans"]:
                        s = scope.spans.add()
                        s.trace_id = bytes.fromhex(span["traceId"])
                        s.span_id = bytes.fromhex(span["spanId"])
                        s.parent_span_id = bytes.fromhex(span["parentSpanId"])
                        s.name = span["name"]
                        s.kind = span["kind"]
                        s.start_time_unix_nano = int(span["startTimeUnixNano"])
                        s.end_time_unix_nano = int(span["endTimeUnixNano"])
                        _set_attributes(s.attributes, span["attributes"])
                        for e in span["events"]:
                            event = s.events.add()
                            event.time_unix_nano = int(e["timeUnixNano"])
                            event.name = e["name"]
                            _set_attributes(event.attributes, e["attributes"])
                        if "status" in span:
                            s.status.SetInParent()
                            s.status.code = span["status"].get("code", 0)
                            s.status.message = span["status"].get("message", "")
            data = message.SerializeToString()
            out.write(struct.pack(">I", len(data)) + data)


_RUN = """
import sys, time, resource, traceq
t = time.perf_counter()
(r,) = traceq.ingest([sys.argv[1]], sys.argv[2])
dt = time.perf_counter() - t
u = resource.getrusage(resource.RUSAGE_SELF)
print(dt, u.ru_utime + u.ru_stime, r.rows.get("tokens", 0), r.rows.get("requests", 0),
      r.quarantined)
"""


def _reference(enc: str) -> str:
    return "step-events" if enc.endswith("+steps") or enc == "step-events" else "events"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=200, help="size of the otel-array+steps file (MB)")
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--reuse", action="store_true", help="ingest the files already in --dir")
    ap.add_argument("--only", nargs="*", default=ENCODINGS, help="encodings to ingest")
    ap.add_argument("--proto", action="store_true", help="ingest protobuf streams instead")
    args = ap.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="traceq-token-enc-"))
    root.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    if args.reuse:
        paths = {e: root / f"{e}.jsonl" for e in ENCODINGS}
        n = sum(line.count('"llm_request"') for line in paths["compressed"].open())
    else:
        n, paths = generate(root, args.mb)
        print(f"{n:,} requests written in {time.perf_counter() - t:.0f} s to {root}")
    wanted = [e for e in ENCODINGS if e in args.only or e == "events"]
    results: dict[str, tuple[float, float]] = {}
    for enc in sorted(wanted, key=lambda e: e != _reference(e)):  # references first
        path = paths[enc]
        if args.proto:
            proto = path.with_suffix(".binpb")
            if not proto.exists():
                to_proto_stream(path, proto)
            path = proto
        shutil.rmtree(root / f"ds-{enc}", ignore_errors=True)
        child = run_python(["-c", _RUN, str(path), str(root / f"ds-{enc}")])
        out = child.last_line.split()
        secs, cpu = float(out[0]), float(out[1])
        tokens, requests, quarantined = map(int, out[2:])
        results[enc] = (secs, cpu)
        ev = results["events"]
        ref = results.get(_reference(enc), (float("nan"), float("nan")))
        mb = path.stat().st_size / 1e6
        print(
            f"{enc:20} {mb:7.1f} MB {secs:6.1f} s wall {cpu:6.1f} s CPU {n / secs:7,.0f} req/s "
            f"tokens {tokens:,} requests {requests:,} quarantined {quarantined} "
            f"peak RSS {child.peak_rss_mib:,.0f} MiB ratio to {_reference(enc)} "
            f"wall {ref[0] / secs:.2f} CPU {ref[1] / cpu:.2f}; to events CPU {ev[1] / cpu:.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
