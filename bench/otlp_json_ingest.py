"""OTLP/JSON ingest throughput and peak memory, side by side with DuckDB and polars.

Generates an OTLP/JSON-lines file (Collector file-exporter shape, vLLM-style llm_request
spans with gen_ai.token events and a tokenize child span) of --mb megabytes, then runs, each
in its own process so peak RSS is its own:

  traceq   traceq.ingest() of the file into a fresh dataset (everything: parse, flatten,
           request derivation, Parquet)
  duckdb   COPY (SELECT * FROM read_json(file)) TO parquet   (reference a)
  polars   pl.read_ndjson(file)                               (reference b, raw read only)
  polars+schema  pl.read_ndjson(file, schema=<traceq's OTLP schema>): the raw read traceq
           itself starts from, so the ratio shows what flattening + Parquet cost on top

and prints MB/s, ratios (traceq / reference; higher is better for traceq) and peak RSS.
Run twice with different --mb to see that traceq's peak RSS does not grow with file size.

    python bench/otlp_json_ingest.py --mb 200
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
from pathlib import Path

from harness import run_python

T0 = 1_750_000_000_000_000_000


def _kv(key: str, kind: str, value: object) -> str:
    return json.dumps({"key": key, "value": {kind: value}}, separators=(",", ":"))


def _request(rng: random.Random, trace: int, t: int) -> list[str]:
    trace_id = f"{trace:032x}"
    span_id, child_id = f"{2 * trace + 1:016x}", f"{2 * trace + 2:016x}"
    n_tokens = rng.randint(20, 400)
    queue, prefill = rng.randint(1, 50) * 10**6, rng.randint(5, 200) * 10**6
    tokenized = t + rng.randint(1, 5) * 10**6
    first = tokenized + queue + prefill
    stamps = [first]
    for _ in range(n_tokens - 1):
        stamps.append(stamps[-1] + rng.randint(15, 60) * 10**6)
    events = ",".join(
        '{"timeUnixNano":"%d","name":"gen_ai.token","attributes":[%s]}'
        % (s, _kv("gen_ai.token.count", "intValue", "1"))
        for s in stamps
    )
    attrs = ",".join(
        [
            _kv("gen_ai.request.id", "stringValue", f"cmpl-{trace:08x}-0"),
            _kv("gen_ai.usage.prompt_tokens", "intValue", str(rng.randint(50, 4000))),
            _kv("gen_ai.usage.completion_tokens", "intValue", str(n_tokens)),
            _kv("gen_ai.latency.time_in_queue", "doubleValue", queue / 1e9),
            _kv("gen_ai.latency.time_in_model_prefill", "doubleValue", prefill / 1e9),
            _kv("gen_ai.latency.time_to_first_token", "doubleValue", (first - t) / 1e9),
            _kv("gen_ai.latency.e2e", "doubleValue", (stamps[-1] - t) / 1e9),
        ]
    )
    request = (
        '{"traceId":"%s","spanId":"%s","parentSpanId":"","name":"llm_request","kind":2,'
        '"startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":[%s],"events":[%s],'
        '"status":{}}' % (trace_id, span_id, t, stamps[-1], attrs, events)
    )
    child = (
        '{"traceId":"%s","spanId":"%s","parentSpanId":"%s","name":"tokenize","kind":1,'
        '"startTimeUnixNano":"%d","endTimeUnixNano":"%d","status":{}}'
        % (trace_id, child_id, span_id, t, tokenized)
    )
    return [request, child]


def generate(path: Path, megabytes: int, seed: int = 7) -> int:
    """Write ~`megabytes` MB of OTLP/JSON lines, 16 requests per line; returns requests."""
    rng = random.Random(seed)
    resource_attrs = _kv("service.name", "stringValue", "vllm-server")
    target = megabytes * 10**6
    written = trace = 0
    t = T0
    with open(path, "w") as fh:
        while written < target:
            spans = []
            for _ in range(16):
                trace += 1
                t += rng.randint(1, 100) * 10**6
                spans += _request(rng, trace, t)
            line = (
                '{"resourceSpans":[{"resource":{"attributes":[%s]},"scopeSpans":[{"scope":'
                '{"name":"vllm"},"spans":[%s]}]}]}\n' % (resource_attrs, ",".join(spans))
            )
            fh.write(line)
            written += len(line)
    return trace


RUNNERS = {
    "traceq": "import traceq,sys; traceq.ingest([sys.argv[1]], sys.argv[2])",
    "duckdb": (
        'import duckdb,sys; duckdb.sql("COPY (SELECT * FROM read_json(\'"+sys.argv[1]+"\', '
        "format='newline_delimited', maximum_object_size=1073741824)) TO '\"+sys.argv[2]+"
        '".parquet\'")'
    ),
    "polars": "import polars as pl,sys; pl.read_ndjson(sys.argv[1])",
    # polars given traceq's own OTLP schema: the raw read alone, at its fastest
    "polars+schema": (
        "import polars as pl,sys; from traceq.ingest.otel.otlp_json import DOCUMENT; "
        "pl.read_ndjson(sys.argv[1], schema=DOCUMENT)"
    ),
}


def run(name: str, src: Path, out: Path) -> tuple[float, float]:
    """(seconds, peak RSS MiB) of one runner in a fresh process (bench/harness.py)."""
    child = run_python(["-c", RUNNERS[name], str(src), str(out)])
    return child.seconds, child.peak_rss_mib


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, nargs="+", default=[50, 200],
                        help="file sizes to generate (MB); references run on each")  # fmt: skip
    parser.add_argument("--only", nargs="*", default=list(RUNNERS))
    parser.add_argument("--proto", action="store_true",
                        help="also ingest the same spans as an OTLP protobuf stream")  # fmt: skip
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}")
    for mb in args.mb:
        with tempfile.TemporaryDirectory(prefix="traceq-bench-") as tmp:
            src = Path(tmp) / "otlp.jsonl"
            requests = generate(src, mb)
            size = src.stat().st_size / 1e6
            print(f"\nfile: {size:.0f} MB, {requests:,} requests")
            results = {}
            for name in args.only:
                seconds, rss = run(name, src, Path(tmp) / f"out-{name}")
                results[name] = seconds
                print(
                    f"{name:8} {seconds:7.2f} s {size / seconds:7.1f} MB/s  peak RSS {rss:6.0f} MiB"
                )
            for ref in ("duckdb", "polars", "polars+schema"):
                if "traceq" in results and ref in results:
                    print(f"ratio traceq/{ref} throughput: {results[ref] / results['traceq']:.2f}")
            if args.proto:
                proto = Path(tmp) / "otlp.binpb"
                to_proto_stream(src, proto)
                seconds, rss = run("traceq", proto, Path(tmp) / "out-proto")
                print(
                    f"traceq on the same spans as a Collector proto stream "
                    f"({proto.stat().st_size / 1e6:.0f} MB): {seconds:.2f} s, "
                    f"{results.get('traceq', float('nan')) / seconds:.2f}x the JSON ingest's "
                    f"speed, peak RSS {rss:.0f} MiB"
                )


def to_proto_stream(src: Path, dst: Path) -> None:
    """The JSON lines as the Collector's `format: proto` file: length-prefixed messages."""
    import base64
    import struct

    import orjson
    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    with open(src, "rb") as lines, open(dst, "wb") as out:
        for line in lines:
            doc = orjson.loads(line)
            for rs in doc["resourceSpans"]:
                for span in rs["scopeSpans"][0]["spans"]:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
            data = ParseDict(doc, ExportTraceServiceRequest()).SerializeToString()
            out.write(struct.pack(">I", len(data)) + data)


if __name__ == "__main__":
    main()
