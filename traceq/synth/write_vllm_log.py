"""A vLLM V1 (0.10.x) server log, line for line as vLLM prints it.

Every line format is copied from real logs in tests/data/real/vllm (vLLM 0.10.1.1 startup
and stats, 0.8.5 / 0.7.4 request logging) and vLLM's logger format (vllm/logger.py): the
`(APIServer pid=N)` / `(EngineCore_0 pid=N)` prefixes, `%m-%d %H:%M:%S` timestamps with no
year, `[file.py:line]`, the `Engine 000:` stats line every 10 s (dropped to DEBUG — so not
printed — when this and the previous interval saw no tokens), `Received request` / `Added
request` lines, and uvicorn access lines. V1 prints no preemption line at INFO (§2.3), so
preemptions show only as KV usage near 100 % and a growing `Waiting`.

Stats semantics follow vLLM V1's IterationStats: prompt throughput counts a request's whole
prompt when its first token is produced; generation throughput counts every token sampled.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import BinaryIO

import polars as pl

from traceq.synth.arrivals import rng
from traceq.synth.config import Scenario
from traceq.synth.engine import NS, Request, StepInfo

API = "(APIServer pid=1671) "
CORE = "(EngineCore_0 pid=1812) "
STATS_INTERVAL_NS = 10 * NS
STATS_OFFSET_NS = 317_000_000  # the logging loop runs off the startup instant
FLUSH_LAG_NS = 120 * NS  # lines older than this behind the simulation clock are final
SAMPLING = (
    "SamplingParams(n=1, presence_penalty=0.0, frequency_penalty=0.0, repetition_penalty=1.0, "
    "temperature=0.0, top_p=1.0, top_k=0, min_p=0.0, seed=None, stop=[], stop_token_ids=[], "
    "bad_words=[], include_stop_str_in_output=False, ignore_eos={ignore_eos}, "
    "max_tokens={max_tokens}, min_tokens=0, logprobs=None, prompt_logprobs=None, "
    "skip_special_tokens=True, spaces_between_special_tokens=True, "
    "truncate_prompt_tokens=None, guided_decoding=None, extra_args=None)"
)


def stamp(ns: int) -> str:
    """vLLM's `%m-%d %H:%M:%S` (no year, no zone; the container clock is UTC)."""
    return time.strftime("%m-%d %H:%M:%S", time.gmtime(ns // NS))


def line(ns: int, prefix: str, where: str, msg: str, level: str = "INFO") -> str:
    return f"{prefix}{level} {stamp(ns)} [{where}] {msg}"


def startup_lines(sc: Scenario, t_ready: int) -> list[tuple[int, str]]:
    """The startup block of vLLM 0.10.1.1 (tests/data/real/vllm, dennislee22), ending at t_ready."""
    c = sc.engine
    m = c.model
    s = NS
    kv_gib = c.kv_budget_tokens * c.kv_kib_per_token * 1024 / (1 << 30)
    blocks = c.kv_budget_tokens // 16
    conc = c.kv_budget_tokens / c.max_model_len
    out = [
        (
            -137 * s,
            f"INFO {stamp(t_ready - 137 * s)} [__init__.py:241] "
            "Automatically detected platform cuda.",
        ),
        (
            -132 * s,
            line(t_ready - 132 * s, API, "api_server.py:1805", "vLLM API server version 0.10.1.1"),
        ),
        (
            -132 * s,
            line(
                t_ready - 132 * s,
                API,
                "utils.py:326",
                "non-default args: {'model_tag': "
                f"'{m}', 'model': '{m}', 'max_model_len': {c.max_model_len}, 'max_num_seqs': "
                f"{c.max_num_seqs}, 'gpu_memory_utilization': {c.gpu_memory_utilization}"
                + (
                    f", 'tensor_parallel_size': {c.tensor_parallel_size}"
                    if c.tensor_parallel_size > 1
                    else ""
                )
                + "}",
            ),
        ),
        (
            -116 * s,
            line(
                t_ready - 116 * s, API, "__init__.py:1750", f"Using max model len {c.max_model_len}"
            ),
        ),
    ]
    if c.chunked_prefill:
        out.append(
            (
                -115 * s,
                line(
                    t_ready - 115 * s,
                    API,
                    "scheduler.py:222",
                    "Chunked prefill is enabled with "
                    f"max_num_batched_tokens={c.max_num_batched_tokens}.",
                ),
            )
        )
    core = [
        (
            -99,
            "core.py:74",
            f"Initializing a V1 LLM engine (v0.10.1.1) with config: model='{m}', "
            f"speculative_config=None, tokenizer='{m}', skip_tokenizer_init=False, "
            "tokenizer_mode=auto, revision=None, trust_remote_code=False, dtype=torch.bfloat16, "
            f"max_seq_len={c.max_model_len}, tensor_parallel_size={c.tensor_parallel_size}, "
            "pipeline_parallel_size=1, "
            "quantization=None, enforce_eager=False, "
            f"kv_cache_dtype=auto, seed=0, served_model_name={m}, "
            f"enable_prefix_caching={c.prefix_caching}, "
            f"chunked_prefill_enabled={c.chunked_prefill}",
        ),
        (-96, "gpu_model_runner.py:1953", f"Starting to load model {m}..."),
        (-91, "default_loader.py:262", "Loading weights took 3.03 seconds"),
        (
            -90,
            "gpu_model_runner.py:2007",
            f"Model loading took {c.weights_gib:.4f} GiB and 4.422213 seconds",
        ),
        (-81, "backends.py:559", "Dynamo bytecode transform time: 9.05 s"),
        (-22, "backends.py:215", "Compiling a graph for dynamic shape takes 58.25 s"),
        (-6, "monitor.py:34", "torch.compile takes 67.30 s in total"),
        (-4, "gpu_worker.py:276", f"Available KV cache memory: {kv_gib:.2f} GiB"),
        (-4, "kv_cache_utils.py:849", f"GPU KV cache size: {c.kv_budget_tokens:,} tokens"),
        (
            -4,
            "kv_cache_utils.py:853",
            f"Maximum concurrency for {c.max_model_len:,} tokens per request: {conc:.2f}x",
        ),
        (-1, "gpu_model_runner.py:2708", "Graph capturing finished in 3 secs, took 0.50 GiB"),
        (
            -1,
            "core.py:214",
            "init engine (profile, create kv cache, warmup model) took 89.58 seconds",
        ),
    ]
    out += [(d * s, line(t_ready + d * s, CORE, w, msg)) for d, w, msg in core]
    api = [
        f"Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: {blocks}",
    ]
    out.append((0, line(t_ready, API, "loggers.py:142", api[0])))
    out.append(
        (
            0,
            line(
                t_ready,
                API,
                "api_server.py:1880",
                "Starting vLLM API server 0 on http://0.0.0.0:8000",
            ),
        )
    )
    out.append((0, line(t_ready, API, "launcher.py:36", "Available routes are:")))
    for route, methods in (
        ("/health", "GET"),
        ("/v1/models", "GET"),
        ("/v1/chat/completions", "POST"),
        ("/v1/completions", "POST"),
        ("/metrics", "GET"),
    ):
        out.append((0, line(t_ready, API, "launcher.py:44", f"Route: {route}, Methods: {methods}")))
    for msg in (
        "Started server process [1671]",
        "Waiting for application startup.",
        "Application startup complete.",
    ):
        out.append((0, f"{API}INFO:     {msg}"))
    return [(t_ready + d, text) for d, text in out]


class VllmLogWriter:
    """A sink that writes the V1 log; lines are buffered and written in time order."""

    def __init__(self, path: Path, sc: Scenario, seed: int, t_ready: int, kv_budget: int) -> None:
        self.fh: BinaryIO = open(path, "wb")  # noqa: SIM115 - closed in close()
        self.sc = sc
        self.log_requests = sc.log_requests
        self.kv_budget = kv_budget
        self.ports = rng(seed, "ports")
        self.token_ids = rng(seed, "token-ids")
        self.buf: list[tuple[int, int, str]] = []
        self.seq = 0
        for t, text in startup_lines(sc, t_ready):
            self._add(t, text)
        self.next_log = t_ready + STATS_INTERVAL_NS + STATS_OFFSET_NS
        self.prompt_acc = 0
        self.gen_acc = 0
        self.prev_zero = True
        self.state = (0, 0, 0.0, 0.0)  # running, waiting, kv usage, prefix hit rate
        self.stats: list[dict] = []  # what was logged, for tests and labels
        self.received: list[tuple[str, int, int, int]] = []  # request lines, when logged

    def _add(self, t: int, text: str) -> None:
        self.buf.append((t, self.seq, text))
        self.seq += 1

    def on_arrival(self, r: Request) -> None:
        port = self.ports.randint(32768, 60999)
        if r.arrival.rejected:
            self._add(
                r.t_tokenized,
                f'{API}INFO:     127.0.0.1:{port} - "POST /v1/completions HTTP/1.1" '
                "400 Bad Request",
            )
            return
        if self.log_requests:
            ids = ", ".join(str(self.token_ids.randrange(128000)) for _ in range(r.prompt))
            params = SAMPLING.format(
                ignore_eos=r.max_tokens == r.output_target, max_tokens=r.max_tokens
            )
            self._add(
                r.t_tokenized,
                line(
                    r.t_tokenized,
                    API,
                    "logger.py:43",
                    f"Received request {r.request_id}: prompt: None, params: {params}, "
                    f"prompt_token_ids: [{ids}], prompt_embeds shape: None, lora_request: None.",
                ),
            )
            self._add(
                r.t_queued,
                line(r.t_queued, API, "async_llm.py:273", f"Added request {r.request_id}."),
            )
            self.received.append((r.request_id, r.t_tokenized, r.prompt, r.max_tokens))
        # A streaming response starts (and uvicorn logs it) as soon as the request is accepted.
        self._add(
            r.t_queued, f'{API}INFO:     127.0.0.1:{port} - "POST /v1/completions HTTP/1.1" 200 OK'
        )

    def _emit_stats(self, upto: int) -> None:
        while self.next_log < upto:
            t = self.next_log
            sec = STATS_INTERVAL_NS / NS
            prompt, gen = self.prompt_acc / sec, self.gen_acc / sec
            zero = self.prompt_acc == 0 and self.gen_acc == 0
            running, waiting, kv, hit = self.state
            if not (zero and self.prev_zero):
                self._add(
                    t,
                    line(
                        t,
                        API,
                        "loggers.py:123",
                        f"Engine 000: Avg prompt throughput: {prompt:.1f} tokens/s, Avg generation "
                        f"throughput: {gen:.1f} tokens/s, Running: {running} reqs, "
                        f"Waiting: {waiting} reqs, GPU KV cache usage: {kv * 100:.1f}%, "
                        f"Prefix cache hit rate: {hit * 100:.1f}%",
                    ),
                )
                self.stats.append(
                    {
                        "ts": t,
                        "prompt_tokens": self.prompt_acc,
                        "gen_tokens": self.gen_acc,
                        "running": running,
                        "waiting": waiting,
                        "kv_usage": kv,
                        "prefix_hit_rate": hit,
                    }
                )
            self.prev_zero = zero
            self.prompt_acc = self.gen_acc = 0
            self.next_log += STATS_INTERVAL_NS

    def on_step(self, s: StepInfo) -> None:
        self._emit_stats(s.t_end)
        self.prompt_acc += s.prompt_tokens_done
        self.gen_acc += s.tokens_sampled
        self.state = (s.running, s.waiting, s.kv_used / self.kv_budget, s.hit_rate)
        if len(self.buf) > 50_000:
            self._flush(s.t_start - FLUSH_LAG_NS)

    def on_finish(self, r: Request) -> None:
        if r.finish_reason == "abort" and r.error == "timeout":
            self._add(
                r.t_end, line(r.t_end, API, "async_llm.py:430", f"Aborted request {r.request_id}.")
            )

    def on_preempt(self, t: int, r: Request) -> None:
        pass

    def _flush(self, before: int | None) -> None:
        self.buf.sort()
        cut = (
            len(self.buf)
            if before is None
            else next((i for i, e in enumerate(self.buf) if e[0] >= before), len(self.buf))
        )
        if cut:
            self.fh.write(("\n".join(e[2] for e in self.buf[:cut]) + "\n").encode())
            del self.buf[:cut]

    def close(self, t_end: int) -> None:
        self._emit_stats(t_end + 2 * STATS_INTERVAL_NS)
        self._flush(None)
        self.fh.close()


def expected_engine_stats(stats: list[dict]) -> pl.DataFrame:
    """What an ingester of this log should find in `engine_stats`, at the log's resolution:
    `ts` to the second (the printed stamp, UTC), throughputs to 0.1 token/s, ratios to the
    0.1 % printed. For the vLLM-log round-trip test (the ingester lives in another branch)."""
    sec = STATS_INTERVAL_NS / NS
    return pl.DataFrame(
        {
            "ts": [s["ts"] // NS * NS for s in stats],
            "engine": [0] * len(stats),
            "prompt_tps": [float(f"{s['prompt_tokens'] / sec:.1f}") for s in stats],
            "gen_tps": [float(f"{s['gen_tokens'] / sec:.1f}") for s in stats],
            "running": [s["running"] for s in stats],
            "waiting": [s["waiting"] for s in stats],
            "kv_usage": [float(f"{s['kv_usage'] * 100:.1f}") / 100 for s in stats],
            "prefix_hit_rate": [float(f"{s['prefix_hit_rate'] * 100:.1f}") / 100 for s in stats],
        },
        schema_overrides={
            "ts": pl.Int64,
            "engine": pl.Int64,
            "running": pl.Int64,
            "waiting": pl.Int64,
        },
    )


def expected_log_requests(received: list[tuple[str, int, int, int]]) -> pl.DataFrame:
    """The per-request truth the log carries (request logging on): id, the `Received request`
    stamp to the second, prompt tokens (= len(prompt_token_ids)) and max_tokens."""
    return pl.DataFrame(
        {
            "request_id": [r[0] for r in received],
            "ts": [r[1] // NS * NS for r in received],
            "prompt_tokens": [r[2] for r in received],
            "max_tokens": [r[3] for r in received],
        },
        schema={
            "request_id": pl.String,
            "ts": pl.Int64,
            "prompt_tokens": pl.Int64,
            "max_tokens": pl.Int64,
        },
    )
