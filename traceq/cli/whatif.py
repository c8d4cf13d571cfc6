"""`traceq whatif`: capacity and settings predicted from one run's traces (traceq/whatif/,
docs/WHATIF.md).

Exit codes: 0 ok (a low-confidence prediction included: it says so), 2 usage or input error
(an unknown or out-of-range --set, a dataset without chunk timing or engine limits)."""

from __future__ import annotations

import click
import orjson

from traceq.cli.common import Failure
from traceq.cli.report import parse_slo
from traceq.slo import DEFAULT_GPU_HOUR_USD


@click.command("whatif")
@click.argument("dataset")
@click.option("--rate", "rates", multiple=True, type=click.FloatRange(min=0, min_open=True),
              metavar="RPS", help="Replay at this arrival rate, req/s (repeatable).")  # fmt: skip
@click.option("--set", "pairs", multiple=True, metavar="K=V", help="Replay with this engine "
              "setting (repeatable): max_num_seqs, max_num_batched_tokens, chunked_prefill, "
              "prefix_caching, kv_cache_tokens, replicas.")  # fmt: skip
@click.option("--slo", help="Per-request SLO, e.g. ttft_ms=1000,tpot_ms=50 "
              "[default: ttft_ms=2000,tpot_ms=100].")  # fmt: skip
@click.option("--attainment", type=click.FloatRange(min=0, max=1, min_open=True), default=0.95,
              show_default=True,
              help="Share of requests that must meet the SLO (--max-rate, "
              "--target-rate).")  # fmt: skip
@click.option("--max-rate", "find_max_rate", is_flag=True,
              help="Search the highest rate meeting the SLO at --attainment.")  # fmt: skip
@click.option("--target-rate", type=click.FloatRange(min=0, min_open=True), default=None,
              metavar="RPS", help="The replicas and GPUs this arrival rate needs at the SLO "
              "and --attainment (and with 20 % headroom).")  # fmt: skip
@click.option("--gpu-hour-price", type=click.FloatRange(min=0, min_open=True), default=None,
              help="USD per GPU-hour for the cost per 1 M tokens [default: 2.0].")  # fmt: skip
@click.option("--format", "out_format", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Output format.")  # fmt: skip
@click.option("--memory-limit", default=None, help="DuckDB memory limit; beyond it queries "
              "spill to disk [default: 512MB].")  # fmt: skip
def whatif_cmd(
    dataset: str,
    rates: tuple[float, ...],
    pairs: tuple[str, ...],
    slo: str | None,
    attainment: float,
    find_max_rate: bool,
    target_rate: float | None,
    gpu_hour_price: float | None,
    out_format: str,
    memory_limit: str | None,
) -> None:
    """Calibrate the engine model from DATASET, back-test it on the run, and predict other
    rates and settings.

    \b
    traceq whatif run.tq --rate 4 --rate 8
    traceq whatif run.tq --set max_num_seqs=96 --rate 9
    traceq whatif run.tq --max-rate --slo ttft_ms=1000 --attainment 0.95 --format json
    traceq whatif run.tq --target-rate 120 --slo ttft_ms=1000
    """
    from traceq.session import QueryError, Session
    from traceq.whatif import SettingError, WhatIfInputError, parse_settings, whatif
    from traceq.whatif.predict import MEMORY_LIMIT
    from traceq.whatif.render import render_text

    try:
        settings = parse_settings(pairs)
    except SettingError as exc:
        raise Failure(str(exc)) from exc
    try:
        with Session(dataset, memory_limit=memory_limit or MEMORY_LIMIT) as session:
            result = whatif(
                session,
                rates=rates,
                settings=settings,
                slo=parse_slo(slo),
                attainment=attainment,
                find_max_rate=find_max_rate,
                target_rate=target_rate,
                gpu_hour_usd=gpu_hour_price or DEFAULT_GPU_HOUR_USD,
                dataset=dataset,
            )
    except (QueryError, SettingError, WhatIfInputError) as exc:
        raise Failure(str(exc)) from exc
    if out_format == "json":
        click.echo(orjson.dumps(result.to_dict(), option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo(render_text(result), nl=False)


__all__ = ["whatif_cmd"]
