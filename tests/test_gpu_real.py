"""Every real GPU telemetry sample (tests/data/real/gpu, see PROVENANCE.md) ingests with the
right row count (GPUs × samples), values and units read from chosen lines."""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.gpu_helpers import NS, REAL, ingest_file
from traceq.ingest import gpu
from traceq.ingest.source import Source

CSV = REAL / "nvidia-smi_query-gpu_noheader_nounits_A5000_custom_header.csv"
DMON = REAL / "nvidia-smi_dmon_s_pucvmet_jpg_ofa_doc_example.txt"
T4 = REAL / "dcgm_exporter_metrics_T4_loaded_ericsson_ccd.prom"
L4 = REAL / "dcgm_exporter_metrics_L4_idle_kops_aws.prom"
K8S = REAL / "dcgm_exporter_metrics_RTX4000Ada_k8s_pod_labels_linode_lke.prom"
DCGMI = REAL / "dcgmi_dmon_h800_pcie_nvlink_1009-1012_llm-action.txt"
DCGMI_GROUP = REAL / "dcgmi_dmon_h800_group_pcie_nvlink_llm-action.txt"
START = int(datetime(2025, 6, 1, 12, 0, tzinfo=UTC).timestamp()) * NS


def utc_ns(*parts: int, ms: int = 0) -> int:
    return int(datetime(*parts, tzinfo=UTC).timestamp()) * NS + ms * 1_000_000  # type: ignore[misc,arg-type]


@pytest.mark.parametrize(
    ("path", "fmt", "rows"),
    [
        (CSV, "nvidia-smi-csv", 22),
        (DMON, "nvidia-smi-dmon", 4),
        (T4, "dcgm-prom", 1),
        (L4, "dcgm-prom", 1),
        (K8S, "dcgm-prom", 1),
        (DCGMI, "dcgmi-dmon", 5),
        (DCGMI_GROUP, "dcgmi-dmon", 7),
    ],
)
def test_every_real_sample_is_detected_and_ingested(tmp_path, path, fmt, rows):
    assert gpu.sniff(Source(path)) == fmt
    samples, quarantine, entry = ingest_file(path, tmp_path / "ds")
    assert entry["format"] == fmt
    assert samples.height == rows
    assert quarantine.height == 0
    assert entry["rows"]["gpu_samples"] == rows


def test_vllm_scrape_is_not_claimed_by_the_gpu_sniffers():
    assert gpu.sniff(Source(REAL / "vllm_v1_metrics_scrape_vllm_docs_excerpt.prom")) is None


def test_query_csv_custom_header_values_units_and_local_time(tmp_path):
    samples, _, entry = ingest_file(CSV, tmp_path / "utc")
    first = samples.row(0, named=True)
    # line 2: 2025/05/25 00:13:19.084, 0, NVIDIA RTX A5000, 10, 24564, 11325, 12909, 72
    assert first["ts"] == utc_ns(2025, 5, 25, 0, 13, 19, ms=84)
    assert (first["gpu"], first["model_name"], first["util_gpu"]) == (0, "NVIDIA RTX A5000", 10)
    assert (first["fb_total_mib"], first["fb_used_mib"], first["fb_free_mib"]) == (
        24564,
        11325,
        12909,
    )
    assert first["temp_c"] == 72
    # line 9: 2025/05/25 00:13:26.204, 0, NVIDIA RTX A5000, 57, 24564, 12396, 11838, 72
    row = samples.row(7, named=True)
    assert (row["util_gpu"], row["fb_used_mib"]) == (57, 12396)
    assert entry["clock_domain"] == "host_local_time"
    assert entry["assumptions"]["tz"] == "UTC"
    # the same file read as Berlin time (CEST, UTC+2) lands two hours earlier
    berlin, _, entry = ingest_file(CSV, tmp_path / "berlin", tz="Europe/Berlin")
    assert berlin["ts"][0] == first["ts"] - 2 * 3600 * NS
    assert entry["assumptions"]["tz"] == "Europe/Berlin"


def test_dmon_doc_example_columns_and_clock_from_options(tmp_path):
    samples, _, entry = ingest_file(DMON, tmp_path / "ds", start=START, interval_s=2.0)
    # row 1: 0   165     44     41    18     6     0     0     0     0  2619  1410
    first = samples.row(0, named=True)
    assert first["gpu"] == 0
    assert (first["power_w"], first["temp_c"], first["mem_temp_c"]) == (165, 44, 41)
    assert (first["util_gpu"], first["util_mem"], first["util_jpg"], first["util_ofa"]) == (
        18,
        6,
        0,
        0,
    )
    assert (first["mem_clock_mhz"], first["sm_clock_mhz"]) == (2619, 1410)
    assert samples["ts"].to_list() == [START + k * 2 * NS for k in range(4)]
    assert samples["util_gpu"].to_list() == [18, 17, 19, 16]
    assert entry["clock_domain"] == "assumed_interval"
    assert entry["assumptions"]["start_from"] == "--start"
    assert entry["assumptions"]["interval_s"] == 2.0


def test_dmon_without_start_puts_the_last_sample_at_the_file_mtime(tmp_path):
    copy = shutil.copy(DMON, tmp_path / "dmon.txt")
    os.utime(copy, ns=(START, START))
    samples, _, entry = ingest_file(Path(copy), tmp_path / "ds")
    assert samples["ts"].to_list() == [START - k * NS for k in (3, 2, 1, 0)]
    assert "mtime" in entry["assumptions"]["start_from"]
    assert entry["assumptions"]["interval_from"] == "tool default (1 s)"


def test_t4_scrape_keeps_dev_percent_and_prof_ratios_apart(tmp_path):
    samples, _, entry = ingest_file(T4, tmp_path / "ds", start=START)
    row = samples.row(0, named=True)
    assert row["ts"] == START
    assert (row["util_gpu"], row["util_mem"]) == (91, 73)  # DEV_*_UTIL stay percent
    assert row["gr_engine_active"] == 0.156205  # PROF_* stay ratios
    assert row["tensor_active"] == 0.005822
    assert row["dram_active"] == 0.092781
    assert row["power_w"] == 68.244
    assert (row["pcie_tx_bps"], row["pcie_rx_bps"]) == (4791810, 6935930)
    assert row["pcie_tx_nvml_bps"] is None  # no DEV_PCIE counter in this scrape
    assert (row["sm_clock_mhz"], row["mem_clock_mhz"], row["temp_c"]) == (660, 5000, 74)
    assert (row["fb_used_mib"], row["fb_free_mib"], row["fb_reserved_mib"]) == (5120, 9791, 447)
    assert row["energy_mj"] == 15152422938
    assert (row["host"], row["gpu"], row["model_name"]) == ("cp-bm14r7", 0, "Tesla T4")
    assert row["uuid"] == "GPU-6d5c0ac5-74d7-3130-46f1-e93ed57f469a"
    assert (row["pci_bus_id"], row["driver_version"]) == ("00000000:37:00.0", "590.48.01")
    assert row["entity"] == "GPU"
    assert entry["unrecognised"] == {
        "metric:DCGM_FI_DEV_VGPU_LICENSE_STATUS": 1,
        "metric:DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 1,
    }
    assert entry["assumptions"]["start_from"] == "--start"


def test_single_scrape_without_start_is_timed_by_the_file_mtime(tmp_path):
    copy = shutil.copy(L4, tmp_path / "l4.prom")
    os.utime(copy, ns=(START, START))
    samples, _, entry = ingest_file(Path(copy), tmp_path / "ds")
    row = samples.row(0, named=True)
    assert row["ts"] == START
    assert (row["power_w"], row["pcie_tx_bps"], row["gr_engine_active"]) == (16.365, 112603, 0)
    assert row["mem_temp_c"] == 0  # unsupported on L4: DCGM prints 0, kept as printed
    assert entry["clock_domain"] == "assumed_interval"
    assert "mtime" in entry["assumptions"]["start_from"]


def test_k8s_pod_labels_are_kept(tmp_path):
    samples, _, entry = ingest_file(K8S, tmp_path / "ds", start=START)
    row = samples.row(0, named=True)
    assert (row["pod"], row["namespace"], row["container"]) == (
        "cuda-75454ffb9f-8ljq7",
        "default",
        "cuda",
    )
    assert row["host"] == "lke529760-766837-0a634ab30000"
    assert row["model_name"] == "NVIDIA RTX 4000 Ada Generation"
    assert row["xid"] == 0  # the XID series carries extra err_code / err_msg labels
    assert (row["pcie_tx_bps"], row["pcie_rx_bps"]) == (78398480, 45987793)
    assert row["dram_active"] == 0.003074
    assert not [k for k in entry["unrecognised"] if k.startswith("label:")]


def test_dcgmi_dmon_warm_up_rows_are_null_then_rates(tmp_path):
    samples, _, entry = ingest_file(DCGMI, tmp_path / "ds", start=START)
    assert samples["gpu"].to_list() == [0] * 5
    assert samples["ts"].to_list() == [START + k * NS for k in range(5)]
    assert samples["pcie_tx_bps"].to_list() == [None, None, 498948, 449138, 548740]
    assert samples["pcie_rx_bps"].to_list() == [None, None, 1555, 2074, 1555]
    assert samples["nvlink_tx_bps"].to_list() == [None, None, 0, 0, 0]
    assert entry["unrecognised"] == {"command line": 1}


def test_dcgmi_group_output_numbers_samples_per_gpu(tmp_path):
    samples, _, _ = ingest_file(DCGMI_GROUP, tmp_path / "ds", start=START)
    gpu7 = samples.filter(samples["gpu"] == 7)
    gpu0 = samples.filter(samples["gpu"] == 0)
    assert gpu7["ts"].to_list() == [START + k * NS for k in range(4)]
    assert gpu0["ts"].to_list() == [START + k * NS for k in range(3)]
    assert gpu7["pcie_tx_bps"].to_list() == [None, None, 499346, 499343]
    assert gpu0["pcie_rx_bps"].to_list() == [None, None, 2074]
