"""GPU telemetry derived from the engine's steps: an `nvidia-smi --query-gpu … --format=csv
-l 1` file and a dcgm-exporter multi-scrape file, as in tests/data/real/gpu.

Each second the engine's busy time, and how much of it was compute-bound prefill rather
than bandwidth-bound decode, set the activities: SM / tensor activity follow prefill, DRAM
activity follows decode; power follows activity; clocks drop in a throttling window. Memory
in use is flat: vLLM preallocates `gpu_memory_utilization` of the frame buffer at startup.

nvidia-smi line shape (header units in brackets, values with units, `, ` separators,
`YYYY/MM/DD HH:MM:SS.mmm` local time) and the dcgm-exporter exposition lines (label order,
6-decimal PROF ratios and power, HELP texts) are copied from the real samples.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import BinaryIO

from traceq.synth.arrivals import rng
from traceq.synth.config import EngineConfig
from traceq.synth.engine import NS, Request, StepInfo

SMI_QUERY = (
    "timestamp,index,name,uuid,utilization.gpu,utilization.memory,memory.used,memory.total,"
    "power.draw,temperature.gpu,clocks.current.sm"
)
SMI_HEADER = (
    "timestamp, index, name, uuid, utilization.gpu [%], utilization.memory [%], "
    "memory.used [MiB], memory.total [MiB], power.draw [W], temperature.gpu, "
    "clocks.current.sm [MHz]"
)
DCGM_EVERY_S = 15  # a common Prometheus scrape interval
IDLE_CLOCK_MHZ = 345
DRIVER = "570.133.20"
_DCGM = (  # name, type, HELP (dcgm-exporter default-counters / dcp-metrics-included)
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    (
        "DCGM_FI_PROF_SM_ACTIVE",
        "gauge",
        "The ratio of cycles an SM has at least 1 warp assigned (in %).",
    ),
    (
        "DCGM_FI_PROF_SM_OCCUPANCY",
        "gauge",
        "The ratio of number of warps resident on an SM (in %).",
    ),
    (
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "gauge",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
    ),
    (
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
    ),
    (
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "gauge",
        "The rate of data transmitted over the PCIe bus - "
        "including both protocol headers and data payloads - in bytes per second.",
    ),
    (
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "gauge",
        "The rate of data received over the PCIe bus - "
        "including both protocol headers and data payloads - in bytes per second.",
    ),
)


class GpuWriter:
    """A sink that bins engine steps per second and writes nvidia-smi CSV and DCGM scrapes."""

    def __init__(
        self,
        smi_path: Path,
        dcgm_path: Path,
        cfg: EngineConfig,
        seed: int,
        t0: int,
        throttle_clock_mhz: int,
    ) -> None:
        self.cfg = cfg
        self.smi: BinaryIO = open(smi_path, "wb")  # noqa: SIM115 - closed in close()
        self.dcgm: BinaryIO = open(dcgm_path, "wb")  # noqa: SIM115
        self.noise = rng(seed, "gpu")
        # one UUID per GPU of the engine (tensor parallel: every rank steps together)
        uuid_rng = rng(seed, "gpu-uuid")
        self.uuids = ["GPU-" + _uuid(uuid_rng) for _ in range(cfg.tensor_parallel_size)]
        self.throttle_clock = throttle_clock_mhz
        self.sec = t0 // NS  # next second to write
        self.bins: dict[int, list[float]] = {}  # second → [busy, prefill busy, throttled, tokens]
        self.fb_used = round(cfg.fb_total_mib * cfg.gpu_memory_utilization) - 1024
        self.temp = 38.0
        self.window: list[list[float]] = []
        self.smi.write((SMI_HEADER + "\n").encode())

    def on_step(self, s: StepInfo) -> None:
        dur = s.t_end - s.t_start
        prefill_s = self.cfg.prefill_per_token_s * s.prefill_tokens * NS
        share = min(1.0, prefill_s / dur) if dur else 0.0
        t = s.t_start
        while t < s.t_end:  # spread the step over the seconds it covers
            sec = t // NS
            part = min(s.t_end, (sec + 1) * NS) - t
            b = self.bins.setdefault(sec, [0.0, 0.0, 0.0, 0.0])
            b[0] += part
            b[1] += part * share
            b[2] = max(b[2], float(s.throttled))
            b[3] += s.prefill_tokens * part / dur
            t += part
        self._write_until(s.t_start // NS)

    def on_finish(self, r: Request) -> None:
        pass

    def on_preempt(self, t: int, r: Request) -> None:
        pass

    def _sample(self, sec: int) -> dict:
        busy, pre, throttled, tokens = self.bins.pop(sec, [0.0, 0.0, 0.0, 0.0])
        c = self.cfg
        u = min(1.0, busy / NS)
        p = pre / busy if busy else 0.0
        jitter = 1.0 + (self.noise.random() - 0.5) * 0.04
        sm = min(1.0, u * (0.35 + 0.6 * p) * jitter)
        dram = min(0.95, u * (0.3 + 0.5 * (1 - p)) * jitter)
        tensor = min(1.0, u * (0.08 + 0.55 * p) * jitter)
        power = c.idle_w + (c.tdp_w - c.idle_w) * min(1.0, 0.15 * u + 0.6 * sm + 0.35 * dram)
        clock = IDLE_CLOCK_MHZ if u < 0.01 else c.sm_clock_mhz
        if throttled:
            clock = self.throttle_clock
            power = min(power, 0.55 * c.tdp_w)
        self.temp += (30 + 45 * power / c.tdp_w - self.temp) * 0.08
        return {
            "ts": sec * NS + 84_000_000 + self.noise.randrange(40) * 1_000_000,
            "util_gpu": round(u * 100),
            "util_mem": round(dram * 100),
            "fb_used_mib": self.fb_used,
            "power_w": round(power, 2),
            "temp_c": round(self.temp),
            "sm_clock_mhz": clock,
            "sm_active": round(sm, 6),
            "sm_occupancy": round(sm * 0.42, 6),
            "tensor_active": round(tensor, 6),
            "dram_active": round(dram, 6),
            "pcie_rx_bps": round(2.0e6 + tokens * 8.0),
            "pcie_tx_bps": round(1.5e6 + u * 4.0e6),
        }

    def _write_until(self, sec_end: int) -> None:
        out = []
        while self.sec < sec_end:
            row = self._sample(self.sec)
            out += [self._smi_line(row, i) for i in range(len(self.uuids))]
            self.window.append(
                [
                    row[k]
                    for k in (
                        "util_gpu",
                        "util_mem",
                        "power_w",
                        "sm_active",
                        "sm_occupancy",
                        "tensor_active",
                        "dram_active",
                        "pcie_tx_bps",
                        "pcie_rx_bps",
                        "temp_c",
                    )
                ]
            )
            if (self.sec + 1) % DCGM_EVERY_S == 0:
                self._scrape((self.sec + 1) * NS, row)
            self.sec += 1
        if out:
            self.smi.write("".join(out).encode())

    def _smi_line(self, row: dict, gpu: int) -> str:
        ts = row["ts"] + gpu * 1_000_000  # nvidia-smi reads the GPUs one after another
        ms = (ts // 1_000_000) % 1000
        when = time.strftime("%Y/%m/%d %H:%M:%S", time.gmtime(ts // NS)) + f".{ms:03d}"
        c = self.cfg
        return (
            f"{when}, {gpu}, {c.gpu_name}, {self.uuids[gpu]}, {row['util_gpu']} %, "
            f"{row['util_mem']} %, "
            f"{row['fb_used_mib']} MiB, {c.fb_total_mib} MiB, {row['power_w']:.2f} W, "
            f"{row['temp_c']}, {row['sm_clock_mhz']} MHz\n"
        )

    def _scrape(self, t: int, last: dict) -> None:
        """One dcgm-exporter scrape: a `# ts=` line, then HELP / TYPE and one sample each,
        with the exposition-format millisecond timestamp; gauges averaged over the window."""
        n = len(self.window)
        avg = [sum(col) / n for col in zip(*self.window, strict=True)]
        self.window = []
        util, mem, power, sm, occ, tensor, dram, tx, rx, _temp = avg
        c = self.cfg
        values = {
            "DCGM_FI_DEV_SM_CLOCK": str(last["sm_clock_mhz"]),
            "DCGM_FI_DEV_MEM_CLOCK": "2619",
            "DCGM_FI_DEV_GPU_TEMP": str(last["temp_c"]),
            "DCGM_FI_DEV_POWER_USAGE": f"{power:.6f}",
            "DCGM_FI_DEV_GPU_UTIL": str(round(util)),
            "DCGM_FI_DEV_MEM_COPY_UTIL": str(round(mem)),
            "DCGM_FI_DEV_FB_FREE": str(c.fb_total_mib - self.fb_used - 542),
            "DCGM_FI_DEV_FB_USED": str(self.fb_used),
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": f"{min(1.0, util / 100):.6f}",
            "DCGM_FI_PROF_SM_ACTIVE": f"{sm:.6f}",
            "DCGM_FI_PROF_SM_OCCUPANCY": f"{occ:.6f}",
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": f"{tensor:.6f}",
            "DCGM_FI_PROF_DRAM_ACTIVE": f"{dram:.6f}",
            "DCGM_FI_PROF_PCIE_TX_BYTES": str(round(tx)),
            "DCGM_FI_PROF_PCIE_RX_BYTES": str(round(rx)),
        }
        labels = [
            f'gpu="{i}",UUID="{uuid}",pci_bus_id="00000000:{0x18 + i:02X}:00.0",'
            f'device="nvidia{i}",modelName="{c.gpu_name}",Hostname="{c.host}",'
            f'DCGM_FI_DRIVER_VERSION="{DRIVER}"'
            for i, uuid in enumerate(self.uuids)
        ]
        iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t // NS)) + "Z"
        ms = t // 1_000_000
        out = [f"# ts={iso}"]
        for name, kind, doc in _DCGM:
            out += [f"# HELP {name} {doc}", f"# TYPE {name} {kind}"]
            out += [f"{name}{{{label}}} {values[name]} {ms}" for label in labels]
        self.dcgm.write(("\n".join(out) + "\n").encode())

    def close(self, t_end: int) -> None:
        self._write_until(t_end // NS + 3)
        self.smi.close()
        self.dcgm.close()


def _uuid(r: object) -> str:
    h = f"{r.getrandbits(128):032x}"  # type: ignore[attr-defined]
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
