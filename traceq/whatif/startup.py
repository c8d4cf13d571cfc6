"""What the engine's start-up lines print, read from the rows of
traceq/sql/whatif_settings.sql: the settings and KV cache size, each with the line it came
from, and the vLLM version. traceq/whatif/limits.py turns them into the replay's limits.

>>> same_line(["vllm.log line 6: a=1", "vllm.log line 6: b=2"])
'vllm.log line 6: a=1, b=2'
"""

from __future__ import annotations

import re

import polars as pl

KV_BLOCK_TOKENS = 16
"""Tokens per KV block, vLLM's default block size: `num_gpu_blocks` × this is the cache size
when the log prints blocks but not `GPU KV cache size`."""


def printed(rows: pl.DataFrame) -> dict[str, tuple[float, str]]:
    """name → (value, where) from the start-up rows, the latest line of each."""
    out: dict[str, tuple[float, str]] = {}
    names = {
        "setting_max_num_seqs": "max_num_seqs",
        "setting_max_num_batched_tokens": "max_num_batched_tokens",
        "setting_max_model_len": "max_model_len",
        "setting_tensor_parallel_size": "tensor_parallel_size",
        "setting_pipeline_parallel_size": "pipeline_parallel_size",
        "startup_kv_tokens": "kv_cache_tokens",
    }
    for row in rows.iter_rows(named=True):  # start-up lines: a handful per engine start
        where = f"{row['file'] or 'log'} line {row['line']}: {(row['message'] or '').strip()[:80]}"
        kind = row["kind"]
        if kind in names and row["value"] is not None:
            out.setdefault(names[kind], (row["value"], where))
        elif kind == "setting_chunked_prefill":
            state = re.search(r"=(True|False)$", row["message"] or "")
            if state:
                out.setdefault("chunked_prefill", (float(state.group(1) == "True"), where))
        elif kind == "startup_gpu_blocks" and row["value"] is not None:
            blocks = (row["value"] * KV_BLOCK_TOKENS, f"{where} × {KV_BLOCK_TOKENS}-token blocks")
            out.setdefault("_kv_blocks", blocks)
        elif kind == "startup_engine_config":
            text = row["message"] or ""
            for name, pattern in (
                ("chunked_prefill", r"chunked_prefill_enabled=(True|False)"),
                ("prefix_caching", r"enable_prefix_caching=(True|False)"),
            ):
                m = re.search(pattern, text)
                if m:
                    flag = f"{row['file'] or 'log'} line {row['line']}: {m.group(0)}"
                    out.setdefault(name, (float(m.group(1) == "True"), flag))
    if "kv_cache_tokens" not in out and "_kv_blocks" in out:
        out["kv_cache_tokens"] = out["_kv_blocks"]
    return out


def same_line(wheres: list[str]) -> str:
    """`vllm.log line 6: a=1` and `vllm.log line 6: b=2` as `vllm.log line 6: a=1, b=2`."""
    heads = {w.partition(": ")[0] for w in wheres}
    if len(heads) == 1:
        return f"{heads.pop()}: " + ", ".join(w.partition(": ")[2] for w in wheres)
    return " and ".join(wheres)


def engine_version(rows: pl.DataFrame) -> str | None:
    for row in rows.iter_rows(named=True):
        text = row["message"] or ""
        if row["kind"] == "startup_version":
            m = re.search(r"version (\S+)", text)
        elif row["kind"] == "startup_engine_config":
            m = re.search(r"\(v([^)\s]+)\)", text)
        else:
            continue
        if m:
            return m.group(1)
    return None
