"""``pytest-sme2 bisect``: the commit that changed a benchmark, found by the gate's paired rule
(git and worktrees; each commit's programs; the search; the comparisons; the state file; the
outcome and its report). The command is :mod:`pytest_sme2.cli.bisect`; see docs/bisect.md."""
