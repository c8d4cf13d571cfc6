"""DuckDB SQL → Spark SQL: one dialect in the repository, rendered for Spark by sqlglot.

The public views (traceq/sql/*.sql) and every playbook check (traceq/playbooks/catalog/*.yaml)
are written once, for DuckDB. `to_spark` parses a statement with sqlglot's DuckDB dialect,
applies the rewrites below for what sqlglot does not carry over by itself, and prints it in
sqlglot's Spark dialect. Nothing here knows a view or a playbook by name: every rule is about
a DuckDB construct, so a view edited or added later translates without a change here.

DuckDB constructs rewritten (and why each rewrite gives the same rows):

- `CREATE MACRO name(args) AS expr` (views.sql `_gap_bucket`): Spark SQL has no SQL
  macros; `Macros` collects them and every call is replaced by the body with the arguments
  substituted (each in parentheses unless it is a column, literal or call: rollups.sql's
  `_prefill_bucket(t_arrival + ttft_ns)` is `(t_arrival + ttft_ns) DIV 10000000000`), before
  anything else is rewritten.
- `quantile_cont(x, p)` / `quantile_cont(x, [p, ...])` → `percentile(x, p)`: both are the
  exact, linearly interpolated quantile (sqlglot would print `percentile_cont(x, p)`, which
  Spark accepts only as `WITHIN GROUP`).
- `quantile_disc(x, p)` → `percentile_disc(p) WITHIN GROUP (ORDER BY x)`: both the
  SQL-standard discrete quantile, an actual value of `x` (gpu.sql's bucket width for
  `request_gpu`; tests/test_spark.py compares the view's rows).
- `make_timestamp_ns(ns)` → `CAST(timestamp_micros(ns DIV 1000) AS TIMESTAMP_NTZ)`: Spark
  timestamps stop at microseconds, so the `*_at` columns are the same instant truncated to µs.
- `ASOF [LEFT] JOIN r ON l.a >= r.b [AND l.k = r.k]`: Spark has no as-of join. It becomes
  an equi-join on the keys and a time bucket, each right row copied into the buckets of the
  interval `[b, next b)` it holds, plus the interval test, which matches exactly the row
  DuckDB's as-of join picks (traceq/spark/asof.py says how and why); Spark hashes or
  sort-merges it, never a nested loop over both sides.
- `FROM w, generate_series(a, b, step) AS g` (a table function reading an earlier FROM item)
  → `LATERAL (SELECT explode(sequence(a, b, step)) AS generate_series) AS g`: both include
  both ends, and `g.generate_series` keeps its name.
- `WITH x AS MATERIALIZED (...)`: a DuckDB planner hint; dropped.
- `SELECT * EXCLUDE (c, ...) FROM table`: Spark SQL has no star-except, so the star is
  expanded from the columns the caller's `columns` resolver reports for that relation.
- Decimal literals (`1.0`, `0.5`) → DOUBLE: DuckDB mixes them with DOUBLE columns as
  DOUBLE, while Spark keeps DECIMAL and rounds divisions to a fixed scale.
- `printf(fmt, ...)` → `format_string(fmt, ...)` (the same C-style formats).
- `list_position(l, x)` → `nullif(array_position(l, x), 0)` (DuckDB: null when absent), and
  `l[i]` with a computed `i` → `try_element_at(l, i)` (both 1-based, null out of range;
  sqlglot shifts only literal indexes).
- `CREATE [OR REPLACE] VIEW` → `CREATE OR REPLACE TEMPORARY VIEW` (session-scoped, like
  DuckDB's in-memory catalogue).

What sqlglot translates by itself (checked by tests/test_spark.py): 1-based list indexing
(`q[1]` → `q[0]`), `//` → `DIV`, SEMI / ANTI joins, `GROUP BY ALL`, aggregate `FILTER`,
`regexp_matches` → `RLIKE`, `list_contains` → `array_contains`, `string_agg`, struct literals,
`IS NOT DISTINCT FROM` → `<=>`, `bool_or`, `$name` parameters → Spark's named parameter
markers `:name` (bound by `spark.sql(args=...)`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp

from traceq.spark.asof import AsofError, rewrite_asof_joins

Columns = Callable[[str], list[str]]
"""Resolver: the column names of a registered table or view (for `* EXCLUDE`)."""


class TranslationError(Exception):
    """A DuckDB statement that has no Spark rendering here (says which construct)."""


@dataclass
class Macros:
    """DuckDB scalar macros seen so far (name → (parameter names, body))."""

    bodies: dict[str, tuple[list[str], exp.Expr]] = field(default_factory=dict)

    def add(self, create: exp.Create) -> None:
        udf = create.this
        name = udf.this.name if isinstance(udf.this, exp.Table) else udf.name
        params = [p.name for p in udf.expressions]
        self.bodies[name.lower()] = (params, create.expression)

    def expand(self, tree: exp.Expr) -> exp.Expr:
        def inline(node: exp.Expr) -> exp.Expr:
            if not isinstance(node, exp.Anonymous):
                return node
            found = self.bodies.get(node.name.lower())
            if found is None:
                return node
            params, body = found
            if len(params) != len(node.expressions):
                msg = f"macro {node.name} takes {len(params)} argument(s)"
                raise TranslationError(msg)
            values = dict(zip(params, node.expressions, strict=True))

            def bind(inner: exp.Expr) -> exp.Expr:
                if isinstance(inner, exp.Column) and not inner.table and inner.name in values:
                    return _atom(values[inner.name].copy())
                return inner

            # a macro in an argument or in the body (views.sql `_latency_bucket(_ms_floor_ns(x))`)
            # is expanded in turn
            return self.expand(body.copy().transform(bind))

        return tree.transform(inline)


def _atom(node: exp.Expr) -> exp.Expr:
    """`node` parenthesised unless it is a column, literal, call or already in parentheses:
    a macro argument keeps its grouping in the body (`m(a + b)` with body `x // 10` is
    `(a + b) // 10`; a built tree prints no parentheses of its own)."""
    if isinstance(node, (exp.Column, exp.Literal, exp.Paren, exp.Func, exp.Subquery)):
        return node
    return exp.paren(node)


def parse(sql: str) -> list[exp.Expr]:
    """The statements of a DuckDB SQL text (comments dropped)."""
    return [e for e in sqlglot.parse(sql, read="duckdb") if e is not None]


def to_spark(
    sql: str | exp.Expr, macros: Macros | None = None, columns: Columns | None = None
) -> str:
    """One DuckDB statement rendered as Spark SQL."""
    tree = parse(sql)[0] if isinstance(sql, str) else sql.copy()
    if macros is not None:
        tree = macros.expand(tree)
    for rule in _RULES:
        tree = rule(tree)
    if columns is not None or any(
        isinstance(s, exp.Star) and s.args.get("except_") for s in tree.find_all(exp.Star)
    ):
        tree = _expand_exclude(tree, columns)
    try:
        return tree.sql("spark", unsupported_level=sqlglot.ErrorLevel.RAISE, comments=False)
    except sqlglot.errors.UnsupportedError as exc:
        raise TranslationError(str(exc)) from exc


def view_name(tree: exp.Expr) -> str | None:
    """The view a `CREATE VIEW` statement creates, else None."""
    if isinstance(tree, exp.Create) and str(tree.args.get("kind", "")).upper() == "VIEW":
        return tree.this.name
    return None


def is_macro(tree: exp.Expr) -> bool:
    return isinstance(tree, exp.Create) and str(tree.args.get("kind", "")).upper() == "MACRO"


# -- rules ---------------------------------------------------------------------------------


def _temporary_views(tree: exp.Expr) -> exp.Expr:
    if view_name(tree) is not None:
        tree.set("replace", True)
        props = tree.args.get("properties") or exp.Properties(expressions=[])
        if not any(isinstance(p, exp.TemporaryProperty) for p in props.expressions):
            props.append("expressions", exp.TemporaryProperty())
        tree.set("properties", props)
    return tree


def _no_materialized(tree: exp.Expr) -> exp.Expr:
    for cte in tree.find_all(exp.CTE):
        cte.set("materialized", None)
    return tree


def _functions(tree: exp.Expr) -> exp.Expr:
    def rewrite(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.PercentileCont) and not isinstance(node.parent, exp.WithinGroup):
            return exp.Anonymous(this="percentile", expressions=[node.this, node.expression])
        if isinstance(node, exp.PercentileDisc) and not isinstance(node.parent, exp.WithinGroup):
            order = exp.Order(expressions=[exp.Ordered(this=node.this, nulls_first=True)])
            return exp.WithinGroup(this=exp.PercentileDisc(this=node.expression), expression=order)
        if isinstance(node, exp.Anonymous):
            name = node.name.lower()
            if name == "make_timestamp_ns":
                micros = exp.IntDiv(this=node.expressions[0], expression=exp.Literal.number(1000))
                stamp = exp.Anonymous(this="timestamp_micros", expressions=[micros])
                return exp.Cast(this=stamp, to=exp.DataType.build("TIMESTAMP_NTZ", dialect="spark"))
            if name == "printf":
                return exp.Anonymous(this="format_string", expressions=node.expressions)
            if name == "list_position":
                found = exp.Anonymous(this="array_position", expressions=node.expressions)
                return exp.Nullif(this=found, expression=exp.Literal.number(0))
        if isinstance(node, exp.Literal) and not node.is_string and _is_decimal(node.this):
            return exp.Cast(this=node, to=exp.DataType.build("DOUBLE"))
        return node

    return tree.transform(rewrite)


def _computed_index(tree: exp.Expr) -> exp.Expr:
    def rewrite(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Bracket) and len(node.expressions) == 1:
            index = node.expressions[0]
            if not isinstance(index, exp.Literal):
                at = exp.Cast(this=index, to=exp.DataType.build("INT"))
                return exp.Anonymous(this="try_element_at", expressions=[node.this, at])
        return node

    return tree.transform(rewrite)


def _is_decimal(text: str) -> bool:
    return "." in text and "e" not in text.lower()


def _generate_series(tree: exp.Expr) -> exp.Expr:
    for table in list(tree.find_all(exp.Table)):
        series = table.this
        if not isinstance(series, exp.GenerateSeries):
            continue
        if series.args.get("is_end_exclusive"):
            raise TranslationError("range() as a table has no Spark rendering here")
        args = [series.args["start"], series.args["end"]]
        if series.args.get("step") is not None:
            args.append(series.args["step"])
        alias = table.alias or "generate_series"
        select = exp.select(
            exp.alias_(
                exp.Explode(this=exp.Anonymous(this="sequence", expressions=args)),
                "generate_series",
            )
        )
        lateral = exp.Lateral(
            this=exp.Subquery(this=select), alias=exp.TableAlias(this=exp.to_identifier(alias))
        )
        table.replace(lateral)
    return tree


def _asof_joins(tree: exp.Expr) -> exp.Expr:
    try:
        return rewrite_asof_joins(tree)
    except AsofError as exc:
        raise TranslationError(str(exc)) from exc


def _expand_exclude(tree: exp.Expr, columns: Columns | None) -> exp.Expr:
    for star in list(tree.find_all(exp.Star)):
        excluded = star.args.get("except_")
        if not excluded:
            continue
        select = star.find_ancestor(exp.Select)
        source = select.args.get("from_") if select is not None else None
        table = source.this if source is not None else None
        if (
            select is None
            or columns is None
            or not isinstance(table, exp.Table)
            or select.args.get("joins")
        ):
            raise TranslationError("* EXCLUDE needs a single table or view in FROM")
        drop = {e.name.lower() for e in excluded}
        kept: list[exp.Expr] = [exp.column(c) for c in columns(table.name) if c.lower() not in drop]
        _splice(select, star, kept)
    return tree


def _splice(select: exp.Select, star: exp.Expr, kept: list[exp.Expr]) -> None:
    items: list[exp.Expr] = []
    for item in select.expressions:
        items += kept if item is star else [item]
    select.set("expressions", items)


def _ordered_lists(tree: exp.Expr) -> exp.Expr:
    """`list(x ORDER BY k, ...)`: Spark's collect_list keeps no order, so the pairs are
    collected as structs, sorted (array_sort orders structs field by field) and unwrapped:
    `transform(array_sort(collect_list(named_struct('k0', k, ..., 'v', x))), s -> s.v)`,
    reversed when every key is DESC; keys of mixed directions are refused."""

    def rewrite(node: exp.Expr) -> exp.Expr:
        if not (isinstance(node, exp.ArrayAgg) and isinstance(node.this, exp.Order)):
            return node
        order = node.this
        keys = order.expressions
        directions = {bool(k.args.get("desc")) for k in keys}
        if len(directions) != 1:
            raise TranslationError("list(... ORDER BY) with mixed directions")
        fields: list[exp.Expr] = []
        for i, key in enumerate(keys):
            fields += [exp.Literal.string(f"k{i}"), key.this.copy()]
        fields += [exp.Literal.string("v"), order.this.copy()]
        pairs = exp.Anonymous(
            this="collect_list",
            expressions=[exp.Anonymous(this="named_struct", expressions=fields)],
        )
        ordered = exp.Anonymous(this="array_sort", expressions=[pairs])
        unwrap = exp.Lambda(
            this=exp.Dot(this=exp.to_identifier("s"), expression=exp.to_identifier("v")),
            expressions=[exp.to_identifier("s")],
        )
        values: exp.Expr = exp.Anonymous(this="transform", expressions=[ordered, unwrap])
        if directions == {True}:
            values = exp.Anonymous(this="reverse", expressions=[values])
        return values

    return tree.transform(rewrite)


_RULES: tuple[Callable[[exp.Expr], exp.Expr], ...] = (
    _temporary_views,
    _no_materialized,
    _asof_joins,
    _generate_series,
    _ordered_lists,
    _functions,
    _computed_index,
)
