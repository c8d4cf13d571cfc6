"""The records the engine produces: a request's truth, one step as writers see it, and the
sink protocol every writer implements."""

from __future__ import annotations

from typing import Protocol

from traceq.synth.arrivals import Arrival

NS = 1_000_000_000


class Request:
    """One request's truth: stamps (ns), lengths, and its token times once finished."""

    __slots__ = (
        "arrival",
        "block_tokens",
        "blocks",
        "cached",
        "computed",
        "d_start",
        "error",
        "finish_reason",
        "gen",
        "idx",
        "looked_up",
        "max_tokens",
        "n_preemptions",
        "output_target",
        "prompt",
        "request_id",
        "status_message",
        "t_arrival",
        "t_end",
        "t_first_token",
        "t_last_token",
        "t_queued",
        "t_scheduled",
        "t_tokenized",
        "to_prefill",
        "tokens",
        "version",
    )

    def __init__(self, a: Arrival, request_id: str) -> None:
        self.idx = a.idx
        self.request_id = request_id
        self.arrival = a
        self.t_arrival = a.t_arrival
        self.prompt = a.prompt_tokens
        self.output_target = a.output_tokens
        self.max_tokens = a.max_tokens
        self.blocks = a.blocks
        self.block_tokens = a.block_tokens
        self.t_tokenized = self.t_queued = self.t_scheduled = 0
        self.t_first_token: int | None = None
        self.t_last_token: int | None = None
        self.t_end = 0  # span end: last token, abort or rejection time
        self.cached = 0
        self.looked_up = False
        self.computed = 0
        self.to_prefill = a.prompt_tokens
        self.gen = 0
        self.d_start = -1
        self.version = 0
        self.n_preemptions = 0
        self.tokens: list[int] = []
        self.finish_reason: str | None = None
        self.error: str | None = None
        self.status_message: str | None = None


class Sink(Protocol):
    """Receives the simulation as it happens (writers, truth collectors)."""

    def on_finish(self, r: Request) -> None: ...

    def on_step(self, s: StepInfo) -> None: ...

    def on_preempt(self, t: int, r: Request) -> None: ...


class StepInfo:
    """One engine step as the writers see it."""

    __slots__ = (
        "hit_rate",
        "kv_used",
        "n_decode",
        "prefill_only",
        "prefill_tokens",
        "prompt_tokens_done",
        "running",
        "t_end",
        "t_start",
        "throttled",
        "tokens_sampled",
        "waiting",
    )
    hit_rate: float
    kv_used: int
    n_decode: int
    prefill_only: bool
    prefill_tokens: int
    prompt_tokens_done: int
    running: int
    t_end: int
    t_start: int
    throttled: bool
    tokens_sampled: int
    waiting: int

    def __init__(self, **kw: float | bool) -> None:
        for k, v in kw.items():
            setattr(self, k, v)
