"""Ingest throughput of per-token timing encodings, as a ratio to the gen_ai.token event path on
the same requests (issue 15).

Writes the same requests (same token stamps, same attributes) five times as OTLP/JSON lines:

  events       one `gen_ai.token` event per token (traceq's convention; the reference)
  otel-array   `gen_ai.latency.per_token_generation_time` / `…scheduled_time` as OTel double[]
               (offsets from the span start, 9 decimals) and batch size as int[]
  json-text    the same arrays as JSON text strings
  compressed   the Alipay fork's shape: JSON (4 decimals) gzip + base64
  bytes        orjson bytes (first step absolute, later offsets from it) as bytesValue

sized so the otel-array file is at least --mb megabytes, then times `traceq.ingest()` of each in
its own process and prints MB, wall and CPU seconds (all threads: less sensitive to other work on
the machine), requests/s, and the ratios events-path time ÷ this encoding's time (higher is
better; target ≥ 1.0).

    python bench/otel_token_encodings.py --mb 200
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

T0 = 1_750_000_000_000_000_000
ENCODINGS = ("events", "otel-array", "json-text", "compressed", "bytes")
PER_LINE = 16


def _kv(key: str, value: dict) -> str:
    return json.dumps({"key": key, "value": value}, separators=(",", ":"))


def _arrays(encoding: str, t: int, gen: list[int], sched: list[int], batch: list[int]) -> list[str]:
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
    sched = [t + rng.randint(1, 19) * 10**6, *gen[:-1]]
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
    while files["otel-array"].tell() < target:
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


_RUN = """
import sys, time, resource, traceq
t = time.perf_counter()
(r,) = traceq.ingest([sys.argv[1]], sys.argv[2])
dt = time.perf_counter() - t
u = resource.getrusage(resource.RUSAGE_SELF)
print(dt, u.ru_utime + u.ru_stime, r.rows.get("tokens", 0), r.rows.get("requests", 0),
      r.quarantined, u.ru_maxrss // 1024)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=200, help="size of the otel-array file (MB)")
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--reuse", action="store_true", help="ingest the files already in --dir")
    ap.add_argument("--only", nargs="*", default=ENCODINGS, help="encodings to ingest")
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
    results = {}
    for enc, path in paths.items():
        if enc != "events" and enc not in args.only:
            continue
        shutil.rmtree(root / f"ds-{enc}", ignore_errors=True)
        out = subprocess.run(
            [sys.executable, "-c", _RUN, str(path), str(root / f"ds-{enc}")],
            check=True, capture_output=True, text=True,
        ).stdout.strip().splitlines()[-1].split()  # fmt: skip
        secs, cpu = float(out[0]), float(out[1])
        tokens, requests, quarantined, rss = map(int, out[2:])
        results[enc] = (secs, cpu)
        mb = path.stat().st_size / 1e6
        print(
            f"{enc:11} {mb:7.1f} MB {secs:6.1f} s wall {cpu:6.1f} s CPU {n / secs:7,.0f} req/s "
            f"tokens {tokens:,} requests {requests:,} quarantined {quarantined} "
            f"peak RSS {rss:,} MiB ratio wall {results['events'][0] / secs:.2f} "
            f"CPU {results['events'][1] / cpu:.2f}"
        )


if __name__ == "__main__":
    main()
