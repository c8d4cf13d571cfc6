"""Pieces every `traceq` command shares: the one-line error, `K=V` parameters and the
`--gpu` name."""

from __future__ import annotations

from typing import Any

import click

from traceq.hardware import resolve


class Failure(click.ClickException):
    """A clean one-line error with exit code 2."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        click.echo(f"traceq: error: {self.message}", err=True)


def typed(value: str) -> Any:
    """`"3"` → 3, `"2.5"` → 2.5, anything else stays text."""
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def parse_params(pairs: tuple[str, ...], option: str = "--param") -> dict[str, Any]:
    """`("slo=500", "name=x")` → `{"slo": 500, "name": "x"}`; a malformed pair is a usage error."""
    bound: dict[str, Any] = {}
    for p in pairs:
        key, sep, value = p.partition("=")
        if not sep or not key:
            raise click.UsageError(f"{option} expects K=V, got {p!r}")
        bound[key] = typed(value)
    return bound


def checked_gpu(given: str | None, configured: object = None) -> str | None:
    """`--gpu`, else the config's `[diagnose] gpu`, checked against the GPU table (exit 2
    naming the rows that could be meant)."""
    name = given if given is not None else configured
    if name is None:
        return None
    origin = "--gpu" if given is not None else "--config [diagnose] gpu"
    if not isinstance(name, str):
        raise Failure(f"{origin}: expected a GPU name, got {name!r}")
    try:
        resolve(name)
    except ValueError as exc:
        raise Failure(f"{origin}: {exc}") from exc
    return name
