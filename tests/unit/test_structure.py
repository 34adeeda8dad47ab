"""The package's shape, held: no import circles, no import up a layer (tests/structure.py has
the layer table), no module over 450 lines unless its docstring says why, few imports inside
functions and each saying what it defers: a third-party package or a measured cost, not only
the name of the module it imports."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.structure import (LAYER_ROLES, LAYERS, LONG_SIGNATURE, MAX_GENERATION_QUESTIONS,
                             MAX_INNER_IMPORTS, MAX_LINES, MAX_LONG_SIGNATURES, PACKAGE,
                             generation_questions, inner_imports, is_fixture, layer,
                             names_only_our_modules, read_structure)

ROOT = Path(__file__).resolve().parents[2] / PACKAGE


def test_no_import_circles():
    """No two modules import each other, directly or through others (Tarjan's strongly
    connected groups of the import graph)."""
    assert read_structure(ROOT).circles() == []


def test_no_import_runs_up_a_layer():
    """A module imports from its own layer or below (the layer table above). Every import
    counts: at the top of a module, inside a function, under ``if TYPE_CHECKING:``; ``from pkg
    import mod`` counts as importing ``pkg.mod``."""
    assert [f"{a} (layer {layer(a)}) -> {b} (layer {layer(b)})"
            for a, b in read_structure(ROOT).upward()] == []


def test_every_top_level_name_has_a_layer():
    """The layer table names each package and module at the top: none falls to a default."""
    top = {p.stem for p in ROOT.iterdir()
           if (p.suffix == ".py" or (p / "__init__.py").is_file())}
    assert top - set(LAYERS) == set()


def test_every_layer_has_a_name_and_a_role():
    """docs/architecture.md's layer table is made of ``LAYERS`` and each layer's name and role
    (``LAYER_ROLES``): none is left without."""
    assert set(LAYER_ROLES) == set(LAYERS.values())


def test_a_long_module_says_why_in_its_docstring():
    """A module over MAX_LINES lines says in its docstring why it is one module."""
    s = read_structure(ROOT)
    unexplained = []
    for module, lines in s.long_modules():
        path = ROOT.joinpath(*module.split(".")[1:])
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        if str(MAX_LINES) not in doc:
            unexplained.append(f"{module}: {lines} lines")
    assert unexplained == []


def test_few_functions_take_long_parameter_lists():
    """At most MAX_LONG_SIGNATURES functions in the package take LONG_SIGNATURE parameters or
    more (how they are counted: tests/structure.py's docstring); parameters that travel
    together are one frozen dataclass."""
    long = [f"{f.module}.{f.name}: {f.params}" for f in read_structure(ROOT).long_signatures()]
    assert len(long) <= MAX_LONG_SIGNATURES, (
        f"{len(long)} functions take {LONG_SIGNATURE} or more parameters, at most "
        f"{MAX_LONG_SIGNATURES} may: group the ones that travel together", long)


def test_a_public_fixture_and_the_callable_it_returns_are_exempt_from_the_signature_rule():
    """What a user's test writes keeps named parameters (tests/structure.py's docstring):
    ``sme2_generate(model, scheme=..., prompt_tokens=...)``, not a dataclass to build."""
    s = read_structure(ROOT)
    exempt = {f.name: f.params for f in s.functions
              if f.module == f"{PACKAGE}.plugin.fixtures" and f.fixture}
    assert exempt["generate"] == 8 and exempt["compare"] >= LONG_SIGNATURE
    assert not any(f.fixture for f in s.long_signatures())
    source = "@pytest.fixture(scope='session')\ndef f():\n    pass\n@other\ndef g(): pass\n"
    assert [is_fixture(n) for n in ast.parse(source).body] == [True, False]


def test_the_benchmark_loop_passes_state_on_objects_not_in_long_parameter_lists():
    """measure/ keeps the loop's state on objects (BenchmarkLoop, the block being measured):
    no function there takes more than 6 parameters (self counted)."""
    long = []
    for path in (ROOT / "measure").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                count = (len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs)
                         + bool(a.vararg) + bool(a.kwarg))
                if count > 6:
                    long.append(f"{path.relative_to(ROOT)}:{node.name} ({count})")
    assert long == []


def test_few_project_imports_are_made_inside_functions():
    """An import of the project's own modules goes at the top of its module unless it defers
    something (a third-party package, or a start-up cost measured): at most
    MAX_INNER_IMPORTS."""
    count = read_structure(ROOT).inner_imports
    assert count <= MAX_INNER_IMPORTS, (
        f"{count} project imports inside functions, at most {MAX_INNER_IMPORTS}: move the ones "
        f"that defer nothing to the top of their module")


def test_few_places_ask_whether_a_generation_is_there():
    """An LLM's generation is a kind of block, not a second path through every layer: the
    places that ask whether one is there stay at MAX_GENERATION_QUESTIONS or fewer (a view
    splits a session's sides once; a block's kind is chosen once)."""
    asked = read_structure(ROOT).generation_questions
    assert len(asked) <= MAX_GENERATION_QUESTIONS, (
        f"{len(asked)} places ask whether a generation is there, at most "
        f"{MAX_GENERATION_QUESTIONS}: {', '.join(f'{m}:{line}' for m, line in asked)}")


def test_what_counts_as_asking_whether_a_generation_is_there():
    """A condition on a ``generation`` (``is None``, ``is not None``, its truth) or on a name
    bound to one; not an assert, and not a condition on one of its figures (its depth)."""
    source = ("def f(b, blocks, side):\n"
              "    if b.generation is not None:\n"                 # 2: asks
              "        pass\n"
              "    g = pool_generation(blocks)\n"
              "    x = g.decode if g else None\n"                  # 5: asks, of a name bound
              "    ok = [c for c in blocks if not c.generation]\n"  # 6: asks
              "    assert side.generation is not None\n"           # 7: a claim, not a branch
              "    if b.generation.depth:\n"                       # 8: asks of the depth
              "        pass\n"
              "    if (h := b.generation) is None:\n"               # 10: asks, through a name
              "        pass\n"
              "    return b.depth and x\n")
    assert generation_questions(ast.parse(source)) == {2, 5, 6, 10}


def test_every_inner_import_says_what_it_defers():
    """An import inside a function, the project's or a third party's, carries a comment on its
    line naming what it defers and why: ``import torch  # torch: only an export needs it``."""
    silent = [f"{i.module}:{i.line}" for i in read_structure(ROOT).silent_inner_imports()]
    assert silent == [], "say what each import defers: # WHAT: WHY"


def test_an_inner_import_comment_names_what_and_why():
    """How the rule above reads a comment: a ``# WHAT: WHY`` on one of the statement's lines;
    a linter's ``noqa`` alone says nothing."""
    source = ("def f():\n"
              "    import torch  # torch: only an export needs it\n"
              "    import pandas  # noqa: F401\n"
              "    import numpy  # numpy: the arrays  # noqa: F401\n"
              "    from pytest_sme2 import units\n"
              "    from pytest_sme2.errors import (  # errors: a cycle otherwise\n"
              "        Sme2Error)\n"
              "import os\n")
    found = inner_imports(ast.parse(source), "m", source)
    assert [(i.line, i.project, i.says_why) for i in found] == [
        (2, False, True), (3, False, False), (4, False, True), (5, True, False),
        (6, True, True)]


def test_an_inner_import_says_what_it_saves_not_only_which_module_it_imports():
    """``# runners.python: not at start-up`` names the module imported later, not what that
    saves: such an import goes to the top of its module, or its comment names the third-party
    package it defers or the start-up cost it saves, measured (``# report.terminal: 38 ms of the
    plugin's start-up``)."""
    named = [f"{i.module}:{i.line}" for i in read_structure(ROOT).module_named_inner_imports()]
    assert named == [], "move it to the top, or say what it saves: # WHAT: WHY"


def test_a_comment_naming_only_our_modules_must_measure_what_it_saves():
    """How the rule above reads a comment: every name before the colon one of our modules (its
    dotted name or its tail), and no figure in ms or s after it."""
    ours = {"pytest_sme2.runners.python", "pytest_sme2.report.terminal", "pytest_sme2.errors"}
    source = ("def f():\n"
              "    from pytest_sme2.runners import python  # runners.python: not at start-up\n"
              "    from pytest_sme2.report import terminal  # terminal: 38 ms of start-up\n"
              "    from pytest_sme2 import errors  # errors, pandas: not at --help\n"
              "    import pytest_sme2.errors  # python, errors: later\n")
    found = inner_imports(ast.parse(source), "m", source, frozenset(ours))
    assert [(i.line, i.only_ours) for i in found] == [(2, True), (3, False), (4, False),
                                                       (5, True)]
    assert names_only_our_modules("# report.terminal and errors: later", ours)
    assert not names_only_our_modules("# report.terminal: ~1.6 ms", ours)
