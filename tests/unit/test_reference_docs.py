"""The generated reference (docs/reference/options.md from the plugin's options, cli.md from
the command line's parser, llm-schemes.md from the scheme table, and the layer table of
docs/architecture.md from tests/structure.py's LAYERS and LAYER_ROLES) matches the code: an
option, a command or a layer changed without regenerating fails here, naming the command that
brings the files up to date."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    path = ROOT / "docs" / "reference" / "generate.py"
    spec = importlib.util.spec_from_file_location("docs_reference_generate", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module     # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_generated_reference_is_current():
    generate = _generator()
    stale = generate.stale()
    assert stale == [], (f"{', '.join(stale)} stale: run `{generate.COMMAND}` "
                         "and commit the result")


def test_every_option_and_command_is_documented():
    generate = _generator()
    options, cli = generate.options_markdown(), generate.cli_markdown()
    for flag in ("--device", "--runner", "--save-baseline", "--sme2-gate-mode", "--runs"):
        assert f"`{flag}" in options
    for command in ("analyze", "compare", "export", "run", "report", "gate", "setup",
                    "history import", "history report", "fake-phone"):
        assert f"## `pytest-sme2 {command}`" in cli


def test_the_architecture_page_lists_every_layer_of_the_structure_test():
    generate = _generator()
    structure = generate._structure()
    table = generate.layers_table()
    for key, number in structure.LAYERS.items():
        if key != "__init__":
            row = next(line for line in table.splitlines()
                       if line.startswith(f"| {number} "))
            assert f"`{key}`" in row or f"`{key}/`" in row


def test_a_percent_sign_reads_as_one_in_the_options_page():
    """argparse's escaping ("5%%" in the help) is not copied into the page (issue 49, item 19)."""
    generate = _generator()
    options, cli = generate.options_markdown(), generate.cli_markdown()
    assert "%%" not in options and "%%" not in cli
    assert "under 5% of the end-to-end time" in options and "95% interval" in options


def test_no_page_holds_a_placeholder_for_a_figure():
    """A page that says ``SOMETHING_PLACEHOLDER`` (or TODO/TBD where a figure goes) was
    committed before its measurement: the figure is measured or the line goes."""
    import re

    pattern = re.compile(r"\b[A-Z0-9_]+_PLACEHOLDER\b|\bTBD\b|\bTODO: (?:measure|fill)")
    found = [f"{p.relative_to(ROOT)}:{i}" for p in sorted((ROOT / "docs").rglob("*.md"))
             for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert found == []
