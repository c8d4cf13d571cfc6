"""Run a real load-test tool (AIPerf, from PyPI) against a tiny OpenAI-compatible streaming stub
on 127.0.0.1, ingest what it wrote, and check that the crosswalk reproduces its summary.

Not part of the test suite: AIPerf is a 1.2 GB install. Set it up once in a separate venv
(its dependencies must not enter traceq's):

    python3.11 -m venv /tmp/venv-aiperf && /tmp/venv-aiperf/bin/pip install aiperf==0.13.0
    .venv/bin/python bench/loadtest_real_tool.py --aiperf /tmp/venv-aiperf/bin/aiperf

The stub streams chat completions the vLLM way (a role chunk, one chunk per word, a usage chunk
when asked, `[DONE]`), TTFT ≈ 20 ms + 0.05 ms per prompt word, 4–8 ms between tokens. AIPerf
needs a tokenizer; the hub is unreachable here, so a word-level tokenizer is built offline
from AIPerf's own bundled corpus (one token = one whitespace word). Do not set
HF_HUB_OFFLINE: AIPerf 0.13 then rejects a local tokenizer path.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import polars as pl

import traceq
from traceq.ingest import ingest


class Stub(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    rng = random.Random(7)

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def _send(self, code: int, body: bytes, kind: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.startswith("/v1/models"):
            self._send(
                200, json.dumps({"data": [{"id": "mock-model", "object": "model"}]}).encode()
            )
        elif self.path.startswith("/metrics"):
            self._send(200, b"# no metrics\n", "text/plain")
        else:
            self._send(200, b"{}")

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        words = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
        n_out = int(body.get("max_completion_tokens") or body.get("max_tokens") or 16)
        rid = f"chatcmpl-{self.rng.getrandbits(64):016x}"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("X-Request-ID", rid)
        self.end_headers()

        def event(payload: dict | str) -> None:
            data = payload if isinstance(payload, str) else json.dumps(payload)
            chunk = f"data: {data}\n\n".encode()
            self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            self.wfile.flush()

        def delta(content: dict, finish: str | None = None) -> dict:
            return {
                "id": rid,
                "object": "chat.completion.chunk",
                "model": "mock-model",
                "choices": [{"index": 0, "delta": content, "finish_reason": finish}],
            }

        time.sleep(0.020 + 0.00005 * words)
        event(delta({"role": "assistant", "content": ""}))
        for i in range(n_out):
            if i:
                time.sleep(self.rng.uniform(0.004, 0.008))
            event(
                delta(
                    {"content": "tok" if i == 0 else " tok"}, "length" if i == n_out - 1 else None
                )
            )
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {
                "prompt_tokens": words,
                "completion_tokens": n_out,
                "total_tokens": words + n_out,
            }
            event({"id": rid, "object": "chat.completion.chunk", "choices": [], "usage": usage})
        event("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def build_tokenizer(aiperf: Path, out: Path) -> None:
    """A word-level tokenizer from AIPerf's bundled corpus, written by AIPerf's own Python."""
    script = r"""
import json, pathlib, re, sys
import aiperf
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, decoders
corpus = next(pathlib.Path(aiperf.__file__).parent.rglob("shakespeare.txt")).read_text()
words = sorted(set(re.findall(r"\w+", corpus.lower())) | {"tok"})
vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(words)}}
tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
tok.normalizer = normalizers.Lowercase()
tok.pre_tokenizer = pre_tokenizers.Whitespace()
tok.decoder = decoders.WordPiece(prefix="##")
out = pathlib.Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
tok.save(str(out / "tokenizer.json"))
config = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]"}
(out / "tokenizer_config.json").write_text(json.dumps(config))
"""
    python = aiperf.parent / "python"
    subprocess.run([str(python), "-c", script, str(out)], check=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--aiperf", default="/tmp/venv-aiperf/bin/aiperf")
    parser.add_argument("--requests", type=int, default=30)
    args = parser.parse_args()
    aiperf = Path(args.aiperf)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        work = Path(tmp)
        build_tokenizer(aiperf, work / "tokenizer")
        command = [
            str(aiperf), "profile", "--model", "mock-model", "--url", url,
            "--endpoint-type", "chat", "--streaming", "--tokenizer", str(work / "tokenizer"),
            "--isl", "64", "--isl-stddev", "16", "--osl", "24", "--osl-stddev", "6",
            "--concurrency", "4", "--request-count", str(args.requests), "--random-seed", "42",
            "--no-gpu-telemetry", "--ui", "none", "--artifact-dir", str(work / "artifacts"),
        ]  # fmt: skip
        t = time.perf_counter()
        run = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=600)
        print(f"aiperf exit {run.returncode} in {time.perf_counter() - t:.1f} s")
        if run.returncode:
            print(run.stdout[-3000:], run.stderr[-3000:], file=sys.stderr)
            sys.exit(1)
        names = ("profile_export.jsonl", "profile_export_aiperf.json", "profile_export_aiperf.csv")
        exports = sorted(p for p in (work / "artifacts").rglob("*") if p.name in names)
        print("files:", [p.name for p in exports])
        results = ingest(exports, work / "run.tq")
        for r in results:
            print(f"  {r.path.name}: {r.format} {r.rows} quarantined {r.quarantined}")
        con = traceq.open(work / "run.tq")
        cw = pl.from_arrow(
            con.sql(
                "SELECT native_metric, statistic, native_ms, ours_ms, diff_ms, native_unit "
                "FROM crosswalk WHERE same_definition AND ours_ms IS NOT NULL"
            ).to_arrow_table()
        )
        print(cw.filter(pl.col("statistic").is_in(["mean", "p50", "p99"])))  # type: ignore[arg-type]
        json_rows = cw.filter(pl.col("native_metric").str.contains("_"))  # type: ignore[arg-type]
        worst = json_rows["diff_ms"].abs().max()  # type: ignore[index]
        print(f"{json_rows.height} crosswalk rows from the JSON summary; max |diff| = {worst} ms")  # type: ignore[union-attr,str-bytes-safe]
        assert json_rows.height > 0 and worst is not None and worst < 1e-6  # type: ignore[union-attr,operator]
    server.shutdown()


if __name__ == "__main__":
    main()
