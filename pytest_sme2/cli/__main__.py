"""``python -m pytest_sme2.cli``: the ``pytest-sme2`` command."""

import sys

from pytest_sme2.cli import main

sys.exit(main())
