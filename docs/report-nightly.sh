#!/usr/bin/env bash
# Nightly health report and regression gate (docs/REPORT.md).
#
#   docs/report-nightly.sh RUN_DIR [STATE_DIR]
#
# RUN_DIR   last night's load-test output: vLLM bench / AIPerf exports, server logs, OTLP
#           traces, GPU samples (anything `traceq formats` lists; directories recurse).
# STATE_DIR where datasets, reports and the baseline history live (default: ./nightly).
#
# Writes STATE_DIR/reports/DATE.html, compares with STATE_DIR/baselines/main.json (the
# accepted baseline), saves tonight's run to STATE_DIR/history/DATE.json, prints the trend of
# the main KPIs over the last 14 runs, and exits 1 when a KPI regressed (0 otherwise, 2 on bad
# input). Promote a run to the baseline by copying its history file to baselines/main.json.
set -euo pipefail

run_dir=${1:?usage: $0 RUN_DIR [STATE_DIR]}
state=${2:-nightly}
date=${NIGHTLY_DATE:-$(date -u +%F)}
slo=${TRACEQ_SLO:-ttft_ms=2000,tpot_ms=100}
price=${TRACEQ_GPU_HOUR_PRICE:-2.0}

mkdir -p "$state/datasets" "$state/reports" "$state/history" "$state/baselines"
dataset="$state/datasets/$date.tq"

traceq ingest "$run_dir" -o "$dataset"

args=(report "$dataset" -o "$state/reports/$date.html" --save-baseline "$state/history/$date.json"
      --slo "$slo" --gpu-hour-price "$price")
if [[ -f "$state/baselines/main.json" ]]; then
    args+=(--baseline "$state/baselines/main.json" --fail-on-regression)
else
    echo "no $state/baselines/main.json yet: tonight's run becomes the baseline"
    cp_first=1
fi
[[ -f "$state/thresholds.yaml" ]] && args+=(--thresholds "$state/thresholds.yaml")

status=0
traceq "${args[@]}" || status=$?
if [[ $status -eq 2 ]]; then
    exit 2
fi
if [[ ${cp_first:-0} -eq 1 ]]; then
    cp "$state/history/$date.json" "$state/baselines/main.json"
fi

echo
echo "trend of the main KPIs (last 14 runs):"
traceq report --trend "$state/history" --last 14
exit "$status"
