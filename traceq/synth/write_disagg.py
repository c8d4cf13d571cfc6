"""A routed, disaggregated deployment written as its producers trace it
(`traceq synth --convention dynamo|llmd`; docs/SYNTH.md, "Disaggregated deployments").

One gateway, a pool of prefill workers and a pool of decode workers, each a process with its
own OTel resource. The simulated requests (traceq/synth/engine.py) are spread round robin over
the pools by arrival index; each one's prefill runs on a prefill worker, its KV cache crosses
to a decode worker, which streams the answer (traceq/synth/disagg_spans.py, `legs`; each
producer's layers: traceq/synth/disagg_shapes.py). One decode host's clock runs SKEW_NS
ahead, and every LOST_EVERY-th request fails at the gateway before any engine sees it
(`admit`: the engines never simulate it). `labels()` is the ground truth: pools, the skewed
host and its offset, the requests lost and where each served one ran.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import orjson

from traceq.synth.config import Scenario
from traceq.synth.disagg_shapes import (
    DYNAMO_DECODE_AFTER,
    DYNAMO_PREFILL_AT,
    LLMD_DECODE_AFTER,
    LLMD_PREFILL_AT,
    dynamo_lost,
    dynamo_served,
    llmd_lost,
    llmd_served,
)
from traceq.synth.disagg_spans import Hop, Trace, legs, uuid_of
from traceq.synth.request import Request, StepInfo
from traceq.synth.write_conventions import otlp_attr
from traceq.synth.write_otlp import ids

PREFILL_WORKERS = 2
DECODE_WORKERS = 3
SKEWED_DECODE = 1  # the decode worker whose host's clock runs ahead
SKEW_NS = 7_300_413  # several ms, not a round number
LOST_EVERY = 16  # the request of arrival index i fails at the gateway when (i + seed) % 16 == 0
LOST_ERROR = {"dynamo": "503 Service Unavailable", "llmd": "no healthy upstream"}
PRODUCER_NAMES = {"dynamo": "NVIDIA Dynamo", "llmd": "llm-d with vLLM"}
DISAGG_UNSEEN = {
    "prefill-interference": "the prefills run on the prefill workers, beside no decode of "
    "their own (the decode workers' chunk times are still the one simulated engine's)",
    "kv-pressure": "the traces carry no engine stats lines or preemption events",
    "client-jitter": "only the servers' traces are written, no client view",
}
"""Faults of a scenario that a deployment's traces alone cannot show, and why: labels.json
tolerates their playbooks and expects none of them (traceq/synth/faults.py, `absent`)."""
SPANS_PER_LINE = 256  # spans of one process per export request, as a batch processor sends


@dataclass(frozen=True)
class Deployment:
    """The processes of one deployment: instance → (service.name, host.name)."""

    producer: str
    gateway: str
    prefill: tuple[str, ...]
    decode: tuple[str, ...]
    processes: dict[str, tuple[str, str]]
    skewed_host: str

    def skew(self) -> dict[str, int]:
        """Instance → the offset its clock stamps (ns), for the instances on the skewed host."""
        return {i: SKEW_NS for i, (_, host) in self.processes.items() if host == self.skewed_host}

    def address(self, instance: str) -> str:
        """The pod address llm-d's EPP and sidecar name a worker by (`host:port`)."""
        pool = 1 if instance in self.prefill else 2
        k = (self.prefill if pool == 1 else self.decode).index(instance)
        return f"10.0.{pool}.{10 + k}:8000"


def deployment(producer: str) -> Deployment:
    """Dynamo: a frontend and workers that run vLLM in-process. llm-d: the EPP, vLLM pods, and
    in each decode pod the P/D sidecar (same host as its vLLM)."""
    dynamo = producer == "dynamo"
    prefill = tuple(
        f"prefill-worker-{k}" if dynamo else f"prefill-{k}" for k in range(PREFILL_WORKERS)
    )
    decode = tuple(f"decode-worker-{k}" if dynamo else f"decode-{k}" for k in range(DECODE_WORKERS))
    gateway = "frontend-0" if dynamo else "epp-0"
    processes = {
        gateway: ("dynamo-frontend", "frontend-host")
        if dynamo
        else ("llm-d-inference-scheduler/epp", "epp-host")
    }
    for k, p in enumerate(prefill):
        processes[p] = ("dynamo-worker-prefill" if dynamo else "vllm-prefill", f"prefill-host-{k}")
    for k, d in enumerate(decode):
        processes[d] = ("dynamo-worker-decode" if dynamo else "vllm-decode", f"decode-host-{k}")
        if not dynamo:
            processes[f"{d}-sidecar"] = ("llm-d-routing-sidecar", f"decode-host-{k}")
    return Deployment(producer, gateway, prefill, decode, processes, f"decode-host-{SKEWED_DECODE}")


def worker_id(instance: str) -> int:
    """A Dynamo worker's instance id (a 63-bit lease id), stable per instance name."""
    return int(hashlib.blake2b(instance.encode(), digest_size=8).hexdigest(), 16) >> 1


class DisaggWriter:
    """A sink that writes each request's spans across the deployment as OTLP/JSON lines, one
    export request per process and scope batch."""

    def __init__(self, path: Path, producer: str, sc: Scenario, seed: int) -> None:
        self.dep = deployment(producer)
        self.seed = seed
        self.model = sc.engine.model
        self.kv_kib = sc.engine.kv_kib_per_token
        self.fh: BinaryIO = open(path, "wb")  # noqa: SIM115 - closed in close()
        self.batches: dict[tuple[str, str], list[bytes]] = {}
        self.skew = self.dep.skew()
        self.workers = {i: worker_id(i) for i in (*self.dep.prefill, *self.dep.decode)}
        self.routes: dict[str, dict[str, str | None]] = {}
        self.lost: list[dict] = []

    def is_lost(self, r: Request) -> bool:
        return (r.idx + self.seed) % LOST_EVERY == 0

    def admit(self, requests: Iterator[Request]) -> Iterator[Request]:
        """The requests that get past the gateway; the others are written as lost here."""
        for r in requests:
            if not self.is_lost(r):
                yield r
                continue
            h = self._hop(r)
            t = Trace(ids(self.seed, r.idx)[0], self.skew)
            error = LOST_ERROR[self.dep.producer]
            if self.dep.producer == "dynamo":
                dynamo_lost(t, h, r, self.dep.gateway, error)
            else:
                llmd_lost(t, h, r, self.dep.gateway, error)
            self._add(t)
            self.lost.append(
                {"request_id": h.x_request_id, "error": error, "hop": "router", "ts": r.t_arrival}
            )

    def _hop(self, r: Request) -> Hop:
        hexid = r.request_id.removeprefix("cmpl-")[:32]
        return Hop(
            x_request_id=uuid_of(f"{self.seed}:{r.idx}:x-request-id"),
            context_id=f"{hexid[:8]}-{hexid[8:12]}-{hexid[12:16]}-{hexid[16:20]}-{hexid[20:]}",
            prefill=self.dep.prefill[r.idx % len(self.dep.prefill)],
            decode=self.dep.decode[r.idx % len(self.dep.decode)],
            worker_ids=self.workers,
            model=self.model,
        )

    def on_finish(self, r: Request) -> None:
        h = self._hop(r)
        t = Trace(ids(self.seed, r.idx)[0], self.skew)
        if self.dep.producer == "dynamo":
            g = legs(r, DYNAMO_PREFILL_AT, DYNAMO_DECODE_AFTER, self.kv_kib)
            # Dynamo's vLLM handlers give vLLM the request's context id
            rid = h.context_id
        else:
            g = legs(r, LLMD_PREFILL_AT, LLMD_DECODE_AFTER, self.kv_kib)
            rid = f"chatcmpl-{h.x_request_id}"  # vLLM's id from the gateway's x-request-id
        for view in (g.prefill, g.decode):
            if view is not None:
                view.request_id = rid
        if self.dep.producer == "dynamo":
            dynamo_served(t, h, r, g, self.dep.gateway)
        else:
            llmd_served(t, h, r, g, self.dep.gateway, self.dep.address)
        self._add(t)
        self.routes[rid] = {"prefill": h.prefill, "decode": h.decode if g.decode else None}

    def _add(self, t: Trace) -> None:
        for where, spans in t.spans.items():
            batch = self.batches.setdefault(where, [])
            batch += [orjson.dumps(s) for s in spans]
            if len(batch) >= SPANS_PER_LINE:
                self._flush(where)

    def _flush(self, where: tuple[str, str]) -> None:
        spans = self.batches.pop(where, [])
        if not spans:
            return
        instance, scope = where
        service, host = self.dep.processes[instance]
        resource = [
            otlp_attr("service.name", service),
            otlp_attr("service.instance.id", instance),
            otlp_attr("host.name", host),
        ]
        head = orjson.dumps({"resource": {"attributes": resource}, "scope": {"name": scope}})
        self.fh.write(
            b'{"resourceSpans":['
            + head[: head.index(b',"scope"')]
            + b',"scopeSpans":[{"scope":'
            + orjson.dumps({"name": scope})
            + b',"spans":['
            + b",".join(spans)
            + b"]}]}]}\n"
        )

    def on_step(self, s: StepInfo) -> None:
        pass

    def on_preempt(self, t: int, r: Request) -> None:
        pass

    def close(self) -> None:
        for where in sorted(self.batches):
            self._flush(where)
        self.fh.close()

    def labels(self) -> dict:
        """The deployment's ground truth for labels.json (key `disagg`)."""
        dep = self.dep
        skewed = sorted(self.skew)
        return {
            "producer": dep.producer,
            "gateway": dep.gateway,
            "prefill_pool": list(dep.prefill),
            "decode_pool": list(dep.decode),
            "instances": {i: {"service": s, "host": h} for i, (s, h) in dep.processes.items()},
            "assignment": (
                f"round robin by arrival index: prefill pool[i % {len(dep.prefill)}], "
                f"decode pool[i % {len(dep.decode)}]"
            ),
            "skew": {
                "host": dep.skewed_host,
                "instances": skewed,
                "offset_ns": SKEW_NS,
                "offset_ms": SKEW_NS / 1e6,
            },
            "worker_ids": self.workers if dep.producer == "dynamo" else {},
            "served": len(self.routes),
            "lost": len(self.lost),
            "lost_requests": self.lost,
            "requests": self.routes,
        }
