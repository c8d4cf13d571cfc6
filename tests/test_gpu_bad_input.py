"""Broken GPU telemetry: every record ends in gpu_samples or quarantine, nothing raises."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests import gpu_factory as f
from tests.gpu_helpers import REAL, ingest_file
from traceq.ingest import IngestOptions, InputError, ingest

NS, T0 = f.NS, f.T0


def test_scrape_cut_in_the_middle_of_a_line(tmp_path):
    text = (REAL / "dcgm_exporter_metrics_T4_loaded_ericsson_ccd.prom").read_text()
    cut = text[: text.index('DCGM_FI_PROF_PCIE_RX_BYTES{gpu="0",UUID="GPU-6d5c') + 40]
    path = tmp_path / "cut.prom"
    path.write_text(cut)  # no trailing newline: the exporter died mid-write
    samples, quarantine, _ = ingest_file(path, tmp_path / "ds", start=T0)
    assert samples.height == 1
    assert samples["pcie_tx_bps"].to_list() == [4791810]
    assert samples["pcie_rx_bps"].to_list() == [None]
    assert quarantine["location"].to_list() == ["line 20"]
    assert "cut or malformed" in quarantine["reason"][0]
    assert quarantine["raw"][0].startswith("DCGM_FI_PROF_PCIE_RX_BYTES{")


def test_csv_with_a_column_added_half_way(tmp_path):
    path = tmp_path / "grow.csv"
    path.write_text(
        "timestamp, index, utilization.gpu [%]\n"
        "2025/03/01 08:00:00.000, 0, 10 %\n"
        "2025/03/01 08:00:01.000, 0, 11 %, 300.00 W\n"  # column added, header not yet
        "timestamp, index, utilization.gpu [%], power.draw [W]\n"
        "2025/03/01 08:00:02.000, 0, 12 %, 301.50 W\n"
    )
    samples, quarantine, entry = ingest_file(path, tmp_path / "ds")
    assert samples["ts"].to_list() == [T0, T0 + 2 * NS]
    assert samples["util_gpu"].to_list() == [10, 12]
    assert samples["power_w"].to_list() == [None, 301.5]
    assert quarantine.select("location", "reason").rows() == [
        ("line 3", "4 fields, the header has 3")
    ]
    assert entry["header_blocks"] == 2


def test_empty_dmon_block_and_stray_row(tmp_path):
    names, units = ["gpu", "pwr", "sm"], ["Idx", "W", "%"]
    block = f.dmon(names, units, [])
    rows = f.dmon(names, units, [[0, 100, 5], [0, 101, 6]])
    path = tmp_path / "dmon.txt"
    path.write_text("    0    99\n" + block + rows + "    0   102    7   9\n")
    samples, quarantine, entry = ingest_file(path, tmp_path / "ds", start=T0)
    assert samples["power_w"].to_list() == [100, 101]
    assert entry["empty_blocks"] == 1
    assert quarantine.select("location", "reason").rows() == [
        ("line 1", "dmon row before any header"),
        ("line 8", "4 fields, the header has 3"),
    ]


def test_nan_and_out_of_range_values(tmp_path):
    labs = {"gpu": "0", "UUID": "GPU-0", "Hostname": "h"}
    series = [
        ("DCGM_FI_DEV_GPU_UTIL", labs, "250"),  # a utilisation of 250 %
        ("DCGM_FI_PROF_SM_ACTIVE", labs, "1.700000"),  # a ratio above 1
        ("DCGM_FI_PROF_DRAM_ACTIVE", labs, "NaN"),
        ("DCGM_FI_DEV_POWER_USAGE", labs, "+Inf"),
        ("DCGM_FI_DEV_SM_CLOCK", labs, "1410"),
    ]
    path = tmp_path / "bad.prom"
    path.write_text(f.exposition(series, help_type=False))
    samples, quarantine, entry = ingest_file(path, tmp_path / "ds", start=T0)
    row = samples.row(0, named=True)
    assert (row["util_gpu"], row["sm_active"], row["dram_active"], row["power_w"]) == (
        None,
        None,
        None,
        None,
    )
    assert row["sm_clock_mhz"] == 1410
    assert quarantine["location"].to_list() == ["line 1", "line 2", "line 4"]
    assert quarantine["reason"][0] == "value out of range: util_gpu=250.0 outside [0.0, 100.0]"
    assert entry["nan_values"] == 1


def test_csv_bad_values_out_of_range_and_bad_timestamp(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text(
        "timestamp, index, utilization.gpu [%], memory.used [MiB]\n"
        "2025/03/01 08:00:00.000, 0, 250 %, 100 MiB\n"
        "2025/03/01 08:00:01.000, 0, abc, 100 MiB\n"
        "yesterday, 0, 5 %, 100 MiB\n"
        "2025/03/01 08:00:02.000, 0, NaN, 100 furlongs\n"
    )
    samples, quarantine, _ = ingest_file(path, tmp_path / "ds")
    assert samples["util_gpu"].to_list() == [None, None, None]
    assert samples["fb_used_mib"].to_list() == [100, 100, None]
    assert quarantine.select("location", "reason").rows() == [
        ("line 2", "value out of range: util_gpu=250.0 outside [0.0, 100.0]"),
        ("line 3", "bad utilization.gpu value: abc"),
        ("line 4", "unreadable timestamp"),
        ("line 5", "bad memory.used value: 100 furlongs"),
    ]


def test_headerless_csv_without_columns_is_quarantined_not_guessed(tmp_path):
    path = tmp_path / "noheader.csv"
    path.write_text("2025/03/01 08:00:00.000, 0, 10\n2025/03/01 08:00:01.000, 0, 11\n")
    samples, quarantine, _ = ingest_file(path, tmp_path / "ds")
    assert samples.height == 0
    assert quarantine.height == 2
    assert "--columns" in quarantine["reason"][0]


def test_dcgmi_garbage_and_short_rows(tmp_path):
    text = f.dcgmi("dcgmi dmon -e 203", ["GPUTL"], [("GPU 0", ["12"]), ("GPU 0", ["x7"])])
    path = tmp_path / "dcgmi.txt"
    path.write_text(text + "Error: lost connection to host engine\nGPU 0\n")
    samples, quarantine, _ = ingest_file(path, tmp_path / "ds", start=T0)
    assert samples["util_gpu"].to_list() == [12, None]
    assert sorted(quarantine["reason"].to_list()) == [
        "bad GPUTL value: x7",
        "not a dcgmi dmon line",
        "not a dcgmi dmon line",
    ]


def test_prom_json_error_response_and_broken_line(tmp_path):
    ok = f.prom_vector([({"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0"}, (T0 / NS, "5"))])
    error = '{"status":"error","errorType":"timeout","error":"query timed out","resultType":1}'
    path = tmp_path / "mixed.json"
    path.write_text(ok + "\n" + error + "\n" + '{"status":"success","data":{"resultType":"ve\n')
    samples, quarantine, _ = ingest_file(path, tmp_path / "ds", fmt="prom-json")
    assert samples["util_gpu"].to_list() == [5]
    assert quarantine["location"].to_list() == ["document 1", "line 3"]
    assert quarantine["reason"][0] == "Prometheus error: query timed out"


def test_unknown_time_zone_is_a_clear_input_error(tmp_path):
    path = REAL / "nvidia-smi_query-gpu_noheader_nounits_A5000_custom_header.csv"
    with pytest.raises(InputError, match="unknown time zone"):
        ingest([path], tmp_path / "ds", options=IngestOptions(tz="Mars/Olympus"))


def test_csv_nan_cells_are_null_not_out_of_range(tmp_path):
    path = tmp_path / "nan.csv"
    path.write_text(
        "timestamp, index, utilization.gpu [%]\n"
        "2025/03/01 08:00:00.000, 0, NaN\n"
        "2025/03/01 08:00:01.000, 0, 7 %\n"
    )
    samples, quarantine, _ = ingest_file(path, tmp_path / "ds")
    assert samples["util_gpu"].to_list() == [None, 7]
    assert quarantine.height == 0


def test_truncated_gzip_scrapes_keep_what_decompressed(tmp_path):
    import gzip
    import random

    rng = random.Random(4)
    parts = []
    for k in range(20000):
        parts.append(f"# ts={f.iso(T0 + k * NS)}")
        labs = {"gpu": "0", "UUID": "GPU-0", "Hostname": "h", "pad": f"{rng.random():.12f}"}
        parts.append(f.exposition([("DCGM_FI_DEV_GPU_UTIL", labs, k % 100)], help_type=False))
    data = gzip.compress("\n".join(parts).encode(), compresslevel=1)
    path = tmp_path / "cut.prom.gz"
    path.write_bytes(data[: len(data) * 2 // 3])
    samples, quarantine, _ = ingest_file(path, tmp_path / "ds")
    assert 0 < samples.height < 20000
    assert samples["util_gpu"].to_list() == [k % 100 for k in range(samples.height)]
    assert any("corrupt or truncated" in r for r in quarantine["reason"])


def test_local_times_around_dst_changes(tmp_path):
    path = tmp_path / "dst.csv"
    path.write_text(
        "timestamp, index, utilization.gpu [%]\n"
        "2025/03/30 02:30:00.000, 0, 1 %\n"  # skipped by Berlin's spring-forward
        "2025/10/26 02:30:00.000, 0, 2 %\n"  # happens twice at the fall-back
    )
    samples, quarantine, _ = ingest_file(path, tmp_path / "ds", tz="Europe/Berlin")
    # the repeated hour is read as its first instant (still CEST, UTC+2)
    assert samples["ts"].to_list() == [
        int(datetime(2025, 10, 26, 0, 30, tzinfo=UTC).timestamp()) * NS
    ]
    assert quarantine.select("location", "reason").rows() == [("line 2", "unreadable timestamp")]
