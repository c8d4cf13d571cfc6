-- The rollups of one source's chunks, written when its `tokens` are laid out
-- (traceq/layout_rollups.py; tables request_gaps and gap_buckets, docs/SCHEMA.md). Each piece
-- of the `tokens` sort (layout_tokens_piece.sql) holds whole request rows (every chunk of a
-- request id and view has the same first-chunk time), so the per-request figures are taken
-- one piece at a time, from the piece's file as it was written (`_piece_tokens`): the state
-- of the grouped pass is that of one piece (at most TOKENS_PIECE_ROWS chunks), never the
-- file's. The figures are those traceq/sql/rollups.sql (_request_gaps) and
-- traceq/sql/views.sql (_tbt_stats) compute from the same chunks at query time.
-- 1. The per-bucket counts of the pieces so far (a few thousand rows a piece).
CREATE OR REPLACE TEMP TABLE _gap_buckets_pieces (
    source_id VARCHAR,
    view VARCHAR,
    bucket BIGINT,
    n BIGINT,
    lo_ns BIGINT,
    hi_ns BIGINT,
    sum_ns HUGEINT
);
-- 2. One piece's request rows, to the piece's file ($path): _request_gaps's figures over the
-- piece's chunks of each request id and view (tbt_ms is gap_ns / 1e6 there too).
COPY (
    SELECT
        request_id,
        source_id,
        view,
        n_gaps,
        tbt_q[1] AS tbt_p50_ms,
        tbt_q[2] AS tbt_p99_ms,
        tbt_max_ms,
        t_first,
        t_last,
        long_gaps
    FROM (
        SELECT
            request_id,
            source_id,
            view,
            count(gap_ns) AS n_gaps,
            quantile_cont(gap_ns / 1e6, [0.5, 0.99]) AS tbt_q,
            max(gap_ns / 1e6) AS tbt_max_ms,
            min(ts) AS t_first,
            max(ts) AS t_last,
            list({'ts': ts, 'tbt_ns': gap_ns} ORDER BY idx, ts) FILTER (WHERE gap_ns >= 100000000)
                AS long_gaps
        FROM _piece_tokens
        GROUP BY request_id, source_id, view
    )
) TO $path (FORMAT parquet, COMPRESSION zstd);
-- 3. One piece's bucket counts (_tbt_stats's histogram; _gap_bucket: gap_bucket.sql).
INSERT INTO _gap_buckets_pieces
SELECT
    source_id,
    view,
    CASE WHEN gap_ns < 0 THEN -1 - _gap_bucket(-gap_ns) ELSE _gap_bucket(gap_ns) END AS bucket,
    count(*),
    min(gap_ns),
    max(gap_ns),
    sum(gap_ns)
FROM _piece_tokens
WHERE gap_ns IS NOT NULL
GROUP BY ALL;
-- 4. Whether the rollups stand for the source's chunks as the views read them: every request
-- row of the rollup (request id and view, compared with `=`, so a null id or view never
-- matches) has a `requests` row of the same id and view in the source, and every bucket's
-- sum fits a BIGINT. The views pick chunks by those rows (traceq/sql/views.sql,
-- _primary_tokens): a chunk of no request row is read with every chunk of a source whose rows
-- all stand for their requests, and only then, which no stored row can follow.
SELECT
    (
        SELECT count(*)
        FROM _request_gaps_pieces AS g
        ANTI JOIN _staged_requests AS r ON r.request_id = g.request_id AND r.view = g.view
    ) AS orphans,
    (
        SELECT count(*)
        FROM (
            SELECT sum(sum_ns) AS s FROM _gap_buckets_pieces GROUP BY source_id, view, bucket
        )
        WHERE s NOT BETWEEN -9223372036854775808 AND 9223372036854775807
    ) AS overflows;
-- 5. The source's gap_buckets, to its file ($path).
COPY (
    SELECT
        source_id,
        view,
        bucket,
        CAST(sum(n) AS BIGINT) AS n,
        min(lo_ns) AS lo_ns,
        max(hi_ns) AS hi_ns,
        CAST(sum(sum_ns) AS BIGINT) AS sum_ns
    FROM _gap_buckets_pieces
    GROUP BY source_id, view, bucket
    ORDER BY view, bucket
) TO $path (FORMAT parquet, COMPRESSION zstd);
-- 6. The source's request_gaps: its pieces, in order, to its file ($path).
COPY (SELECT * FROM _request_gaps_pieces) TO $path (FORMAT parquet, COMPRESSION zstd);
