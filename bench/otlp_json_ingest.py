"""OTLP/JSON ingest throughput and peak memory, side by side with DuckDB, polars, pyarrow.json
and orjson reading the same bytes.

Generates an OTLP/JSON-lines file (Collector file-exporter shape, vLLM-style llm_request
spans with gen_ai.token events and a tokenize child span) of --mb megabytes, then runs, each
in its own process so peak RSS is its own, --runs times in a rotating order:

  traceq          traceq.ingest() of the file into a fresh dataset (everything: parse,
                  flatten, request derivation, Parquet)
  traceq-polars   the same with polars' reader for every block (otlp_json.ARROW_READER off):
                  what the Arrow reader (traceq/ingest/otel/otlp_arrow.py) saves
  duckdb          COPY (SELECT * FROM read_json(file)) TO parquet
  pyarrow         pyarrow.json with traceq's OTLP schema, then spans, attributes and events
                  flattened and event times cast to int64: a bare parse + flatten (timed in
                  the child, imports excluded)
  orjson          orjson.loads of each line, nothing else
  polars          pl.read_ndjson(file) (raw read only)
  polars+schema   pl.read_ndjson(file, schema=<traceq's polars OTLP schema>)

and prints min / median / max seconds, MB/s at the median, peak RSS (the largest of the runs)
and ratios of medians. Run twice with different --mb to see that traceq's peak RSS does not
grow with file size.

    python bench/otlp_json_ingest.py --mb 176 --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
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
    "traceq-polars": (
        "import traceq,sys; from traceq.ingest.otel import otlp_json; "
        "otlp_json.ARROW_READER = False; traceq.ingest([sys.argv[1]], sys.argv[2])"
    ),
    "duckdb": (
        'import duckdb,sys; duckdb.sql("COPY (SELECT * FROM read_json(\'"+sys.argv[1]+"\', '
        "format='newline_delimited', maximum_object_size=1073741824)) TO '\"+sys.argv[2]+"
        '".parquet\'")'
    ),
    "pyarrow": "import sys, otlp_json_ingest as b; print(b.pyarrow_parse_flatten(sys.argv[1]))",
    "orjson": "import sys, otlp_json_ingest as b; print(b.orjson_lines(sys.argv[1]))",
    "polars": "import polars as pl,sys; pl.read_ndjson(sys.argv[1])",
    # polars given traceq's own OTLP schema: polars' raw read alone, at its fastest
    "polars+schema": (
        "import polars as pl,sys; from traceq.ingest.otel.otlp_json import DOCUMENT; "
        "pl.read_ndjson(sys.argv[1], schema=DOCUMENT)"
    ),
}
# Runners that print their own seconds (imports left out: the reference is the work alone).
SELF_TIMED = {"pyarrow", "orjson"}


def pyarrow_parse_flatten(path: str) -> float:
    """Seconds for pyarrow.json to parse the file with the OTLP schema, then flatten spans,
    their attributes and events, and cast event times to int64 (2 threads here)."""
    import time

    import pyarrow.compute as pc
    import pyarrow.json as pj

    from traceq.ingest.otel.otlp_arrow import ARROW_DOCUMENT

    start = time.perf_counter()
    options = pj.ParseOptions(explicit_schema=ARROW_DOCUMENT, unexpected_field_behavior="ignore")
    table = pj.read_json(path, parse_options=options).combine_chunks()
    for batch in table.to_batches():
        documents = pc.coalesce(batch.column("resourceSpans"), batch.column("batches"))
        resources = pc.list_flatten(documents)
        scopes = pc.list_flatten(pc.struct_field(resources, "scopeSpans"))
        spans = pc.list_flatten(pc.struct_field(scopes, "spans"))
        pc.list_flatten(pc.struct_field(spans, "attributes"))
        events = pc.list_flatten(pc.struct_field(spans, "events"))
        pc.list_parent_indices(pc.struct_field(spans, "events"))
        pc.cast(pc.struct_field(events, "timeUnixNano"), "int64")
        pc.list_flatten(pc.struct_field(events, "attributes"))
    return time.perf_counter() - start


def orjson_lines(path: str) -> float:
    """Seconds for orjson.loads of each line, nothing else."""
    import time

    import orjson

    start = time.perf_counter()
    with open(path, "rb") as fh:
        for line in fh:
            orjson.loads(line)
    return time.perf_counter() - start


def run(name: str, src: Path, out: Path) -> tuple[float, float]:
    """(seconds, peak RSS MiB) of one runner in a fresh process (bench/harness.py)."""
    child = run_python(["-c", RUNNERS[name], str(src), str(out)])
    seconds = float(child.last_line) if name in SELF_TIMED else child.seconds
    return seconds, child.peak_rss_mib


def _stats(values: list[float]) -> tuple[float, float, float]:
    ordered = sorted(values)
    return ordered[0], statistics.median(ordered), ordered[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, nargs="+", default=[176],
                        help="file sizes to generate (MB); references run on each")  # fmt: skip
    parser.add_argument("--runs", type=int, default=3, help="runs of each runner")
    parser.add_argument("--only", nargs="*", default=list(RUNNERS))
    parser.add_argument("--proto", action="store_true",
                        help="also ingest the same spans as an OTLP protobuf stream")  # fmt: skip
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}, load: {os.getloadavg()[0]:.1f}")
    for mb in args.mb:
        with tempfile.TemporaryDirectory(prefix="traceq-bench-") as tmp:
            src = Path(tmp) / "otlp.jsonl"
            requests = generate(src, mb)
            size = src.stat().st_size / 1e6
            print(f"\nfile: {size:.0f} MB, {requests:,} requests, {args.runs} runs each")
            names = list(args.only)
            if args.proto:
                proto = Path(tmp) / "otlp.binpb"
                to_proto_stream(src, proto)
                names.append("traceq-proto")
            seconds: dict[str, list[float]] = {n: [] for n in names}
            peak: dict[str, float] = dict.fromkeys(names, 0.0)
            for i in range(args.runs):
                for name in names[i % len(names) :] + names[: i % len(names)]:  # rotate
                    out = Path(tmp) / f"out-{name}-{i}"
                    if name == "traceq-proto":
                        took, rss = run("traceq", proto, out)
                    else:
                        took, rss = run(name, src, out)
                    seconds[name].append(took)
                    peak[name] = max(peak[name], rss)
                    shutil.rmtree(out, ignore_errors=True)
            print(
                f"{'runner':14} {'min s':>7} {'median':>7} {'max s':>7} {'MB/s':>7} {'peak RSS':>9}"
            )
            for name in names:
                low, mid, high = _stats(seconds[name])
                print(
                    f"{name:14} {low:7.2f} {mid:7.2f} {high:7.2f} {size / mid:7.1f} "
                    f"{peak[name]:6.0f} MiB"
                )
            _ratios(seconds)


def _ratios(seconds: dict[str, list[float]]) -> None:
    """Ratios of medians: above 1, traceq is faster (or, for the bare parse, slower)."""
    med = {name: statistics.median(values) for name, values in seconds.items() if values}
    if "traceq" not in med:
        return
    for ref in ("duckdb", "traceq-polars", "polars", "polars+schema", "orjson"):
        if ref in med:
            print(f"traceq speed / {ref}: {med[ref] / med['traceq']:.2f}x")
    if "pyarrow" in med:
        print(f"traceq time / pyarrow bare parse + flatten: {med['traceq'] / med['pyarrow']:.2f}x")
    if "traceq-proto" in med:
        proto = med["traceq"] / med["traceq-proto"]
        print(f"OTLP protobuf speed / OTLP/JSON (same spans): {proto:.2f}x")


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
