"""Bad token-level span events, per convention: what is quarantined and what is kept.

The event conventions (traceq's `gen_ai.token`, vLLM's `token_scheduled` / `token_generated`,
the proposed `gen_ai.token.scheduled` / `.generated`) get the checks the per-token arrays get
in tokens.py (`from_arrays`), with the same outcome: the request is always kept, only its
token rows are at stake (docs/INGEST.md, the bad-input table under "Producers").

Per event (the event is quarantined, the request's other events kept):
  * a token count that is there but not a positive integer (`gen_ai.token.count`), or a
    `new_token_ids` that is there but not a non-empty array: how many tokens it stands for
    is unknown.

Per request (all its token events are quarantined in one row with the reason; its stamps then
come from the next source: phase spans, engine-core events, `gen_ai.latency.*`):
  * token events on a request whose `completion_tokens` is 0;
  * more tokens in the events than `completion_tokens`;
  * times that run backwards in the order the producer recorded them (each event kind on its
    own: with async scheduling vLLM schedules step n+1 before step n's output is stamped);
  * a time before the span starts (the request's arrival), beyond SPAN_SLACK_NS: a clock
    or trace-id mix-up.

Kept, by design: token times after the span's end (a request aborted or timed out is closed
while its stream still runs; traceq's own generator writes exactly that for its `errors`
scenario, and the tokens are then the better last-token stamp). And *fewer* tokens in the
events than `completion_tokens`: the OpenTelemetry SDK keeps the last 128 events of a span
(OTEL_SPAN_EVENT_COUNT_LIMIT; vLLM's `vllm/v1/engine/observable_context.py` keeps a deque of
that length), so long outputs arrive without their first tokens: the gaps between the events
kept are true gaps, but the first one is not the first token, so the request's first-token
stamp is not taken from them (`truncated_spans`). A `token_generated` without
`new_token_ids` counts as one token (VLLM_TRACE_HIDE_TOKEN_IDS leaves them out on purpose).
"""

from __future__ import annotations

import polars as pl

from traceq.ingest.otel.tokens import GENERATED_EVENTS, SCHEDULED_EVENTS, array_len
from traceq.schema import RAW_LIMIT

# A token time may sit this far outside its span and still count as inside: producers stamp
# the span and the tokens through float64 epoch seconds (`int(t * 1e9)`), which carries
# ~0.24 µs of rounding at today's epoch; 1 µs covers it with room, and is far below any gap.
SPAN_SLACK_NS = 1_000

_QUARANTINE = {"location": pl.String, "reason": pl.String, "raw": pl.String}


def _present(attributes: pl.Expr, key: str) -> pl.Expr:
    return attributes.str.contains(f'"{key}"', literal=True).fill_null(False)


def check_token_events(
    events: pl.DataFrame, spans: pl.DataFrame, token_event: str
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(events kept, quarantine rows, spans whose token events are truncated). The events
    kept gain `ids`: the length of a generated event's `new_token_ids` (from_events uses it).

    `events`: `_span, _line, ts, name, n_tokens, attributes` in recorded order.
    `spans`: `_span, t_start, t_end, completion` (completion_tokens, may be null).
    """
    name, attrs = pl.col("name"), pl.col("attributes")
    is_ours, is_gen = name == token_event, name.is_in(GENERATED_EVENTS)
    is_token = is_ours | is_gen | name.is_in(SCHEDULED_EVENTS)
    token = events.filter(is_token)
    if token.height == 0:
        kept = events.with_columns(ids=pl.lit(None, pl.Int64))
        return kept, pl.DataFrame(schema=_QUARANTINE), pl.DataFrame(schema={"_span": pl.Int64})
    ids = array_len(attrs, "new_token_ids")
    token = token.with_columns(ids=ids).with_columns(
        _row=pl.int_range(pl.len(), dtype=pl.Int64),
        kind=pl.when(is_ours)
        .then(pl.lit("t"))
        .when(is_gen)
        .then(pl.lit("g"))
        .otherwise(pl.lit("s")),
        count=pl.when(is_ours)
        .then(pl.col("n_tokens").fill_null(1))
        .when(is_gen)
        .then(pl.col("ids").fill_null(1))
        .otherwise(0),
        why=pl.when(
            is_ours
            & _present(attrs, "gen_ai.token.count")
            & ~(pl.col("n_tokens") > 0).fill_null(False)
        )
        .then(pl.lit("gen_ai.token.count is not a positive integer"))
        .when(is_gen & _present(attrs, "new_token_ids") & ~(pl.col("ids") > 0).fill_null(False))
        .then(pl.lit("new_token_ids is not a non-empty array")),
    )
    garbled = token.filter(pl.col("why").is_not_null())
    token = token.filter(pl.col("why").is_null())

    # times that run backwards, per span and event kind, in recorded order
    back = pl.concat(
        [
            part.filter(
                (pl.col("ts") < pl.col("ts").shift()) & (pl.col("_span") == pl.col("_span").shift())
            )
            for part in token.partition_by("kind", maintain_order=True)
        ]
    ).select("_span", "_row", "name")
    per_span = (
        token.group_by("_span")
        .agg(
            pl.col("_line").first(),
            n_events=pl.len(),
            tokens=pl.col("count").sum(),
            first_row=pl.col("_row").min(),
            t_min=pl.col("ts").min(),
            t_max=pl.col("ts").max(),
        )
        .join(spans, on="_span", how="left")
        .join(
            back.group_by("_span").agg(
                pl.col("_row").min().alias("back_row"), pl.col("name").first()
            ),
            on="_span",
            how="left",
        )
    )
    completion = pl.col("completion")
    reason = (
        pl.when((completion == 0) & (pl.col("tokens") > 0))
        .then(pl.lit("token events on a request with no output (completion_tokens = 0)"))
        .when(pl.col("tokens") > completion)
        .then(
            pl.format(
                "token events hold {} tokens but completion_tokens is {}", "tokens", completion
            )
        )
        .when(pl.col("back_row").is_not_null())
        .then(
            pl.format(
                "{} event times run backwards at event {}",
                "name",
                pl.col("back_row") - pl.col("first_row"),
            )
        )
        .when(pl.col("t_min") < pl.col("t_start") - SPAN_SLACK_NS)
        .then(
            pl.format(
                "token event {} ns before its span starts", pl.col("t_start") - pl.col("t_min")
            )
        )
    )
    per_span = per_span.with_columns(reason=reason)
    rejected = per_span.filter(pl.col("reason").is_not_null())
    truncated = per_span.filter(
        pl.col("reason").is_null() & (pl.col("tokens") < completion).fill_null(False)
    ).select("_span")
    quarantine = pl.concat(
        [
            garbled.select(
                location=pl.format("line {} span {}", "_line", "_span"),
                reason=pl.format("{} event: {}", "name", "why"),
                raw=attrs.fill_null("").str.slice(0, RAW_LIMIT),
            ),
            rejected.select(
                location=pl.format("line {} span {}", "_line", "_span"),
                reason="reason",
                raw=pl.format("{} token events, {} .. {}", "n_events", "t_min", "t_max"),
            ),
        ]
    )
    dropped = pl.concat(
        [garbled.select("_row"), token.join(rejected.select("_span"), on="_span").select("_row")]
    )
    kept_token = token.join(dropped, on="_row", how="anti").drop("_row", "kind", "count", "why")
    others = events.filter(~is_token).with_columns(ids=pl.lit(None, pl.Int64))
    kept = pl.concat([others, kept_token], how="vertical_relaxed")
    return kept, quarantine, truncated
