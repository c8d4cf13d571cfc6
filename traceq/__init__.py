"""traceq: offline trace analysis and troubleshooting for LLM inference serving.

>>> import traceq
>>> con = traceq.open("run.tq")                                 # doctest: +SKIP
>>> con.sql("SELECT * FROM request_phases").pl()                  # doctest: +SKIP
"""

from __future__ import annotations

from traceq.db import open
from traceq.ingest import IngestOptions, ingest
from traceq.schema import SCHEMA_VERSION
from traceq.session import QueryError, Session

__all__ = ["SCHEMA_VERSION", "IngestOptions", "QueryError", "Session", "ingest", "open"]
__version__ = "0.1.0"
