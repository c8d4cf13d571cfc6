-- Each staged chunk with `_t0`, its request's first chunk time (_tokens_starts,
-- layout_tokens_starts.sql), joined as each piece of the sort reads the chunks: for a small
-- source (traceq/layout.py, DIRECT_T0_REQUESTS), where writing every chunk to a scratch file
-- first (layout_tokens_t0.sql) would cost more than reading them again for each piece
-- (1.3 M chunks: 1.5 s this way, 2.5 s through the scratch).
CREATE OR REPLACE TEMP VIEW _staged_tokens_t0 AS
SELECT t.*, s._t0
FROM _staged_tokens AS t
LEFT JOIN _tokens_starts AS s ON s.k = hash(t.request_id, t.view);
