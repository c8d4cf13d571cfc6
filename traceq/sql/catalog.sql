-- The catalogue behind `traceq schema` and Session.catalog(): every public table and view
-- with its columns, types and docs (the docs are DuckDB comments set in traceq/db.py).
-- $tables lists the stored tables (the rest are views); $name filters to one relation.
-- Internal relations (_empty_*, _sources) are hidden, and so are the temporary views a
-- diagnose run puts in front of a view of the same name (traceq/playbooks/rollups.py).
SELECT
    CASE WHEN list_contains($tables, c.table_name) THEN 'table' ELSE 'view' END AS kind,
    c.table_name AS name,
    c.column_index AS position,
    c.column_name AS column,
    c.data_type AS type,
    c.comment AS doc,
    v.comment AS relation_doc
FROM duckdb_columns() AS c
JOIN duckdb_views() AS v
    ON v.view_name = c.table_name AND v.database_name = c.database_name
    AND NOT v.internal AND NOT v.temporary
WHERE NOT starts_with(c.table_name, '_')
  AND ($name IS NULL OR c.table_name = $name)
ORDER BY kind, c.table_name, c.column_index
