-- Each request's first chunk time `_t0` and its chunk count, in a temporary table
-- _tokens_starts (traceq/layout.py): layout_tokens_minutes.sql cuts the `tokens` sort into
-- pieces from it, and layout_tokens_t0.sql / layout_tokens_t0_view.sql join it to the chunks.
-- The request is keyed by a 64-bit hash of (request_id, view), NULLs included as IS NOT
-- DISTINCT FROM would: the table and the join then hold 24 bytes a request, not its id. Two
-- requests whose keys collide (~1e-7 at 3 M requests) share the earlier first-chunk time: they
-- sort together and each stays whole (the sort goes on by request_id and view), so only where
-- that request sits in time changes, never its rows.
CREATE OR REPLACE TEMP TABLE _tokens_starts AS
SELECT hash(request_id, view) AS k, min(ts) AS _t0, count(*) AS chunks
FROM _staged_tokens
GROUP BY ALL;
