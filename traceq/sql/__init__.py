"""SQL that traceq runs lives in the `.sql` files of this package, never in Python strings."""

from __future__ import annotations

from importlib import resources


def load(name: str) -> str:
    """The text of `traceq/sql/<name>.sql`."""
    return resources.files(__package__).joinpath(f"{name}.sql").read_text()
