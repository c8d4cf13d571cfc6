"""Generated nvidia-smi / dmon / DCGM files in every layout variant, ingested and read back
value for value (tests/gpu_factory.py writes them the way the tools print them)."""

from __future__ import annotations

import gzip
import json

import click
import pytest

import traceq
from tests import gpu_factory as f
from tests.gpu_helpers import ingest_file
from traceq.ingest import gpu
from traceq.ingest.source import Source

NS, T0 = f.NS, f.T0
FIELDS = [
    "timestamp",
    "index",
    "name",
    "uuid",
    "utilization.gpu",
    "utilization.memory",
    "memory.total",
    "memory.used",
    "power.draw",
    "temperature.gpu",
    "clocks.current.sm",
    "clocks.current.memory",
    "pstate",
]


def smi_samples(n: int = 3, gpus: int = 2) -> list[dict]:
    out = []
    for k in range(n):
        for g in range(gpus):
            out.append(
                {
                    "timestamp": T0 + k * NS + 250_000_000,
                    "index": g,
                    "name": "NVIDIA H100 80GB HBM3",
                    "uuid": f"GPU-{g:08d}-aaaa",
                    "utilization.gpu": 10 * k + g,
                    "utilization.memory": 5 * k,
                    "memory.total": 81559,
                    "memory.used": 70000 + k,
                    "power.draw": None if (k, g) == (1, 1) else 412.5 + k,
                    "temperature.gpu": 60 + g,
                    "clocks.current.sm": 1980,
                    "clocks.current.memory": 2619,
                    "pstate": "P0",
                }
            )
    return out


def check_smi(samples, tz_shift_ns: int = 0) -> None:
    assert samples.height == 6
    assert samples["ts"].to_list() == [
        T0 + k * NS + 250_000_000 - tz_shift_ns for k in range(3) for _ in range(2)
    ]
    assert samples["gpu"].to_list() == [0, 1] * 3
    assert samples["util_gpu"].to_list() == [0, 1, 10, 11, 20, 21]
    assert samples["power_w"].to_list() == [412.5, 412.5, 413.5, None, 414.5, 414.5]
    assert samples["fb_used_mib"].to_list() == [70000, 70000, 70001, 70001, 70002, 70002]
    assert set(samples["sm_clock_mhz"]) == {1980}
    assert set(samples["mem_clock_mhz"]) == {2619}
    assert set(samples["pstate"]) == {0}
    assert samples["uuid"][1] == "GPU-00000001-aaaa"


@pytest.mark.parametrize("units", [True, False])
def test_smi_csv_with_header_with_and_without_units(tmp_path, units):
    path = tmp_path / "smi.csv"
    path.write_text(f.smi_csv(smi_samples(), FIELDS, units=units))
    assert gpu.sniff(Source(path)) == "nvidia-smi-csv"
    samples, quarantine, _ = ingest_file(path, tmp_path / "ds")
    check_smi(samples)
    assert quarantine.height == 0


def test_smi_csv_local_time_zone(tmp_path):
    tz = "America/New_York"  # UTC-5 in March before DST
    path = tmp_path / "smi.csv"
    path.write_text(f.smi_csv(smi_samples(), FIELDS, tz=tz))
    samples, _, entry = ingest_file(path, tmp_path / "ds", tz=tz)
    check_smi(samples)
    assert entry["assumptions"]["tz"] == tz
    # read as UTC, the same text lands five hours early
    utc, _, _ = ingest_file(path, tmp_path / "ds2")
    check_smi(utc, tz_shift_ns=5 * 3600 * NS)


def test_smi_csv_noheader_nounits_with_columns_option(tmp_path):
    path = tmp_path / "smi.csv"
    path.write_text(f.smi_csv(smi_samples(), FIELDS, header=False, units=False))
    assert gpu.sniff(Source(path)) == "nvidia-smi-csv"
    samples, quarantine, entry = ingest_file(path, tmp_path / "ds", columns=tuple(FIELDS))
    check_smi(samples)
    assert quarantine.height == 0
    assert "--columns" in entry["assumptions"]["columns"]


def test_smi_csv_custom_header_old_na_and_not_supported(tmp_path):
    fields = ["timestamp", "index", "utilization.gpu", "power.draw", "temperature.gpu"]
    header = "time,gpu_index,gpu_utilization[%],power_draw[W],temperature[°C]"
    samples = [
        {"timestamp": T0, "index": 0, "utilization.gpu": 99, "power.draw": None},
        {"timestamp": T0 + NS, "index": 0, "utilization.gpu": None, "temperature.gpu": 71},
    ]
    text = f.smi_csv(samples, fields, units=False, header_line=header, na="N/A")
    text = text.replace(", N/A\n", ", [Not Supported]\n", 1)
    path = tmp_path / "custom.csv"
    path.write_text(text)
    out, quarantine, _ = ingest_file(path, tmp_path / "ds")
    assert out["util_gpu"].to_list() == [99, None]
    assert out["power_w"].to_list() == [None, None]
    assert out["temp_c"].to_list() == [None, 71]
    assert quarantine.height == 0


def test_smi_csv_units_in_values_are_converted(tmp_path):
    path = tmp_path / "units.csv"
    path.write_text(
        "timestamp, index, memory.used, power.draw, clocks.sm\n"
        "2025/03/01 08:00:00.000, 0, 2 GiB, 350000 mW, 1.5 GHz\n"
    )
    out, _, _ = ingest_file(path, tmp_path / "ds")
    row = out.row(0, named=True)
    assert (row["fb_used_mib"], row["power_w"], row["sm_clock_mhz"]) == (2048, 350, 1500)


def test_smi_csv_without_timestamp_is_numbered_per_gpu(tmp_path):
    fields = [x for x in FIELDS if x != "timestamp"]
    path = tmp_path / "notime.csv"
    path.write_text(f.smi_csv(smi_samples(), fields))
    samples, _, entry = ingest_file(path, tmp_path / "ds", start=T0, interval_s=0.5)
    assert samples.sort("gpu", "ts")["ts"].to_list() == [T0, T0 + NS // 2, T0 + NS] * 2
    assert entry["clock_domain"] == "assumed_interval"


NEW_NAMES = ["gpu", "pwr", "gtemp", "mtemp", "sm", "mem", "enc", "dec", "jpg", "ofa", "mclk"]
NEW_UNITS = ["Idx", "W", "C", "C", "%", "%", "%", "%", "%", "%", "MHz"]


def test_dmon_modern_layout_two_gpus_repeated_headers_and_dashes(tmp_path):
    rows = [
        [g, 300 + k, 50, None if g else 60, 90 - k, 40, 0, 0, 0, 0, 2619]
        for k in range(4)
        for g in (0, 1)
    ]
    path = tmp_path / "dmon.txt"
    path.write_text(f.dmon(NEW_NAMES, NEW_UNITS, rows, repeat_every=2))
    assert gpu.sniff(Source(path)) == "nvidia-smi-dmon"
    samples, quarantine, entry = ingest_file(path, tmp_path / "ds", start=T0)
    assert quarantine.height == 0
    assert entry["header_blocks"] == 4
    by_gpu = samples.sort("gpu", "ts")
    assert by_gpu["ts"].to_list() == [T0 + k * NS for k in range(4)] * 2
    assert by_gpu["power_w"].to_list() == [300, 301, 302, 303] * 2
    assert by_gpu["mem_temp_c"].to_list() == [60] * 4 + [None] * 4
    assert by_gpu["util_gpu"].to_list() == [90, 89, 88, 87] * 2


def test_dmon_old_layout_full_selection(tmp_path):
    names = "gpu pwr temp sm mem enc dec mclk pclk pviol tviol fb bar1 sbecc dbecc pci rxpci txpci"
    units = "Idx W C % % % % MHz MHz % bool MB MB errs errs errs MB/s MB/s"
    rows = [[0, 250, 70, 99, 60, 0, 0, 3505, 1911, 0, 0, 11000, 5, None, None, 0, 100, 2]]
    path = tmp_path / "old.txt"
    path.write_text(f.dmon(names.split(), units.split(), rows))
    samples, _, entry = ingest_file(path, tmp_path / "ds", start=T0)
    row = samples.row(0, named=True)
    assert (row["power_w"], row["temp_c"], row["util_gpu"], row["util_mem"]) == (250, 70, 99, 60)
    assert (row["mem_clock_mhz"], row["sm_clock_mhz"], row["fb_used_mib"]) == (3505, 1911, 11000)
    assert row["pcie_rx_nvml_bps"] == 100 * 2**20
    assert row["pcie_tx_nvml_bps"] == 2 * 2**20
    assert entry["unrecognised"] == {
        f"column:{c}": 1 for c in ("pviol", "tviol", "bar1", "sbecc", "dbecc", "pci")
    }


def test_dmon_with_date_and_time_columns(tmp_path):
    tz = "Asia/Tokyo"  # UTC+9
    names = ["Date", "Time", "gpu", "pwr", "sm"]
    units = ["YYYYMMDD", "HH:MM:SS", "Idx", "W", "%"]
    rows = [["20250301", "17:00:00", 0, 100, 5], ["20250301", "17:00:01", 0, 101, 6]]
    path = tmp_path / "dt.txt"
    path.write_text(f.dmon(names, units, rows))
    samples, _, entry = ingest_file(path, tmp_path / "ds", tz=tz)
    assert samples["ts"].to_list() == [T0, T0 + NS]  # 17:00 JST = 08:00 UTC
    assert samples["util_gpu"].to_list() == [5, 6]
    assert entry["clock_domain"] == "host_local_time"


def gpu_labels(g: int, host: str = "node-1", **extra: str) -> dict[str, str]:
    return {
        "gpu": str(g),
        "UUID": f"GPU-{g}",
        "device": f"nvidia{g}",
        "modelName": "NVIDIA A100-SXM4-80GB",
        "Hostname": host,
        **extra,
    }


def scrape(k: int, *, pod: bool = True, stamps: bool = False) -> list[tuple]:
    """Scrape k of two GPUs (GPU 0 has a pod, GPU 1 does not) and a MIG instance."""
    pod_labels = {"namespace": "llm", "pod": "vllm-0", "container": "vllm"} if pod else {}
    series = []
    for g in (0, 1):
        labs = gpu_labels(g, **(pod_labels if g == 0 else {}))
        series += [
            ("DCGM_FI_DEV_GPU_UTIL", labs, 50 + k + g),
            ("DCGM_FI_PROF_SM_ACTIVE", labs, f"{0.5 + k / 100:.6f}"),
            ("DCGM_FI_DEV_PCIE_TX_THROUGHPUT", labs, 1000 * k * (g + 1)),
            ("DCGM_FI_PROF_PCIE_TX_BYTES", labs, 123456),
        ]
    mig = gpu_labels(2, GPU_I_PROFILE="1g.10gb", GPU_I_ID="7")
    series.append(("DCGM_FI_PROF_GR_ENGINE_ACTIVE", mig, "0.250000"))
    if stamps:
        series = [(*s, (T0 + k * 5 * NS) // 1_000_000 + 1) for s in series]  # type: ignore[misc]
    return series


def check_multi_scrape(samples, step_ns: int, offset_ns: int = 0) -> None:
    gpu0 = samples.filter((samples["gpu"] == 0) & samples["mig_instance"].is_null())
    gpu1 = samples.filter((samples["gpu"] == 1) & samples["mig_instance"].is_null())
    mig = samples.filter(samples["mig_instance"] == 7)
    assert samples.height == 9  # 3 scrapes × (2 GPUs + 1 MIG instance)
    assert gpu0["ts"].to_list() == [T0 + k * step_ns + offset_ns for k in range(3)]
    assert gpu0["util_gpu"].to_list() == [50, 51, 52]
    assert gpu1["util_gpu"].to_list() == [51, 52, 53]
    assert gpu0["sm_active"].to_list() == [0.5, 0.51, 0.52]
    assert gpu0["pcie_tx_bps"].to_list() == [123456] * 3  # PROF rate as printed
    # DEV counter (KB) → rate: +1000 KB per scrape on GPU 0, +2000 KB on GPU 1
    assert gpu0["pcie_tx_nvml_bps"].to_list() == [None, 1000 * 1024 * NS / step_ns] * 1 + [
        1000 * 1024 * NS / step_ns
    ]
    assert gpu1["pcie_tx_nvml_bps"][2] == 2000 * 1024 * NS / step_ns
    assert set(gpu0["pod"]) == {"vllm-0"} and set(gpu1["pod"]) == {None}
    assert set(gpu0["namespace"]) == {"llm"}
    assert mig["mig_profile"].to_list() == ["1g.10gb"] * 3
    assert mig["entity"].to_list() == ["GPU-I"] * 3
    assert mig["gr_engine_active"].to_list() == [0.25] * 3


@pytest.mark.parametrize("separator", ["# ts={iso}", "# {iso}", "{iso}", "# ts={epoch}"])
def test_multi_scrape_file_with_timestamp_lines(tmp_path, separator):
    parts = []
    for k in range(3):
        ts = T0 + k * 5 * NS
        parts.append(separator.format(iso=f.iso(ts), epoch=ts // NS))
        parts.append(f.exposition(scrape(k), help_type=k == 0))
    path = tmp_path / "scrapes.prom"
    path.write_text("\n".join(parts))
    assert gpu.sniff(Source(path)) == "dcgm-prom"
    samples, quarantine, entry = ingest_file(path, tmp_path / "ds")
    check_multi_scrape(samples, 5 * NS)
    assert quarantine.height == 0
    assert entry["scrapes"] == 3
    assert entry["clock_domain"] == "unix_ns"


def test_multi_scrape_with_exposition_timestamps_and_gzip(tmp_path):
    text = "".join(f.exposition(scrape(k, stamps=True), help_type=False) for k in range(3))
    path = tmp_path / "scrapes.prom.gz"
    path.write_bytes(gzip.compress(text.encode()))
    samples, _, entry = ingest_file(path, tmp_path / "ds")
    check_multi_scrape(samples, 5 * NS, offset_ns=1_000_000)
    assert entry["clock_domain"] == "unix_ns"


def test_concatenated_scrapes_without_timestamps_use_start_and_interval(tmp_path):
    text = "".join(f.exposition(scrape(k), help_type=True) for k in range(3))
    path = tmp_path / "scrapes.prom"
    path.write_text(text)
    samples, _, entry = ingest_file(path, tmp_path / "ds", start=T0, interval_s=15)
    check_multi_scrape(samples, 15 * NS)
    assert entry["assumptions"]["interval_s"] == 15


def test_vgpu_model_name_is_kept(tmp_path):
    labs = gpu_labels(0) | {"modelName": "GRID A100-40C", "vgpu": "1"}
    path = tmp_path / "vgpu.prom"
    path.write_text(f.exposition([("DCGM_FI_DEV_FB_USED", labs, 1024)], help_type=False))
    samples, _, entry = ingest_file(path, tmp_path / "ds", start=T0)
    assert samples["model_name"].to_list() == ["GRID A100-40C"]
    assert samples["fb_used_mib"].to_list() == [1024]
    assert entry["unrecognised"] == {"label:vgpu": 1}


def matrix_series(job: str) -> list:
    util = {"__name__": "DCGM_FI_DEV_GPU_UTIL", "job": job, "instance": f"{job}:9400"}
    dram = {"__name__": "DCGM_FI_PROF_DRAM_ACTIVE", "job": job, "instance": f"{job}:9400"}
    t = T0 / NS
    return [
        (gpu_labels(0) | util, [(t, "10"), (t + 30, "20"), (t + 60.5, "NaN")]),
        (gpu_labels(0) | dram, [(t, "0.5"), (t + 30, "0.25"), (t + 60.5, "0.125")]),
    ]


def test_prom_json_matrix_two_jobs_dedupe(tmp_path):
    path = tmp_path / "range.json"
    path.write_text(f.prom_matrix(matrix_series("dcgm-exporter") + matrix_series("gpu-metrics")))
    assert gpu.sniff(Source(path)) == "prom-json"
    samples, quarantine, entry = ingest_file(path, tmp_path / "ds")
    assert samples["ts"].to_list() == [T0, T0 + 30 * NS, T0 + 60_500_000_000]
    assert samples["util_gpu"].to_list() == [10, 20, None]
    assert samples["dram_active"].to_list() == [0.5, 0.25, 0.125]
    assert set(samples["host"]) == {"node-1"}
    assert entry["duplicate_values"] == 6
    assert entry["nan_values"] == 2
    assert quarantine.height == 0


def test_prom_json_instant_vector_and_vllm_gauges(tmp_path):
    t = T0 / NS
    vllm = {"engine": "0", "model_name": "llama", "instance": "vllm-0:8000", "job": "vllm"}
    series = [
        (gpu_labels(1) | {"__name__": "DCGM_FI_DEV_POWER_USAGE"}, (t, "350.5")),
        (vllm | {"__name__": "vllm:num_requests_running"}, (t, "64")),
        (vllm | {"__name__": "vllm:num_requests_waiting"}, (t, "3")),
        (vllm | {"__name__": "vllm:kv_cache_usage_perc"}, (t, "0.875")),
        (vllm | {"__name__": "vllm:prompt_tokens_total"}, (t, "12345")),
    ]
    path = tmp_path / "instant.jsonl"
    path.write_text(f.prom_vector(series[:1]) + "\n" + f.prom_vector(series[1:]) + "\n")
    samples, _, entry = ingest_file(path, tmp_path / "ds")
    assert samples.select("ts", "gpu", "power_w").rows() == [(T0, 1, 350.5)]
    stats = traceq.open(tmp_path / "ds").sql("SELECT * FROM engine_stats").pl()
    row = stats.row(0, named=True)
    assert (row["ts"], row["instance"], row["engine"]) == (T0, "vllm-0", 0)
    assert (row["running"], row["waiting"], row["kv_usage"]) == (64, 3, 0.875)
    assert row["prompt_tps"] is None  # a single sample of a counter gives no rate
    assert entry["unrecognised"] == {}


def test_prom_json_vllm_token_counters_become_rates(tmp_path):
    t = T0 / NS
    vllm = {"engine": "0", "instance": "vllm-0:8000"}
    gen = vllm | {"__name__": "vllm:generation_tokens_total"}
    prompt = vllm | {"__name__": "vllm:prompt_tokens_total"}
    path = tmp_path / "range.json"
    path.write_text(
        f.prom_matrix(
            [
                (gen, [(t, "1000"), (t + 15, "2500"), (t + 30, "100")]),  # reset at t+30
                (prompt, [(t, "0"), (t + 15, "30000"), (t + 30, "30000")]),
            ]
        )
    )
    ingest_file(path, tmp_path / "ds")
    stats = traceq.open(tmp_path / "ds").sql("SELECT * FROM engine_stats ORDER BY ts").pl()
    assert stats["gen_tps"].to_list() == [None, 100.0, None]
    assert stats["prompt_tps"].to_list() == [None, 2000.0, 0.0]


def test_dcgmi_dmon_generated_fields_interval_mig_and_annotations(tmp_path):
    names = ["SMACT", "DRAMA", "POWER", "TXTPT", "PCITX", "SMCLK"]
    rows = []
    for k in range(3):
        for ent in ("GPU 1", "GPU 0", "GPU-I 3"):
            tx = f"{1_000_000_000 * (k + 1)}(0.93GB/s)" if ent == "GPU 0" else "N/A"
            rows.append(
                (ent, [f"{0.1 * (k + 1):.3f}", "0.400", "300.12", str(100 * k), tx, "1980"])
            )
    path = tmp_path / "dcgmi.txt"
    path.write_text(f.dcgmi("dcgmi dmon -e 1002,1005,155,200,1009,100 -d 500", names, rows))
    samples, quarantine, entry = ingest_file(path, tmp_path / "ds", start=T0)
    assert quarantine.height == 0
    assert samples.height == 9
    gpu0 = samples.filter(samples["gpu"] == 0)
    assert gpu0["ts"].to_list() == [T0, T0 + NS // 2, T0 + NS]  # -d 500 ms from the file
    assert gpu0["sm_active"].to_list() == [0.1, 0.2, 0.3]
    assert gpu0["pcie_tx_bps"].to_list() == [1e9, 2e9, 3e9]  # annotation dropped
    assert gpu0["pcie_tx_nvml_bps"].to_list() == [None, 100 * 1024 * 2, 100 * 1024 * 2]
    mig = samples.filter(samples["entity"] == "GPU-I")
    assert mig["mig_instance"].to_list() == [3, 3, 3] and set(mig["gpu"]) == {None}
    assert entry["assumptions"]["interval_s"] == 0.5
    assert "-d" in entry["assumptions"]["interval_from"]


def test_cli_ingest_with_start_interval_and_format(tmp_path):
    from click.testing import CliRunner

    from traceq.cli import cli

    path = tmp_path / "dmon.log"
    rows = [[0, 100 + k, 50, 50, 10, 10, 0, 0, 0, 0, 1500] for k in range(3)]
    path.write_text(f.dmon(NEW_NAMES, NEW_UNITS, rows))
    ds = tmp_path / "ds"
    args = ["ingest", str(path), "-o", str(ds), "--format", "nvidia-smi-dmon"]
    args += ["--start", "2025-03-01T17:00:00", "--tz", "Asia/Tokyo", "--interval", "2"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "nvidia-smi-dmon: 3 gpu_samples" in result.output
    ts = traceq.open(ds).sql("SELECT ts FROM gpu_samples ORDER BY ts").pl()["ts"].to_list()
    assert ts == [T0, T0 + 2 * NS, T0 + 4 * NS]
    manifest = json.loads((ds / "manifest.json").read_text())
    assert manifest["sources"][0]["assumptions"]["start_ns"] == T0


def test_dmon_time_only_takes_the_date_from_start(tmp_path):
    names, units = ["Time", "gpu", "pwr"], ["HH:MM:SS", "Idx", "W"]
    path = tmp_path / "t.txt"
    path.write_text(f.dmon(names, units, [["08:00:00", 0, 100], ["08:00:05", 0, 101]]))
    samples, _, entry = ingest_file(path, tmp_path / "ds", start=T0 - 3600 * NS)
    assert samples["ts"].to_list() == [T0, T0 + 5 * NS]
    assert entry["assumptions"]["date"] == "date of --start"


def test_smi_csv_repeated_field_keeps_the_first(tmp_path):
    path = tmp_path / "power.csv"
    path.write_text(
        "timestamp, index, power.draw [W], power.draw.instant [W]\n"
        "2025/03/01 08:00:00.000, 0, 300.00 W, 350.00 W\n"
    )
    samples, quarantine, entry = ingest_file(path, tmp_path / "ds")
    assert samples["power_w"].to_list() == [300]
    assert entry["unrecognised"] == {"column:power.draw.instant": 1}
    assert quarantine.height == 0


@pytest.mark.parametrize(
    ("start", "expected"),
    [("2025-03-01T08:00:00Z", T0), (str(T0), T0), ("2025-03-01 09:00:00.5+01:00", T0 + NS // 2)],
)
def test_cli_start_accepts_iso_and_ns(tmp_path, start, expected):
    from click.testing import CliRunner

    from traceq.cli import cli

    path = tmp_path / "dcgmi.txt"
    path.write_text(f.dcgmi("dcgmi dmon -e 203", ["GPUTL"], [("GPU 0", ["5"])]))
    result = CliRunner().invoke(
        cli, ["ingest", str(path), "-o", str(tmp_path / "ds"), "--start", start]
    )
    assert result.exit_code == 0, result.output
    ts = traceq.open(tmp_path / "ds").sql("SELECT ts FROM gpu_samples").fetchall()
    assert ts == [(expected,)]


def test_cli_rejects_a_bad_start_and_interval(tmp_path):
    from traceq.cli import cli

    path = tmp_path / "dcgmi.txt"
    path.write_text(f.dcgmi("dcgmi dmon -e 203", ["GPUTL"], [("GPU 0", ["5"])]))
    base = ["ingest", str(path), "-o", str(tmp_path / "ds")]
    for extra, message in [
        (["--start", "yesterday"], "--start 'yesterday'"),
        (["--interval", "0"], "--interval must be positive"),
    ]:
        with pytest.raises(click.ClickException, match=message):
            cli.main([*base, *extra], standalone_mode=False)
