"""The history store's tables (SQLAlchemy Core) and its schema version.

One row per session (unique by a hash of its content, so the same results.json imported twice,
or by two CI jobs, is one session) and one row per benchmark of a session (a key's blocks
pooled): enough to recompute, not just one point. JSON columns keep what varies in shape
(block medians, the runs, categories, versions).
"""

from __future__ import annotations

from sqlalchemy import (JSON, Boolean, Column, Float, ForeignKey, Integer, MetaData, String,
                        Table, Text, UniqueConstraint)

# Bump on any change a reader of the old layout would misread; add a step to MIGRATIONS.
SCHEMA_VERSION = 3

metadata = MetaData()

meta = Table(
    "sme2_meta", metadata,
    Column("name", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

sessions = Table(
    "sme2_sessions", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("uid", String(64), nullable=False),
    Column("commit_sha", String(64)),            # None: results.json carried no commit
    Column("branch", String(256)),
    Column("time", String(40), nullable=False),  # ISO 8601, UTC
    Column("ci_run", String(512)),
    Column("host", String(256)),
    Column("versions", JSON, nullable=False),
    Column("source", Text),                      # the file it was imported from, if any
    UniqueConstraint("uid", name="sme2_sessions_uid"),
)

points = Table(
    "sme2_points", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("session_id", Integer, ForeignKey("sme2_sessions.id", ondelete="CASCADE"),
           nullable=False, index=True),
    Column("key_digest", String(32), nullable=False, index=True),
    Column("key", JSON, nullable=False),         # BaselineKey.to_dict()
    Column("device", String(256), nullable=False),
    Column("model", String(128), nullable=False),
    Column("dtype", String(32), nullable=False),
    Column("threads", Integer, nullable=False),
    Column("runner", String(128), nullable=False),
    Column("emulated", Boolean, nullable=False),
    Column("median_ms", Float, nullable=False),  # pooled over the blocks
    Column("block_medians_ms", JSON, nullable=False),
    Column("runs_ms", JSON, nullable=False),     # every timed run, one list per block
    Column("under_test", JSON, nullable=False),  # UnderTest.to_dict(): what the gate compares
    Column("instructions", Float),               # per Method::execute, when counted
    Column("load_ms", Float),
    Column("peak_rss_kb", Float),
    Column("categories_ms", JSON, nullable=False),
    Column("sme2", String(16), nullable=False),  # proven / indicated / absent / unknown
    Column("export_key", String(128), nullable=False),
    Column("executorch", String(64), nullable=False),
    # The gate's end-to-end verdict on it (status, ratio and interval, pairs); None: not
    # compared, or recorded before schema 2.
    Column("gate", JSON),
    # The machine-state probe's median time (µs) over its blocks: the machine's speed in that
    # session; None: not probed, or recorded before schema 3.
    Column("probe_us", Float),
)

# version -> SQL statements taking a store from the version before it to this one.
MIGRATIONS: dict[int, tuple[str, ...]] = {
    2: ("ALTER TABLE sme2_points ADD COLUMN gate JSON",),
    3: ("ALTER TABLE sme2_points ADD COLUMN probe_us FLOAT",),
}
