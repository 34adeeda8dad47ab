"""Moved to :mod:`pytest_sme2.artifacts.csv` (a block's files, written by the benchmark loop);
importable from here as before."""

from pytest_sme2.artifacts.csv import *  # noqa: F401,F403
from pytest_sme2.artifacts.csv import csv_text, write_csvs  # noqa: F401
