-- The layout's DuckDB connection (traceq/layout.py), before layout_tokens_t0.sql and
-- layout.sql. One thread: two threads each buffer a sort run and a Parquet row group of wide
-- `spans` rows (their JSON attributes), which ran out of the 512 MB LAYOUT_MEMORY at 1 M
-- requests (2 M spans: "failed to allocate data of size 16.0 MiB"); one thread laid them out
-- at 628 MiB.
SET threads = 1;
