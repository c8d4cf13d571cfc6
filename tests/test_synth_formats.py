"""The generated vLLM log, nvidia-smi CSV and DCGM scrapes are in the producers' own formats:
the regexes that parse the real samples (tests/data/real) parse every generated line, with
the same fields.

These tests pin the line formats; tests/test_synth_ingest_roundtrip.py reads the generated
files back through the vLLM-log and GPU ingesters.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from traceq.synth import FILES, generate

REAL = Path(__file__).parent / "data" / "real"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
PREFIX = re.compile(
    r"^(?:\((?P<proc>[^)]*)\) )*(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) "
    r"(?P<mmdd>\d{2}-\d{2}) (?P<time>\d{2}:\d{2}:\d{2})(?:\.\d+)? "
    r"\[?(?P<file>[\w./-]+):(?P<line>\d+)\] (?P<msg>.*)$"
)
STATS = re.compile(
    r"(?:Engine (?P<engine>\d{3}): )?(?:Avg prompt throughput: (?P<prompt_tps>[\d.]+) tokens/s, "
    r"Avg generation throughput: (?P<gen_tps>[\d.]+) tokens/s|Throughput: (?P<tps>[\d.]+) "
    r"tokens/s), Running: (?P<running>\d+) reqs(?:, Swapped: (?P<swapped>\d+) reqs)?(?:, "
    r"(?:Pending|Waiting): (?P<waiting>\d+) reqs)?(?:, GPU KV cache usage: (?P<gpu_kv>[\d.]+)%)?"
    r"(?:, CPU KV cache usage: (?P<cpu_kv>[\d.]+)%)?(?:, Prefix cache hit rate: "
    r"(?P<prefix_hit>[\d.]+)%)?(?:, External prefix cache hit rate: (?P<ext_prefix_hit>[\d.]+)%)?"
    r"(?:, MM cache hit rate: (?P<mm_hit>[\d.]+)%)?\.?\s*$"
)
RECEIVED = re.compile(
    r"Received request (?P<req>\S+): (?:prompt: (?P<prompt>'.*?'|None), )?(?:sampling_)?params: "
    r"(?P<params>.*?), (?:prompt_token_ids: (?P<ids>\[.*?\]|None), )?"
    r"(?:num_prompt_tokens: (?P<nptok>\d+), )?(?:prompt_embeds shape: \S+, )?lora_request: .*$"
)
LIFECYCLE = re.compile(r"(?:Added|Finished|Aborted) request (?P<req>\S+)\.$")
UVICORN = re.compile(
    r'^(?:\([^)]*\) )?INFO:     (?:\S+ - "(?P<method>\w+) (?P<path>\S+) HTTP/1\.1" '
    r"(?P<status>\d{3}) .*|Started server process \[\d+\]|Waiting for application "
    r"startup\.|Application startup complete\.)$"
)
STARTUP = {
    "kv_tokens": re.compile(r"GPU KV cache size: (?P<tok>[\d,]+) tokens"),
    "concurrency": re.compile(
        r"Maximum concurrency for (?P<len>[\d,]+) tokens per request: (?P<x>[\d.]+)x"
    ),
    "graphs": re.compile(
        r"Graph capturing finished in (?P<s>\d+) secs(?:, took (?P<gib>[\d.]+) GiB)?"
    ),
    "init": re.compile(
        r"init engine \(profile, create kv cache, warmup model\) took (?P<s>[\d.]+) seconds"
    ),
    "weights": re.compile(
        r"Model loading took (?P<gib>[\d.]+) (?:GiB|GB)(?: and (?P<s>[\d.]+) seconds)?"
    ),
}
PROM = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+"
    r"(?P<value>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|NaN|[+-]?Inf))(?:\s+(?P<ts>-?\d+))?$"
)
PROM_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
SMI_VALUE = re.compile(r"^(?P<num>-?\d+(?:\.\d+)?)\s*(?P<unit>%|MiB|W|MHz|C)?$")


def _engine_lines(text: str) -> list[re.Match]:
    return [m for line in text.splitlines() if (m := PREFIX.match(ANSI.sub("", line)))]


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth")
    for name in ("healthy", "errors", "kv-pressure"):
        generate(name, out / name, seed=4)
    return out


def test_real_samples_parse_with_these_regexes():
    """The regexes are the real samples' parsers: pin that before trusting them on ours."""
    stats = REAL / "vllm" / "vllm_v1_0.10.1.1_stats_10conc_1k_4k_A100_dennislee22_excerpt.log"
    lines = _engine_lines(stats.read_text())
    assert len(lines) == 8
    m = STATS.search(lines[0]["msg"])
    assert m and m["gen_tps"] == "238.7" and m["gpu_kv"] == "4.1" and m["prefix_hit"] == "53.7"
    startup = (
        REAL / "vllm" / "vllm_v1_0.10.1.1_startup_gpuutil0.25_A100_dennislee22.log"
    ).read_text()
    found = {k: r.search(startup) for k, r in STARTUP.items()}
    assert found["kv_tokens"]["tok"] == "93,872" and found["graphs"]["gib"] == "0.50"
    req = (REAL / "vllm").glob("vllm_v1_0.8.5post1_*.log")
    text = next(iter(req)).read_text()
    received = [m for m in _engine_lines(text) if RECEIVED.search(m["msg"])]
    added = [m for m in _engine_lines(text) if LIFECYCLE.search(m["msg"])]
    assert len(received) == len(added) == 5
    dcgm = (REAL / "gpu" / "dcgm_exporter_metrics_T4_loaded_ericsson_ccd.prom").read_text()
    samples = [PROM.match(x) for x in dcgm.splitlines() if x and not x.startswith("#")]
    assert all(samples) and {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_DRAM_ACTIVE"} <= {
        m["name"] for m in samples
    }


def test_generated_vllm_log_lines_all_parse(generated):
    for name in ("healthy", "errors", "kv-pressure"):
        text = (generated / name / FILES["vllm_log"]).read_text()
        for line in text.splitlines():
            m = PREFIX.match(line)
            assert m or UVICORN.match(line) or line.startswith("INFO "), line[:120]
            if m and "loggers.py:123" in m["file"] + ":" + m["line"]:
                assert STATS.search(m["msg"]), line
        assert "\r" not in text and "\x1b" not in text


def test_generated_vllm_log_values_match_the_run(generated):
    import orjson

    labels = orjson.loads((generated / "healthy" / FILES["labels"]).read_bytes())
    text = (generated / "healthy" / FILES["vllm_log"]).read_text()
    lines = _engine_lines(text)
    stats = [
        STATS.search(m["msg"]) for m in lines if m["file"] == "loggers.py" and m["line"] == "123"
    ]
    assert stats and all(stats)
    assert len(stats) == labels["truth"]["stats_lines"]
    # Generation throughput × 10 s adds up to every token generated (to the 0.1 printed).
    gen = sum(float(s["gen_tps"]) for s in stats) * 10
    assert gen == pytest.approx(labels["truth"]["output_tokens"], abs=len(stats))
    received = [RECEIVED.search(m["msg"]) for m in lines if "Received request" in m["msg"]]
    assert len(received) == labels["truth"]["requests"]
    n_prompt = sum(len(r["ids"].split(",")) for r in received)
    assert n_prompt == labels["truth"]["prompt_tokens"]
    found = {k: r.search(text) for k, r in STARTUP.items()}
    assert found["kv_tokens"]["tok"] == f"{labels['engine']['kv_budget_tokens']:,}"
    assert all(found.values())
    # Times are MM-DD HH:MM:SS in UTC, never decreasing.
    stamps = [(m["mmdd"], m["time"]) for m in lines]
    assert stamps == sorted(stamps)


def test_errors_scenario_prints_400s_and_aborts(generated):
    text = (generated / "errors" / FILES["vllm_log"]).read_text()
    statuses = [m["status"] for x in text.splitlines() if (m := UVICORN.match(x)) and m["status"]]
    assert statuses.count("400") >= 1 and statuses.count("200") >= 50
    aborted = [m for m in _engine_lines(text) if m["msg"].startswith("Aborted request")]
    assert aborted and all(LIFECYCLE.search(m["msg"]) for m in aborted)


def test_kv_pressure_log_shows_saturated_kv_and_waiting(generated):
    text = (generated / "kv-pressure" / FILES["vllm_log"]).read_text()
    stats = [STATS.search(m["msg"]) for m in _engine_lines(text) if "Engine 000: Avg" in m["msg"]]
    assert max(float(s["gpu_kv"]) for s in stats) > 90.0
    assert max(int(s["waiting"]) for s in stats) > 5


def test_generated_nvidia_smi_csv(generated):
    lines = (generated / "healthy" / FILES["nvidia_smi"]).read_text().splitlines()
    header = lines[0].split(", ")
    assert header[0] == "timestamp" and "utilization.gpu [%]" in header
    assert "power.draw [W]" in header and "temperature.gpu" in header
    for line in lines[1:]:
        values = line.split(", ")
        assert len(values) == len(header)
        assert re.fullmatch(r"\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}\.\d{3}", values[0])
        assert values[2] == "NVIDIA H100 80GB HBM3" and values[3].startswith("GPU-")
        for v in values[4:]:
            assert SMI_VALUE.match(v), v
    utils = [int(x.split(", ")[4].split()[0]) for x in lines[1:]]
    assert max(utils) > 50 and min(utils) == 0  # busy while serving, idle before


def test_generated_dcgm_scrapes(generated):
    text = (generated / "healthy" / FILES["dcgm"]).read_text()
    blocks = text.split("# ts=")[1:]
    assert len(blocks) > 5
    for block in blocks:
        rows = [x for x in block.splitlines()[1:] if not x.startswith("#")]
        assert len(rows) == 15
        for row in rows:
            m = PROM.match(row)
            assert m and m["ts"], row
            labels = dict(PROM_LABEL.findall(m["labels"]))
            assert list(labels) == [
                "gpu",
                "UUID",
                "pci_bus_id",
                "device",
                "modelName",
                "Hostname",
                "DCGM_FI_DRIVER_VERSION",
            ]
            if m["name"].startswith("DCGM_FI_PROF_") and "PCIE" not in m["name"]:
                assert 0.0 <= float(m["value"]) <= 1.0 and len(m["value"].split(".")[1]) == 6
    # HELP / TYPE texts are the exporter's own (as in the real L4 scrape).
    real = (REAL / "gpu" / "dcgm_exporter_metrics_L4_idle_kops_aws.prom").read_text()
    real_help = {x for x in real.splitlines() if x.startswith("# HELP")}
    ours = {x for x in text.splitlines() if x.startswith("# HELP")}
    shared = {x.split()[2] for x in real_help} & {x.split()[2] for x in ours}
    assert len(shared) >= 10
    assert {x for x in ours if x.split()[2] in shared} <= real_help


def test_expected_engine_stats_match_the_printed_lines(tmp_path):
    """The truth frame handed to the vLLM-log round trip equals what the regex reads back."""
    import calendar

    from traceq.synth import scenario
    from traceq.synth.sim import plan, simulate
    from traceq.synth.write_vllm_log import VllmLogWriter, expected_engine_stats

    sc = scenario("kv-pressure")
    info, _ = plan(sc, 9)
    log = VllmLogWriter(tmp_path / "v.log", sc, 9, info.t_ready, sc.engine.kv_budget_tokens)
    info = simulate(sc, 9, [log])
    log.close(info.t_end)
    want = expected_engine_stats(log.stats)
    rows = []
    for m in _engine_lines((tmp_path / "v.log").read_text()):
        if (s := STATS.search(m["msg"])) and m["file"] == "loggers.py":
            mm, dd = m["mmdd"].split("-")
            hh, mi, ss = m["time"].split(":")
            ts = calendar.timegm((2025, int(mm), int(dd), int(hh), int(mi), int(ss)))
            rows.append(
                (
                    ts * 10**9,
                    int(s["engine"]),
                    float(s["prompt_tps"]),
                    float(s["gen_tps"]),
                    int(s["running"]),
                    int(s["waiting"]),
                    float(s["gpu_kv"]) / 100,
                    float(s["prefix_hit"]) / 100,
                )
            )
    assert rows == list(want.iter_rows())
    assert max(r[6] for r in rows) == 1.0  # the preemption storm holds the KV cache full


def test_expected_log_requests_match_the_received_lines(tmp_path):
    import calendar

    from traceq.synth import scenario
    from traceq.synth.sim import plan, simulate
    from traceq.synth.write_vllm_log import VllmLogWriter, expected_log_requests

    sc = scenario("errors")
    info, _ = plan(sc, 2)
    log = VllmLogWriter(tmp_path / "v.log", sc, 2, info.t_ready, sc.engine.kv_budget_tokens)
    info = simulate(sc, 2, [log])
    log.close(info.t_end)
    want = expected_log_requests(log.received)
    rows = []
    for m in _engine_lines((tmp_path / "v.log").read_text()):
        if r := RECEIVED.search(m["msg"]):
            mm, dd = m["mmdd"].split("-")
            hh, mi, ss = m["time"].split(":")
            ts = calendar.timegm((2025, int(mm), int(dd), int(hh), int(mi), int(ss)))
            max_tokens = int(re.search(r"max_tokens=(\d+)", r["params"])[1])
            rows.append((r["req"], ts * 10**9, len(r["ids"].split(", ")), max_tokens))
    assert rows == list(want.iter_rows())
    assert len(rows) == 64 - sum(
        1 for x in (tmp_path / "v.log").read_text().splitlines() if x.endswith("400 Bad Request")
    )


def test_gpu_throttle_shows_in_clocks_only_inside_its_window(tmp_path):
    import calendar

    import orjson

    generate("gpu-throttle", tmp_path, seed=6)
    labels = orjson.loads((tmp_path / FILES["labels"]).read_bytes())
    (fault,) = labels["faults"]
    lo, hi = (fault["windows"][0][k] // 10**9 for k in ("start", "end"))
    inside, outside = set(), set()
    for line in (tmp_path / FILES["nvidia_smi"]).read_text().splitlines()[1:]:
        v = line.split(", ")
        sec = calendar.timegm((*map(int, re.split(r"[/ :.]", v[0])[:6]), 0, 0, 0))
        clock = int(v[-1].split()[0])
        if lo + 1 <= sec < hi:
            inside.add(clock)
        elif not lo - 1 <= sec <= hi:  # a step across an edge throttles its boundary seconds
            outside.add(clock)
    assert inside <= {1095, 345} and 1095 in inside  # busy seconds throttled, idle ones idle
    assert 1095 not in outside and 1980 in outside
