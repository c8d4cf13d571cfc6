"""DuckDB's `ASOF [LEFT] JOIN` as a Spark equi-join on a time bucket.

Spark has no as-of join. `l ASOF LEFT JOIN r ON l.a >= r.b [AND l.k = r.k ...]` picks, for
each left row, the right row of the same keys with the greatest `b <= a`. The rewrite:

1. Each right row gets the next `b` of its keys, so it holds for the interval `[b, next)`
   (the last one for `[b, ∞)`); the intervals of one key are disjoint, so at most one holds
   any `a`, and it is the row DuckDB picks. The next `b` is `lead(b)` within the row's keys
   and coarse time bucket (about `COARSE_ROWS` rows), else the first `b` of the keys' next
   non-empty coarse bucket (`_intervals`): no window holds every row of a key.
2. Time is cut into buckets of width `W` (`bucket(x) = floor(x / W)`, monotone, so `a` in
   `[b, next]` puts `bucket(a)` between `bucket(b)` and `bucket(next)`), and each right row
   is copied into every bucket its interval touches (`explode(sequence(...))`).
3. The join is `bucket(a) = r._asof_bucket AND l.k = r.k` (equalities Spark hashes or
   sort-merges) plus the interval test `a >= b AND (a < next OR next IS NULL)`. A left row
   past the last `b` of the whole right side has its bucket clamped to that last bucket,
   where the open-ended rows sit (a key whose rows end earlier has its last row copied up
   to that bucket), so the open interval needs no copy per future bucket.

`W` is the mean spacing of one key's `b` values: `(max(b) - min(b)) × keys / rows`, read
from the right side once per query (a scalar subquery, like the clamp's `max(b)`). A right
row is then copied about twice on average, and a left row meets about two candidates.
The keys must be numbers (the views' times are BIGINT ns). Of right rows with equal `b`
and keys one wins, as in DuckDB. `r.*` would also carry `_asof_next` and `_asof_bucket`,
so a select that reads it is refused.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlglot import exp

NEXT = "_asof_next"
BUCKET = "_asof_bucket"
COARSE, WITHIN, FIRST, AFTER = "_asof_part", "_asof_within", "_asof_first", "_asof_after"
COARSE_ROWS = 4096
"""Right rows of one key per partition of the `lead` that finds each row's next `b`, on
average (a partition spans `COARSE_ROWS` × the key's mean spacing of `b`)."""


class AsofError(Exception):
    """An as-of join this rewrite does not render (says why)."""


def rewrite_asof_joins(tree: exp.Expr) -> exp.Expr:
    """Every `ASOF` join of `tree` rewritten as above (in place; returns `tree`)."""
    for join in list(tree.find_all(exp.Join)):
        if str(join.args.get("method") or "").upper() == "ASOF":
            _rewrite(join)
    return tree


def _rewrite(join: exp.Join) -> None:
    right = join.this
    alias = right.alias_or_name
    conditions = list(_conjuncts(join.args["on"]))
    inequality = [c for c in conditions if isinstance(c, (exp.GTE, exp.LTE))]
    equal = [c for c in conditions if isinstance(c, exp.EQ)]
    if len(inequality) != 1 or len(equal) + 1 != len(conditions):
        raise AsofError("ASOF JOIN needs one >= (or <=) and otherwise = conditions")
    cond = inequality[0]
    left_key, right_key = cond.this, cond.expression
    if isinstance(cond, exp.LTE):  # r.b <= l.a, the same as l.a >= r.b
        left_key, right_key = right_key, left_key
    if not (isinstance(right_key, exp.Column) and right_key.table == alias):
        raise AsofError("ASOF JOIN: the right side of >= must be a column of the join")
    _refuse_right_star(join, alias)
    keys = [
        side.name
        for c in equal
        for side in (c.this, c.expression)
        if isinstance(side, exp.Column) and side.table == alias
    ]
    if len(keys) != len(equal):
        raise AsofError("ASOF JOIN: each = condition needs a column of the join")
    source = right.copy()
    source.set("alias", None)
    b = right_key.name
    width = _width(source, b, keys)
    last = exp.Subquery(this=exp.select(exp.Max(this=exp.column(b))).from_(source.copy()))

    intervals = _intervals(source, b, keys, width)
    # A key's open-ended row reaches the clamp bucket of every key (step 3 above).
    end = exp.Case(
        ifs=[exp.If(this=exp.column(NEXT).is_(exp.Null()), true=last.copy())],
        default=exp.column(NEXT),
    )
    span = exp.Anonymous(
        this="sequence",
        expressions=[_bucket(exp.column(b), width), _bucket(end, width)],
    )
    copies = exp.select(exp.Star(), exp.alias_(exp.Explode(this=span), BUCKET)).from_(
        exp.Subquery(this=intervals, alias=exp.TableAlias(this=exp.to_identifier("_asof_r")))
    )
    join.set("this", exp.Subquery(this=copies, alias=exp.TableAlias(this=exp.to_identifier(alias))))

    nxt = exp.column(NEXT, table=alias)
    clamp = exp.Least(
        this=_bucket(left_key.copy(), width), expressions=[_bucket(last.copy(), width)]
    )
    upper = exp.or_(
        exp.LT(this=left_key.copy(), expression=nxt),
        exp.Is(this=nxt.copy(), expression=exp.Null()),
    )
    join.set(
        "on",
        exp.and_(
            exp.EQ(this=exp.column(BUCKET, table=alias), expression=clamp),
            *equal,
            exp.GTE(this=left_key.copy(), expression=right_key.copy()),
            exp.paren(upper),
        ),
    )
    join.set("method", None)


def _intervals(source: exp.Expr, b: str, keys: list[str], width: exp.Expr) -> exp.Select:
    """`source` with `_asof_next`, the next `b` of the same keys (step 1), found in two levels
    so that no window is one partition per key (a fleet's engine has millions of rows):
    the next `b` within the row's partition of about `COARSE_ROWS` rows of its keys (a coarser
    time bucket), else the first `b` of the keys' next non-empty partition, from a window over
    one row per (keys, partition)."""
    coarse = _bucket(
        exp.column(b), exp.Mul(this=width.copy(), expression=exp.Literal.number(COARSE_ROWS))
    )
    part = [exp.column(k) for k in keys]
    inner = exp.Window(
        this=exp.Anonymous(this="lead", expressions=[exp.column(b)]),
        partition_by=[*part, exp.column(COARSE)],
        order=exp.Order(expressions=[exp.Ordered(this=exp.column(b))]),
    )
    rows = exp.select(exp.Star(), exp.alias_(coarse, COARSE)).from_(source.copy())
    within = exp.select(exp.Star(), exp.alias_(inner, WITHIN)).from_(
        exp.Subquery(this=rows, alias=exp.TableAlias(this=exp.to_identifier("_asof_c")))
    )
    firsts = (
        exp.select(*part, exp.column(COARSE), exp.alias_(exp.Min(this=exp.column(b)), FIRST))
        .from_(
            exp.Subquery(this=rows.copy(), alias=exp.TableAlias(this=exp.to_identifier("_asof_c")))
        )
        .group_by(*part, exp.column(COARSE))
    )
    after = exp.Window(
        this=exp.Anonymous(this="lead", expressions=[exp.column(FIRST)]),
        partition_by=[exp.column(k) for k in keys] or None,
        order=exp.Order(expressions=[exp.Ordered(this=exp.column(COARSE))]),
    )
    nexts = exp.select(
        *[exp.column(k) for k in keys], exp.column(COARSE), exp.alias_(after, AFTER)
    ).from_(exp.Subquery(this=firsts, alias=exp.TableAlias(this=exp.to_identifier("_asof_f"))))
    on = exp.and_(
        *[
            exp.EQ(this=exp.column(c, table="_asof_w"), expression=exp.column(c, table="_asof_n"))
            for c in (*keys, COARSE)
        ]
    )
    nxt = exp.Coalesce(
        this=exp.column(WITHIN, table="_asof_w"), expressions=[exp.column(AFTER, table="_asof_n")]
    )
    return (
        exp.select(
            exp.Column(this=exp.Star(), table=exp.to_identifier("_asof_w")), exp.alias_(nxt, NEXT)
        )
        .from_(exp.Subquery(this=within, alias=exp.TableAlias(this=exp.to_identifier("_asof_w"))))
        .join(
            exp.Subquery(this=nexts, alias=exp.TableAlias(this=exp.to_identifier("_asof_n"))),
            on=on,
            join_type="LEFT",
        )
    )


def _width(source: exp.Expr, b: str, keys: list[str]) -> exp.Expr:
    """`(SELECT coalesce(nullif(span × keys / nullif(rows, 0), 0), 1) FROM r)`: the mean
    spacing of one key's `b` (1 when the right side has fewer than two distinct `b`)."""
    col = exp.column(b)
    span: exp.Expr = exp.paren(
        exp.Sub(
            this=exp.Cast(this=exp.Max(this=col.copy()), to=exp.DataType.build("DOUBLE")),
            expression=exp.Cast(this=exp.Min(this=col.copy()), to=exp.DataType.build("DOUBLE")),
        )
    )
    if keys:
        distinct = exp.Distinct(expressions=[exp.column(k) for k in keys])
        span = exp.Mul(this=span, expression=exp.Count(this=distinct))
    rows = exp.Nullif(this=exp.Count(this=col.copy()), expression=exp.Literal.number(0))
    spacing = exp.Div(this=span, expression=rows)
    value = exp.Coalesce(
        this=exp.Nullif(this=spacing, expression=exp.Literal.number(0)),
        expressions=[exp.Literal.number(1)],
    )
    return exp.Subquery(this=exp.select(value).from_(source.copy()))


def _bucket(value: exp.Expr, width: exp.Expr) -> exp.Expr:
    return exp.Cast(
        this=exp.Floor(this=exp.Div(this=_atom(value), expression=width.copy())),
        to=exp.DataType.build("BIGINT"),
    )


def _atom(node: exp.Expr) -> exp.Expr:
    """`node` parenthesised unless it is a column, literal or subquery (a built tree prints
    no parentheses of its own: `a - 7` divided must print as `(a - 7) / w`)."""
    if isinstance(node, (exp.Column, exp.Literal, exp.Subquery, exp.Paren)):
        return node
    return exp.paren(node)


def _refuse_right_star(join: exp.Join, alias: str) -> None:
    select = join.find_ancestor(exp.Select)
    if select is None:
        return
    for item in select.expressions:
        if isinstance(item, exp.Column) and isinstance(item.this, exp.Star) and item.table == alias:
            raise AsofError(f"ASOF JOIN: {alias}.* would carry the rewrite's helper columns")


def _conjuncts(node: exp.Expr) -> Iterator[exp.Expr]:
    node = node.unnest()
    if isinstance(node, exp.And):
        yield from _conjuncts(node.this)
        yield from _conjuncts(node.expression)
    else:
        yield node
