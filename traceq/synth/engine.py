"""A discrete-event model of a continuous-batching LLM engine (vLLM V1 scheduler semantics).

One loop iteration is one engine step: the running requests decode one token each, running
partial prefills and newly admitted requests take the rest of the step's token budget
(chunked prefill), or — with chunked prefill off — a step is prefill-only and the decodes
wait (prefill interference). The KV cache is a token budget: when a step's KV need exceeds
it, the most recently admitted requests are preempted (recompute: their prompt and generated
tokens are prefilled again later). Prefix caching is an LRU over prompt block hashes.

Decoding requests are never touched per step: a decode step appends its end time to `T`,
and a request that decodes from step index a to b owns the token times `T[a:b]`. Finishes
come off a heap keyed by the step index at which a request reaches its output length, so a
step costs O(requests that change state), not O(batch).
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator

from traceq.synth.arrivals import Arrival, rng
from traceq.synth.config import EngineConfig, FaultConfig
from traceq.synth.request import NS, Request, Sink, StepInfo

__all__ = ["NS", "Engine", "Request", "Sink", "StepInfo", "tokenize_stage", "window_ns"]
TRIM_EVERY = 4096  # decode steps between trims of the step-time array


class Engine:
    def __init__(
        self,
        cfg: EngineConfig,
        faults: FaultConfig,
        t_ready: int,
        throttle: tuple[int, int] | None,
        speed: Callable[[int], float] | None = None,
    ):
        self.cfg = cfg
        self.faults = faults
        self.t_ready = t_ready  # "Application startup complete"
        self.throttle = throttle or (0, 0)  # ns since the epoch: step cost × throttle_factor
        self.speed = speed  # step cost × speed(t): a measured timeline of the GPU's speed
        self.T: list[int] = []  # end time of each decode step, from step index T_base on
        self.T_base = 0
        self.D = 0  # decode steps so far (absolute index of the next one)
        self.running: dict[int, Request] = {}  # admission order: popitem() = lowest priority
        self.prefilling: dict[int, Request] = {}
        self.waiting: deque[Request] = deque()
        self.n_waiting = 0
        self.n_decode = 0
        self.kv_used = 0
        self.kv_max = 0
        self.heap: list[tuple[int, int, int, Request]] = []
        self.cache: OrderedDict[int, None] = OrderedDict()
        self.cache_cap = cfg.prefix_cache_tokens
        self.hits: deque[tuple[int, int]] = deque()
        self.hit_sums = [0, 0]  # queried, hit tokens over the last 1000 requests
        self.preemptions = 0

    # -- cost model -------------------------------------------------------------------------
    def _factor(self, t: int) -> tuple[float, bool]:
        c = self.cfg
        f = 1.0
        if c.warmup_s > 0 and t < self.t_ready + c.warmup_s * NS:
            f *= 1.0 + (c.warmup_factor - 1.0) * (1.0 - (t - self.t_ready) / (c.warmup_s * NS))
        throttled = self.faults.throttle_factor != 1.0 and self.throttle[0] <= t < self.throttle[1]
        if throttled:
            f *= self.faults.throttle_factor
        if self.speed is not None:
            f *= self.speed(t)
        return f, throttled

    def _cost(self, t: int, n_dec: int, chunks: list[tuple[Request, int]]) -> tuple[int, bool]:
        c = self.cfg
        s = c.step_overhead_s
        if n_dec:
            s += c.decode_per_seq_s * n_dec + c.decode_per_kv_token_s * self.kv_used
        for r, chunk in chunks:
            ctx = r.computed + chunk / 2
            s += c.prefill_per_token_s * chunk + c.prefill_attn_per_token2_s * chunk * ctx
        f, throttled = self._factor(t)
        return max(1, round(s * f * NS)), throttled

    # -- prefix cache -----------------------------------------------------------------------
    def _lookup(self, r: Request) -> int:
        hit = 0
        if self.cfg.prefix_caching:
            for b in r.blocks:
                if b not in self.cache:
                    break
                self.cache.move_to_end(b)
                hit += r.block_tokens
            for b in r.blocks:
                self.cache[b] = None
                self.cache.move_to_end(b)
            while len(self.cache) * r.block_tokens > self.cache_cap and self.cache:
                self.cache.popitem(last=False)
        hit = min(hit, r.prompt - 1)
        self.hits.append((r.prompt, hit))
        self.hit_sums[0] += r.prompt
        self.hit_sums[1] += hit
        if len(self.hits) > 1000:
            q, h = self.hits.popleft()
            self.hit_sums[0] -= q
            self.hit_sums[1] -= h
        return hit

    def prefix_hit_rate(self) -> float:
        return self.hit_sums[1] / self.hit_sums[0] if self.hit_sums[0] else 0.0

    def warm_prefix(self, blocks: tuple[int, ...]) -> None:
        """Hold prompt blocks in the prefix cache before the first step: a replay that starts
        from the warm cache a long-running server has (traceq/whatif/replay.py)."""
        for b in blocks:
            self.cache[b] = None

    def _trim(self) -> None:
        """Drop decode-step times no running request can still need (bounded memory)."""
        low = min((r.d_start for r in self.running.values() if r.d_start >= 0), default=self.D)
        if low > self.T_base:
            del self.T[: low - self.T_base]
            self.T_base = low

    # -- state changes ----------------------------------------------------------------------
    def _kv_of(self, r: Request) -> int:
        return r.computed + (self.D - r.d_start if r.d_start >= 0 else 0)

    def _close_segment(self, r: Request) -> None:
        if r.d_start >= 0:
            end = self.D
            r.tokens.extend(self.T[r.d_start - self.T_base : end - self.T_base])
            r.gen += end - r.d_start
            r.d_start = -1
            self.n_decode -= 1

    def _release(self, r: Request) -> None:
        self.kv_used -= self._kv_of(r)
        del self.running[r.idx]
        self.prefilling.pop(r.idx, None)
        r.version += 1

    def _preempt(self, t: int, sink: Sink) -> Request:
        _, r = self.running.popitem()
        self.running[r.idx] = r  # _release deletes it again
        self._release(r)
        self._close_segment(r)
        r.computed = 0
        r.to_prefill = r.prompt + r.gen  # recompute: prompt and generated tokens
        r.n_preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(r)
        self.n_waiting += 1
        sink.on_preempt(t, r)
        return r

    def _finish(self, r: Request, t: int, reason: str, sink: Sink) -> None:
        self._release(r)  # before closing the segment: the KV it frees includes the decodes
        self._close_segment(r)
        r.t_last_token = r.t_end = t
        r.finish_reason = reason
        sink.on_finish(r)

    def abort(self, r: Request, t: int, sink: Sink) -> None:
        """Client timeout: the request stops where it is (finish reason `abort`)."""
        if r.idx in self.running:
            self._release(r)
            self._close_segment(r)
        else:
            r.version += 1  # lazily dropped from the waiting queue
            self.n_waiting -= 1
        r.t_last_token = r.tokens[-1] if r.tokens else None
        r.t_end = t
        r.finish_reason = "abort"
        r.error = "timeout"
        r.status_message = f"client disconnected after {(t - r.t_arrival) / 1e9:g} s"
        sink.on_finish(r)

    # -- one step ---------------------------------------------------------------------------
    def step(self, t: int, sink: Sink) -> int:
        """Run one engine step starting at t; returns its end time."""
        c = self.cfg
        head = self._head()
        while head is not None and self._oversized(head):  # else it is admitted in part,
            self._reject_oversized(head, t, sink)  # preempted and re-admitted forever
            head = self._head()
        chunks: list[tuple[Request, int]] = []
        need = 0
        n_dec = self.n_decode
        prefill_only = False
        if c.chunked_prefill:
            budget = c.max_num_batched_tokens - n_dec
            for r in self.prefilling.values():
                chunk = min(r.to_prefill - r.computed, budget)
                if chunk > 0:
                    chunks.append((r, chunk))
                    budget -= chunk
            need = n_dec + sum(ch for _, ch in chunks)
            while self.running and self.kv_used + need > c.kv_budget_tokens:
                victim = self._preempt(t, sink)
                chunks = [(r, ch) for r, ch in chunks if r is not victim]
                n_dec = self.n_decode
                budget = c.max_num_batched_tokens - n_dec - sum(ch for _, ch in chunks)
                need = n_dec + sum(ch for _, ch in chunks)
            self._admit(t, chunks, budget, need)
        else:
            head = self._head()
            if head is not None and self._fits(head, 0, c.max_num_batched_tokens):
                prefill_only = True
                n_dec = 0
                self._admit(t, chunks, c.max_num_batched_tokens, 0)
            else:
                while self.running and self.kv_used + n_dec > c.kv_budget_tokens:
                    self._preempt(t, sink)
                    n_dec = self.n_decode
        if not chunks and not n_dec:
            head = self._head()
            if head is not None and not self.running:
                self._reject_oversized(head, t, sink)
            return t
        dur, throttled = self._cost(t, n_dec, chunks)
        t_end = t + dur
        if n_dec:
            self.T.append(t_end)
            self.D += 1
            if self.D % TRIM_EVERY == 0:
                self._trim()
            self.kv_used += n_dec
        prompt_done = 0
        sampled = n_dec
        for r, chunk in chunks:
            r.computed += chunk
            self.kv_used += chunk
            if r.computed < r.to_prefill:
                continue
            del self.prefilling[r.idx]
            r.tokens.append(t_end)  # the step that completes a prefill samples a token
            r.gen += 1
            sampled += 1
            if r.t_first_token is None:
                r.t_first_token = t_end
                prompt_done += r.prompt
            if r.gen >= r.output_target:
                self._finish(r, t_end, self._reason(r), sink)
            else:
                r.d_start = self.D
                self.n_decode += 1
                done_at = r.d_start + r.output_target - r.gen
                heapq.heappush(self.heap, (done_at, r.idx, r.version, r))
        while self.heap and self.heap[0][0] <= self.D:
            _, _, version, r = heapq.heappop(self.heap)
            if version == r.version:
                self._finish(r, t_end, self._reason(r), sink)
        self.kv_max = max(self.kv_max, self.kv_used)
        sink.on_step(
            StepInfo(
                t_start=t,
                t_end=t_end,
                prefill_tokens=sum(ch for _, ch in chunks),
                n_decode=n_dec,
                kv_used=self.kv_used,
                running=len(self.running),
                waiting=self.n_waiting,
                prompt_tokens_done=prompt_done,
                tokens_sampled=sampled,
                hit_rate=self.prefix_hit_rate(),
                throttled=throttled,
                prefill_only=prefill_only,
            )
        )
        return t_end

    @staticmethod
    def _reason(r: Request) -> str:
        return "length" if r.gen >= r.max_tokens else "stop"

    def _head(self) -> Request | None:
        while self.waiting and self.waiting[0].finish_reason is not None:
            self.waiting.popleft()
        return self.waiting[0] if self.waiting else None

    def _fits(self, r: Request, need: int, budget: int) -> bool:
        chunk = r.to_prefill if not self.cfg.chunked_prefill else min(r.to_prefill, budget)
        return (
            len(self.running) < self.cfg.max_num_seqs
            and chunk <= budget
            and self.kv_used + need + chunk <= self.cfg.kv_budget_tokens
        )

    def _admit(self, t: int, chunks: list[tuple[Request, int]], budget: int, need: int) -> None:
        c = self.cfg
        while budget > 0 and len(self.running) < c.max_num_seqs:
            r = self._head()
            if r is None or self._oversized(r):  # rejected at the start of the next step
                break
            if not r.looked_up:  # the prefix cache is consulted once, on first scheduling
                r.cached = self._lookup(r)
                r.looked_up = True
            cached = r.cached if r.t_scheduled == 0 else 0  # a recompute starts from scratch
            free = c.kv_budget_tokens - self.kv_used - need - cached
            chunk = min(r.to_prefill - cached, budget, free)
            if chunk <= 0:
                break
            if not c.chunked_prefill and r.to_prefill - cached > min(budget, free):
                break  # without chunked prefill a prompt is prefilled whole or not at all
            if self.kv_used + need + cached + chunk > c.kv_budget_tokens:
                break
            self.waiting.popleft()
            self.n_waiting -= 1
            if r.t_scheduled == 0:
                r.t_scheduled = t
            r.computed = cached
            self.kv_used += cached
            self.running[r.idx] = r
            self.prefilling[r.idx] = r
            chunks.append((r, chunk))
            need += chunk
            budget -= chunk

    def _oversized(self, r: Request) -> bool:
        c = self.cfg
        too_long = not c.chunked_prefill and r.to_prefill > c.max_num_batched_tokens
        return too_long or r.to_prefill + 1 > c.kv_budget_tokens

    def _reject_oversized(self, r: Request, t: int, sink: Sink) -> None:
        """A prompt larger than the whole KV budget can never run: vLLM rejects it."""
        if not self._oversized(r):
            return
        self.waiting.popleft()
        self.n_waiting -= 1
        r.finish_reason = "abort"
        r.error = "ValueError"
        r.status_message = "prompt does not fit in the KV cache"
        r.t_last_token = None
        r.t_end = t
        sink.on_finish(r)


def window_ns(faults: FaultConfig, start_ns: int) -> tuple[int, int] | None:
    """The windowed variant's fault window in ns (`start_ns` + its seconds), or None."""
    if faults.window_s is None:
        return None
    lo, hi = faults.window_s
    return start_ns + round(lo * NS), start_ns + round(hi * NS)


def tokenize_stage(
    arrivals: Iterator[Arrival],
    cfg: EngineConfig,
    faults: FaultConfig,
    seed: int,
    ids: Iterator[str],
) -> Iterator[Request]:
    """The API server: one tokenizer worker, FIFO (a slow tokenizer queues requests)."""
    jitter = rng(seed, "tokenizer")
    free_at = 0
    slow = cfg.tokenize_per_token_s * faults.tokenizer_slowdown
    lo, hi = window_ns(faults, 0) or (-1, 1 << 62)  # relative to the first arrival
    first = None
    for a in arrivals:
        r = Request(a, next(ids))
        if a.rejected:  # longer than the model's context: rejected after tokenization
            r.prompt = r.to_prefill = cfg.max_model_len + a.prompt_tokens
        first = a.t_arrival if first is None else first
        per_token = slow if lo <= a.t_arrival - first < hi else cfg.tokenize_per_token_s
        start = max(a.t_arrival, free_at)
        cost = (cfg.tokenize_base_s + per_token * r.prompt) * (0.9 + 0.2 * jitter.random())
        r.t_tokenized = start + max(1, round(cost * NS))
        free_at = r.t_tokenized
        r.t_queued = r.t_tokenized + round(cfg.ipc_s * NS)
        yield r
