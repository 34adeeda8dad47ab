"""Moved to :mod:`pytest_sme2.artifacts.trace` (a block's file, written by the benchmark loop);
importable from here as before."""

from pytest_sme2.artifacts.trace import *  # noqa: F401,F403
from pytest_sme2.artifacts.trace import median_run, trace_events, write_trace  # noqa: F401
