"""Regular expressions of vLLM (V0, V1) and SGLang server-log lines.

Sources: the format strings of vLLM's logger (vllm/logger.py) and stats loggers
(vllm/v1/metrics/loggers.py, vllm/engine/metrics.py) and SGLang's scheduler, checked against
the real samples in tests/data/real/. All patterns are Rust-regex compatible (polars
`str.extract_groups`): no look-around, no back-references. They never key on the logger's
line numbers.
"""

from __future__ import annotations

# Terminal colour codes (ColoredFormatter, Ray worker prefixes) are removed before parsing.
ANSI = r"\x1b\[[0-9;]*[A-Za-z]"

# `(APIServer pid=1) (RayWorkerWrapper pid=2, ip=…) ` — zero or more nested process prefixes.
_PROCS = r"(?P<proc>(?:\([^()]*\) )*)"
_STAMP = (
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<mm>\d{2})-(?P<dd>\d{2}) "
    r"(?P<hms>\d{2}:\d{2}:\d{2})(?:\.\d+)? \[?(?P<file>[\w./-]+):\d+\] ?(?P<msg>.*)$"
)
# V0 `INFO 12-16 00:57:56 llm_engine.py:649] …` and V1 `INFO 03-11 06:18:48 [loggers.py:80] …`.
VLLM_LINE = "^" + _PROCS + _STAMP
# The prefix alone (`pre` is all of it): the message is the rest of the line, sliced off
# without a regex (a capture running to the end of a long line is the costly part). Only
# what is used is captured (each group costs): the stamp `MM-DD HH:MM:SS` as one group.
VLLM_PREFIX = (
    "^(?P<pre>"
    + _PROCS
    + r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<stamp>\d{2}-\d{2} \d{2}:\d{2}:\d{2})"
    + r"(?:\.\d+)? \[?[\w./-]+:\d+\] ?)"
)
# The same prefix anywhere in a line: records glued after a tqdm bar or VLLM_LOGGING_PREFIX.
VLLM_GLUED = r"(?P<junk>.*?)(?P<rest>(?:\([^()]*\) )*(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) " + (
    r"\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)? \[?[\w./-]+:\d+\].*)$"
)
# A prefix that a log collector puts in front of the server's own line, removed before
# parsing like colour codes; the server's own stamp after it is the record's time:
# - syslog / journald (`journalctl -o short` or `short-iso`, rsyslog files):
#   `Jun 15 10:00:05 host vllm[1671]: `, `2025-06-15T10:00:05+0000 host vllm[1671]: `;
# - container runtimes: `docker logs -t` and `kubectl logs --timestamps` (RFC 3339, ns, UTC:
#   `2025-06-15T10:00:05.123456789Z `), `docker compose logs` (`vllm-1  | `, with `-t` that
#   stamp after it), `kubectl logs --prefix` (`[pod/vllm-0/vllm] `) and the CRI log files
#   of a Kubernetes node (`/var/log/pods/…/0.log`: `2025-06-15T10:00:05.123456789Z stdout F `).
_RFC3339 = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?"
RUNTIME_NAME = r"(?:\[pod/[^\]\s]+\] |[\w.-]+ +\| )"
"""`kubectl logs --prefix`'s `[pod/…] ` or `docker compose logs`' `vllm-1  | `."""
RUNTIME_STAMP = _RFC3339 + r"(?:Z|[+-]\d{2}:\d{2})"
"""The RFC 3339 stamp `docker logs -t`, `kubectl logs --timestamps` and CRI files write."""
LINE_PREFIX = (
    r"^(?:(?:[A-Z][a-z]{2} [ 0-9][0-9] \d{2}:\d{2}:\d{2}|"
    + _RFC3339
    + r"(?:Z|[+-]\d{2}:?\d{2})?) \S+ [^\s:\[\]]+(?:\[\d+\])?: "
    + rf"|{RUNTIME_NAME}(?:{RUNTIME_STAMP} )?"
    + rf"|{RUNTIME_STAMP} (?:(?:stdout|stderr) [FP] )?)"
)
# Ray appends this to lines it de-duplicated.
RAY_REPEATED = r"\s*\[repeated \d+x across cluster\]\s*$"

# Uvicorn access line, no date:
# `INFO:     127.0.0.1:46928 - "POST /v1/completions HTTP/1.1" 200 OK`.
UVICORN_ACCESS = (
    r'^(?:\([^()]*\) )*INFO:\s+\S+ - "(?P<method>[A-Z]+) (?P<path>\S+) [^"]*" '
    r"(?P<status>\d{3})(?: |$)"
)
UVICORN_OTHER = r"^(?:\([^()]*\) )*(?:INFO|WARNING|ERROR|DEBUG|CRITICAL):\s"

# SGLang: `[2025-07-18 15:32:52 TP0] Prefill batch. …`, ranks optional (`DP0 TP0`, `TP3 EP3`).
SGLANG_LINE = (
    r"^\[(?P<date>\d{4}-\d{2}-\d{2}) (?P<hms>\d{2}:\d{2}:\d{2})"
    r"(?: (?P<ranks>(?:(?:DP|PP|TP|EP)\d+ ?)+))?\] (?P<msg>.*)$"
)
SGLANG_PREFILL = (
    r"^Prefill batch(?:\(mixed #running-req: \d+\))?[.,]? (?:\[\d+\], )?"
    r"#new-seq: (?P<new_seqs>\d+), #new-token: (?P<new_tokens>\d+), "
    r"#cached-token: (?P<cached_tokens>\d+), (?:#token: (?P<num_tokens>\d+), )?"
    r"(?:cache hit rate: (?P<hit>[\d.]+)%, )?(?:(?:full )?token usage: (?P<usage>[\d.]+), )?"
    r".*?(?:#running-req: (?P<running>\d+), )?#queue-req: (?P<queue>\d+)"
)
SGLANG_DECODE = (
    r"^Decode batch[.,]? (?:\[\d+\], )?#running-req: (?P<running>\d+), "
    r"#token: (?P<num_tokens>\d+), "
    r"(?:full )?token usage: (?P<usage>[\d.]+), (?:.*?cuda graph: (?P<cuda_graph>True|False), )?"
    r"(?:.*?)gen throughput \(token/s\): (?P<gen_tps>[\d.]+), #queue-req: (?P<queue>\d+)"
)
# Some SGLang builds append `, timestamp: 2025-07-18T15:32:52.498932` (finer than the prefix).
SGLANG_ISO = r"timestamp: (?P<iso>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?)"

# Other timestamped third-party lines (modelscope, Ray): counted, not parsed.
THIRD_PARTY = r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}"
PROCESS_OUTPUT = r"^\([^()]*\) "
# NUL and other C0 controls (not tab / CR / ESC): a binary line.
BINARY = r"[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f]"

# A percentage as vLLM prints it (`%.1f%%`, `%.2f%%`).
PCT = r"\d+(?:\.\d{1,4})?"
# vLLM periodic stats: one tolerant pattern for V0 (2023 `Throughput:`, 2024 `Pending`), early
# V1 (no engine index) and V1 ≥ 0.8 (`Engine 000:`, external / MM hit rates).
STATS = (
    r"^(?:Engine (?P<engine>\d+): )?(?:Avg prompt throughput: (?P<prompt_tps>[\d.]+) tokens/s, "
    r"Avg generation throughput: (?P<gen_tps>[\d.]+) tokens/s|"
    r"Throughput: (?P<throughput_tps>[\d.]+) tokens/s), Running: (?P<running>\d+) reqs"
    # The optional fields as one loop whose branches differ in their first letter after ", "
    # (Pending / Prefix share the P): the regex crate's fast one-pass engine then applies.
    r"(?:, (?:Swapped: (?P<swapped>\d+) reqs|Waiting: (?P<waiting>\d+) reqs"
    r"|P(?:ending: (?P<pending>\d+) reqs|refix cache hit rate: (?P<prefix>" + PCT + r")%)"
    r"|GPU KV cache usage: (?P<kv>" + PCT + r")%|CPU KV cache usage: (?P<cpu_kv>" + PCT + r")%"
    r"|External prefix cache hit rate: (?P<ext_prefix>" + PCT + r")%"
    r"|MM cache hit rate: (?P<mm_hit>" + PCT + r")%))*\.? *$"
)
# A message that claims to be a stats line (parsed or quarantined, never dropped silently).
STATS_HINT = (
    r"Avg prompt throughput:|Avg generation throughput:|^(?:Engine \d+: )?Throughput: .*Running:"
)
# Orphan fragments (a record cut at the file start, reflowed text): quarantined, not counted.
STATS_FRAGMENT = r"(?:prompt|generation) throughput: [\d.]+|Running: \d+ reqs"

# V0 preemption warning; the cumulative counter is logged (every 50th preemption in ≥ 0.5).
PREEMPT_HINT = "is preempted by"
PREEMPT = (
    r"Sequence group (?P<req>\S+) is preempted by PreemptionMode\.(?P<mode>RECOMPUTE|SWAP) mode"
    r".*?total_(?:num_cumulative_preemption|cumulative_preemption_cnt)=(?P<n>\d+)"
)

# Request lifecycle (request logging on). The prompt text itself is never kept.
RECEIVED = r"^Received request (?P<req>[^\s:]+):? "
PROMPT_IDS = r"prompt_token_ids: \[(?P<ids>[\d, ]*)\]"
NUM_PROMPT_TOKENS = r"num_prompt_tokens: (?P<n>\d+)"
MAX_TOKENS = r"max_tokens=(?P<n>\d+)"
# `req` keeps the sentence's full stop (strip it): a lazy `\S+?\.?$` defeats the fast engine.
LIFECYCLE = r"^(?P<what>Added|Finished|Aborted) request (?P<req>\S+)$"

# The engine config line (`Initializing a V1 LLM engine (v…) with config: model='…', …`).
MODEL = r"model='([^']*)'"
SERVED_MODEL = r"served_model_name=([^,\s]+)"

# Start-up settings (`events.SETTINGS` reads them, one pattern per key): the `non-default args:
# {…}` dict (a Python dict repr; seen from 0.10 `utils.py` to 0.25 `api_utils.py`), the older
# `args: Namespace(…)` line (`api_server.py`, V0 and V1 to 0.8: every argument, defaults too)
# and the scheduler's `Chunked prefill is enabled with max_num_batched_tokens=N.` (the effective
# value, default or not). The engine config line is the `engine_config` milestone.
SETTINGS_START = (
    r"non-default args: |args: Namespace\(|Chunked prefill is enabled with max_num_batched_tokens="
)
# Where the top-level settings of those lines begin: nested values (`speculative_config`'s own
# `model`, `SpeculativeConfig(…)`, JSON configs) are blanked out of the rest before reading.
SETTINGS_BODY = r"^.*?(?:non-default args: \{|Namespace\(|with config: )"
SETTINGS_NESTED = r"\{[^{}]*\}|\([^()]*\)|\[[^\[\]]*\]"

# PyTorch's CUDA OOM (c10/cuda/CUDACachingAllocator.cpp `malloc`, `format_size`: bytes, KiB,
# MiB, GiB with two decimals). torch ≥ 2.1: `CUDA out of memory. Tried to allocate 2.00 GiB.
# GPU 0 has a total capacity of 79.15 GiB of which 1.23 GiB is free. Process 12345 has
# 77.90 GiB memory in use. Including non-PyTorch memory, this process has … Of the allocated
# memory … ` (2.1 printed `capacty`); torch < 2.1: `Tried to allocate 20.00 MiB (GPU 0;
# 79.35 GiB total capacity; 76.01 GiB already allocated; 9.19 MiB free; …)`. ROCm builds print
# `HIP out of memory`, XPU ones `XPU out of memory` (c10/xpu/XPUCachingAllocator.cpp).
# A kernel launch or NCCL that finds no memory raises the CUDA runtime's own error instead
# (`RuntimeError: CUDA error: out of memory`, c10/cuda/CUDAException.h; NCCL's
# `ncclSystemError … Cuda failure 'out of memory'`): no sizes, the same incident.
OOM = (
    r"(?:CUDA|HIP|XPU) out of memory|OutOfMemoryError|(?:CUDA|HIP) error: out of memory"
    r"|Cuda failure 'out of memory'"
)
# The message from the OOM text on (what `events.message` keeps: the numbers come first).
OOM_TEXT = (
    r"[\w.]*(?:OutOfMemoryError|(?:CUDA|HIP|XPU) out of memory|(?:CUDA|HIP) error: out of "
    r"memory|Cuda failure 'out of memory').*"
)
_NUM = r"\d+(?:\.\d+)?"
_UNIT = r"bytes|KiB|MiB|GiB"
OOM_TRIED = r"Tried to allocate (?P<n>" + _NUM + r") (?P<unit>" + _UNIT + ")"
# Each with the old format's groups second (`n2`, `unit2`): the clause printed is the message.
OOM_TOTAL = (
    r"GPU \d+ has a total capaci?ty of (?P<n>" + _NUM + r") (?P<unit>" + _UNIT + ")"
    r"|GPU \d+; (?P<n2>" + _NUM + r") (?P<unit2>" + _UNIT + ") total capacity"
)
OOM_FREE = (
    r"of which (?P<n>" + _NUM + r") (?P<unit>" + _UNIT + ") is free"
    r"|(?P<n2>" + _NUM + r") (?P<unit2>" + _UNIT + r") free\b"
)
# One clause per other process on the GPU (torch ≥ 2.1, `proc_info`), and its size.
OOM_PROCESS = r"Process \d+ has " + _NUM + " (?:" + _UNIT + ") memory in use"
OOM_SIZE = r"^(?:Process \d+ has )?(?P<n>" + _NUM + r") (?P<unit>" + _UNIT + ")"

# KV-connector load failures (P/D disaggregation, KV offloading).
# vllm/v1/core/sched/scheduler.py `_handle_invalid_blocks`, whatever connector reported the
# invalid blocks (the `Recovered` line since vllm PR 19330, 2025-09; the `Failing` line with
# `kv_transfer_config.kv_load_failure_policy=fail` since PR 26813, 2025-10):
#   ERROR   `Failing %d request(s) due to KV load failure (failure_policy=fail, %d tokens
#           affected). Request IDs: %s`
#   WARNING `Recovered from KV load failure: %d request(s) rescheduled (%d tokens affected).`
VLLM_KV_FAILED = (
    r"Failing (?P<reqs>\d+) request\(s\) due to KV load failure"
    r"(?: \(failure_policy=\w+, (?P<tokens>\d+) tokens affected\))?"
)
VLLM_KV_RESCHEDULED = (
    r"Recovered from KV load failure: (?P<reqs>\d+) request\(s\) rescheduled"
    r"(?: \((?P<tokens>\d+) tokens affected\))?"
)
# NIXL connector, vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py (later
# nixl/base_worker.py) `_log_failure` (≥ 2026-01, vllm PR 32031): `NIXL transfer failure: %s |
# Context: %s`, the failure type (`transfer_failed. Marking blocks as invalid`,
# `transfer_exception`, `transfer_setup_failed`, `handshake_failed`, `handshake_setup_failed`, …)
# and a dict repr holding `'request_id': '…'` and `'num_local_blocks': N` when the request is
# known. Before: `NIXL transfer failed for request %s with state %s. Marking blocks as invalid.`
# and `NIXL transfer setup/initiation failed for request %s. Marking blocks as invalid.`
NIXL_FAILED = r"NIXL transfer failure: |NIXL transfer [\w/ ]*failed for request "
NIXL_BLOCKS = r"'num_local_blocks': (?P<blocks>\d+)"
NIXL_REQUEST = (
    r"'request_id': '(?P<req>[^']+)'|NIXL transfer [\w/ ]*failed for request (?P<req2>\S+)"
)
# LMCache's own lines (lmcache/logging.py: `[%(asctime)s] LMCache %(levelname)s: %(message)s
# (%(filename)s:%(lineno)d:%(name)s)`), after process prefixes when a vLLM worker prints them.
LMCACHE_LINE = (
    r"^(?:\([^()]*\) )*\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3}\] "
    r"LMCache (?:DEBUG|INFO|WARNING|ERROR|CRITICAL):"
)
# lmcache/integration/vllm/vllm_v1_adapter.py `start_load_kv` (and vLLM's copy under
# kv_connector/v1/lmcache_integration/), ERROR, after `The number of retrieved tokens is less
# than the expected number of tokens! This should not happen!`:
LMCACHE_SHORT = r"Num retrieved tokens: (?P<got>\d+), num expected tokens: (?P<want>\d+)"
# lmcache/v1/cache_engine.py `retrieve`, INFO, every retrieve: a failure only when fewer were
# retrieved than required. ≥ 0.3.2: `[req_id=%s] Retrieved %d out of %d required tokens (from
# %d total tokens). size: …`; ≤ 0.3.1: `Retrieved %d out of %d out of total %d tokens`.
LMCACHE_RETRIEVED = (
    r"(?:\[req_id=(?P<req>[^\]\s]+)\] )?Retrieved (?P<got>\d+) out of (?P<want>\d+) "
    r"(?:required tokens|out of total)"
)

# Traceback body lines of a logged exception (one event per exception, not per frame).
TRACEBACK_BODY = r"^(?:\s|Traceback \(most recent call last\)|\^+\s*$|File \")"
EXCEPTION_LINE = r"^(?:[A-Za-z_][\w.]*)?(?:Error|Exception|Exit)\b[\w.]*: "


def ascii_classes(pattern: str) -> str:
    """`pattern` with `\\d`, `\\w`, `\\s`, `\\S` as ASCII classes.

    Unicode classes make the regex crate fall back from its fast one-pass engines to slower
    ones (about 4x on prefix captures); log syntax is ASCII. Valid for Python `re` too.
    """
    inside = {"d": "0-9", "w": "0-9A-Za-z_", "s": "\\t\\n\\v\\f\\r "}
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if nxt in inside:
                out.append(inside[nxt] if in_class else f"[{inside[nxt]}]")
            elif nxt == "S" and not in_class:
                out.append("[^\\t\\n\\v\\f\\r ]")
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if ch == "[" and not in_class:
            in_class = True
        elif ch == "]" and in_class and pattern[i - 1] not in "[^":
            in_class = False
        out.append(ch)
        i += 1
    return "".join(out)


_SNIFF_ONLY = ("VLLM_LINE",)
for _name, _value in list(globals().items()):
    if _name.isupper() and isinstance(_value, str) and _name not in _SNIFF_ONLY:
        globals()[_name] = ascii_classes(_value)
