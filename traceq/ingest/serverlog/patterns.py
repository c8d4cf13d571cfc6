"""Regular expressions of vLLM (V0, V1) and SGLang server-log lines.

Sources: research/vllm_formats.md §2 and §4, checked against the real samples in
tests/data/real/. All patterns are Rust-regex compatible (polars `str.extract_groups`): no
look-around, no back-references. They never key on the logger's line numbers.
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
# A syslog / journald line prefix (`journalctl -o short` or `short-iso`, rsyslog files):
# `Jun 15 10:00:05 host vllm[1671]: ` or `2025-06-15T10:00:05+0000 host vllm[1671]: `. Removed
# before parsing, like colour codes; the server's own stamp after it is the record's time.
SYSLOG = (
    r"^(?:[A-Z][a-z]{2} [ 0-9][0-9] \d{2}:\d{2}:\d{2}"
    r"|\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?)"
    r" \S+ [^\s:\[\]]+(?:\[\d+\])?: "
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
