"""Help text is read on a terminal: every ``pytest-sme2 ... --help``, every pytest option's help
and the reference generated from them carry no reST markup (docstrings used as help keep theirs
otherwise: ````pytest-sme2````, ``:func:`x```)."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import re
import sys
from pathlib import Path

import pytest

from pytest_sme2._util.text import plain
from pytest_sme2.cli import build_parser

ROOT = Path(__file__).resolve().parents[3]
REST = re.compile(r"``|:[a-z]+:`")


def _parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command words, parser) of the command line and each of its subcommands."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


def _help(words: tuple[str, ...]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        build_parser().parse_args([*words, "--help"])
    return out.getvalue()


def test_plain_strips_rest_inline_markup():
    assert plain("``pytest-sme2``: the commands") == "pytest-sme2: the commands"
    assert plain("see :func:`pytest_sme2.api.export_model` and :mod:`~pytest_sme2.cli`") == \
        "see pytest_sme2.api.export_model and cli"
    assert plain("the CSV of `run --kernel-trace`") == "the CSV of `run --kernel-trace`"


@pytest.mark.parametrize("words", [words for words, _ in _parsers(build_parser())],
                         ids=lambda words: " ".join(("pytest-sme2", *words)))
def test_every_help_is_plain_text(words):
    text = _help(words)
    assert not REST.search(text), text


def test_pytest_options_and_the_generated_reference_are_plain_text():
    """The reference records what the plugin's pytest_addoption registers: the options' help
    as ``pytest --help`` shows it, and the command line's."""
    path = ROOT / "docs" / "reference" / "generate.py"
    spec = importlib.util.spec_from_file_location("docs_reference_generate_help", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    for text in (module.cli_markdown(), module.options_markdown()):
        assert not REST.search(text)
