"""The package's import graph and size, read from the source (no import): circles, imports
that run from a lower layer up to a higher one, modules over 450 lines, the longest functions,
the functions with long parameter lists.

    python -m tests.structure [PACKAGE_DIR]      # a report; default: this checkout's pytest_sme2

Every import statement counts, as a reader counts them: those under ``if TYPE_CHECKING:``,
those inside functions and those in a module's ``__getattr__``. ``from pkg import mod`` counts
as importing ``pkg.mod`` (as import-linter does), not the package's ``__init__``. The layers
(:data:`LAYERS`, keyed by the top level's packages and modules, bottom to top; see
docs/architecture.md) are the rule: a module imports only from its own layer or below.

A function's parameters (:func:`parameters`) are its positional-only, positional and
keyword-only ones, less a method's leading ``self`` or ``cls``; ``*args`` and ``**kwargs``
count one each (a list hidden behind them is still a list the reader must learn). At most
:data:`MAX_LONG_SIGNATURES` functions in the package take :data:`LONG_SIGNATURE` or more:
parameters that travel together are one frozen dataclass, and a loop of helpers passing the
same ones is an object. A public fixture (a function decorated ``@pytest.fixture``) and the
callable it returns (defined inside it) are exempt: that signature is what a user's test
writes, and named parameters (``sme2_generate(model, scheme=..., prompt_tokens=...)``) read
better there than a dataclass to build.

An import inside a function (an inner import) defers something, and says what on its line:
``import torch  # torch: only an export needs it`` (:data:`SAYS_WHAT_IT_DEFERS`: a comment
``# WHAT: WHY``). What it defers is a third-party package, or a start-up cost measured and
stated (``# report.terminal: 40 ms of the plugin's start-up, ...``): a comment that names only
the project's own modules and measures nothing (``# runners.python: not at start-up``) says
which module comes later, not what that saves (:func:`names_only_our_modules`). At most
:data:`MAX_INNER_IMPORTS` of the project's own modules are imported inside functions; every
other import is at the top of its module."""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "pytest_sme2"
MAX_LINES = 450
LONG_SIGNATURE = 7          # parameters from which a signature counts as long
MAX_LONG_SIGNATURES = 5    # how many functions in the package may have one (never raise it)
# Project imports inside functions. Issue 39's move 7 took them from 189 to 70, issue 46 to 45:
# each one left defers pandas, torch, executorch, jinja2, sqlalchemy, adbutils or flatbuffers,
# or keeps 10 ms or more (measured) off the plugin's start-up or --help. Never raise it.
MAX_INNER_IMPORTS = 45
# Places that ask whether something is an LLM's generation (:func:`generation_questions`). A
# generation was a second path through every layer: 47 at 040f6db, when issue 46 counted them.
# What is left is where a generation really runs or is read differently. Never raise it.
MAX_GENERATION_QUESTIONS = 29
# The comment an inner import carries on its line: what it defers, then why ("# torch: only
# an export needs it"). A linter's "noqa:" or "type:" says nothing of the kind.
SAYS_WHAT_IT_DEFERS = re.compile(r"^#(?!\s*(?:noqa\b|type:))[^:]*\w[^:]*:\s*\S")
# A cost measured and stated: "40 ms", "~1.6 ms", "2 s".
MEASURED = re.compile(r"\d[\d.,]*\s*(?:ms|s)\b")
# A top-level package or module -> its layer, bottom to top. A module imports from its own
# layer or below; inside a package, from anywhere in it (no circles still holds).
LAYERS: dict[str, int] = {
    "errors": 0, "_util": 0, "units": 0,              # leaves
    "stats": 1, "readers": 1,                         # statistics; ETDump, ETRecord, .pte readers
    "results": 2,                                     # the records results.json stores
    "analysis": 3,                                    # an ETDump read into those records
    "programs": 4, "baselines": 4,                    # what is under test; what it is judged by
    "gate": 5,                                        # judging
    "emulation": 6, "device_programs": 6, "runners": 6,
    "devices": 7, "fakephone": 7, "instructions": 7,
    "history": 8, "hookspec": 8,
    "measure": 9,                                     # the benchmark loop
    "report": 10, "bisect": 10,                       # bisect: the loop over commits
    "provision": 10,                                  # the machine's needs: only cli/ calls it
    "plugin": 11, "cli": 11, "api": 11, "__init__": 11,
}
# Each layer's name and what it holds: with LAYERS, the layer table of docs/architecture.md
# (written by docs/reference/generate.py; tests/unit/test_reference_docs.py fails when stale).
LAYER_ROLES: dict[int, tuple[str, str]] = {
    0: ("leaves", "no project imports: errors, units, _util/ (versions, locking, buildcache, "
                  "fsutil, heartbeat, protocol_defaults, text)"),
    1: ("readers", "files and statistics, no torch: readers/ (etdump, etrecord, tensorfile, "
                   "pte_program), stats"),
    2: ("records", "what results.json stores (records, timing, block, comparison, judgement, "
                   "machine, pooling, document...), written and read by one codec (codec); "
                   "the one loader. It does not import analysis/"),
    3: ("analysis", "an ETDump's meaning: latency, categories, operators, isa (kernel naming), "
                    "kernels (the SME and SME2 verdicts, dispatch bugs), kernel_map (category "
                    "and ISA family of a kernel), addresses, kernel_trace (QEMU), "
                    "kernel_sample, generation, startup, summary, diff, machine_state (the "
                    "probe's speeds, modes, straddled pairs)"),
    4: ("under test and judged against", "programs/ (export, recipes, .pte, library models, "
                                         "LLMs, the scheme table); baselines/ (key, store, the "
                                         "base programs)"),
    5: ("the gate", "the judgement: decide (the four verdicts), rule (the stored gate, the "
                    "identity rule), robust, ab (the paired rule), policy (GatePolicy), junit"),
    6: ("runners", "what runs a .pte: runners/ (base, spec, python + fork server, binary, "
                   "native/); device_programs/ (preload.c, sme2_probe.c, hwcaps); emulation/ "
                   "(QEMU, the cross toolchain, the aarch64 wheel)"),
    7: ("devices", "where it runs: devices/ (base, kinds, registry, facts, host, qemu, android/, "
                   "thermal, beside: the session's own work beside a block); fakephone/; "
                   "instructions/ (valgrind, callgrind, count)"),
    8: ("history, hooks", "history over commits (history/); the hooks plugins implement "
                          "(hookspec)"),
    9: ("the loop", "measure/: the benchmark loop as library code (options, config, session, "
                    "matrix, block, pairs, benchmark, judging, comparison, precision, aa (A/A "
                    "calibration), artifacts/)"),
    10: ("report, provision, bisect", "report/ (outputs, view, markdown/, terminal, digest, "
                                      "grouping, recommend/, etdump_diff, benchmark_json, "
                                      "github, machine_notes, analysis_text); provision/ "
                                      "(apt, qemu, history: what the machine needs, called "
                                      "by cli/ alone); bisect/ (git "
                                      "worktrees, each commit's programs, the search, the "
                                      "paired comparisons, the state file)"),
    11: ("edges", "pytest (plugin/), the command line (cli/, one module per command), the "
                  "public facade (api)"),
}


@dataclass(frozen=True)
class Function:
    module: str
    name: str
    lines: int
    params: int = 0
    fixture: bool = False       # a public fixture, or the callable one returns (exempt)


def is_fixture(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Decorated ``@pytest.fixture`` (with or without arguments)."""
    return any(ast.unparse(d.func if isinstance(d, ast.Call) else d) in ("pytest.fixture",
                                                                          "fixture")
               for d in node.decorator_list)


def module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = [PACKAGE, *rel.parts]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Positional-only, positional and keyword-only parameters, less a leading ``self`` or
    ``cls``; ``*args`` and ``**kwargs`` one each."""
    a = node.args
    names = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    if a.posonlyargs + a.args and (a.posonlyargs + a.args)[0].arg in ("self", "cls"):
        names = names[1:]
    return len(names) + bool(a.vararg) + bool(a.kwarg)


def layer(module: str) -> int:
    rest = module.removeprefix(PACKAGE + ".") if module != PACKAGE else "__init__"
    parts = rest.split(".")
    for i in range(len(parts), 0, -1):
        key = ".".join(parts[:i])
        if key in LAYERS:
            return LAYERS[key]
    return LAYERS.get(parts[0], max(LAYERS.values()))


def imports(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """The project modules ``module`` imports: every import statement (type-only ones too)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith(PACKAGE + "."))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base == PACKAGE or base.startswith(PACKAGE + "."):
                # "from pkg import mod" imports the module (as import-linter counts it); the
                # package itself only when a name is not a module: marked, resolved later.
                found.add(f"?{base}")
                found.update(f"{base}.{a.name}" for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


@dataclass(frozen=True)
class InnerImport:
    """An import statement inside a function body."""
    module: str
    line: int
    project: bool       # of this package (relative imports included)
    says_why: bool      # a comment on its lines names what it defers
    only_ours: bool = False     # ... and names only our own modules, measuring nothing


def names_only_our_modules(comment: str, modules: set[str]) -> bool:
    """A ``# WHAT: WHY`` comment whose WHAT is only names of the package's own modules
    (``runners.python``, ``python_child``: a module's dotted name or its tail) and whose WHY
    states no measured cost (:data:`MEASURED`)."""
    what, _, why = comment.lstrip("#").partition(":")
    names = [n.strip() for n in re.split(r",|\band\b", what) if n.strip()]
    ours = all(any(m == f"{PACKAGE}.{n}" or m.endswith(f".{n}") for m in modules)
               for n in names)
    return bool(names) and ours and not MEASURED.search(why)


def is_project_import(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.Import):
        return any(a.name == PACKAGE or a.name.startswith(PACKAGE + ".") for a in node.names)
    return bool(node.level) or (node.module or "").split(".")[0] == PACKAGE


def comments(text: str) -> dict[int, list[str]]:
    """Line -> the comments on it, each split at a further ``#`` (``# x: y  # noqa: F401``)."""
    out: dict[int, list[str]] = {}
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            out.setdefault(tok.start[0], []).extend(
                "#" + part for part in tok.string.split("#")[1:])
    return out


def inner_imports(tree: ast.AST, module: str = PACKAGE, text: str = "",
                  modules: frozenset[str] = frozenset()) -> list[InnerImport]:
    """The imports made inside a function body, the project's and third parties';
    ``modules``: the package's modules (what :func:`names_only_our_modules` knows)."""
    notes = comments(text) if text else {}
    found: list[InnerImport] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        if in_function and isinstance(node, (ast.Import, ast.ImportFrom)):
            lines = range(node.lineno, (node.end_lineno or node.lineno) + 1)
            said = [c.strip() for n in lines for c in notes.get(n, ())
                    if SAYS_WHAT_IT_DEFERS.match(c.strip())]
            found.append(InnerImport(module, node.lineno, is_project_import(node), bool(said),
                                     bool(said) and all(names_only_our_modules(c, modules)
                                                        for c in said)))
        inside = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for child in ast.iter_child_nodes(node):
            visit(child, inside)

    visit(tree, False)
    return found


def _is_a_generation(node: ast.AST) -> bool:
    """``x.generation``, ``pool_generation(...)``, ``generation_for(...)``, or either branch
    of a conditional expression that is one."""
    if isinstance(node, ast.IfExp):
        return _is_a_generation(node.body) or _is_a_generation(node.orelse)
    if isinstance(node, ast.Attribute):
        return node.attr == "generation"
    if isinstance(node, ast.Call):
        f = node.func
        return (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")) in (
            "pool_generation", "generation_for")
    return False


def _asks(test: ast.AST, names: set[str]) -> bool:
    """Whether a condition asks of a generation whether it is there: ``x is None``, ``x is
    not None``, ``x`` or ``not x``, alone or in an ``and``/``or``."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _asks(test.operand, names)
    if isinstance(test, ast.NamedExpr):         # (g := x.generation) is asked as x.generation
        return _asks(test.value, names)
    if isinstance(test, ast.BoolOp):
        return any(_asks(v, names) for v in test.values)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and \
            isinstance(test.ops[0], (ast.Is, ast.IsNot)) and \
            isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None:
        return _asks(test.left, names)
    if isinstance(test, ast.Attribute):
        return test.attr == "generation"
    return isinstance(test, ast.Name) and (test.id == "generation" or test.id in names)


def generation_questions(tree: ast.AST) -> set[int]:
    """The lines whose condition (``if``, ``while``, a conditional expression, a
    comprehension's ``if``, ``and``/``or``) asks whether a generation is there: of a
    ``generation`` attribute or name, or of a name its function bound to one
    (:func:`_is_a_generation`). Asserts claim, they do not branch: not counted."""
    found: set[int] = set()
    scopes = [tree, *(n for n in ast.walk(tree)
                      if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))]
    for scope in scopes:
        names = {t.id for n in ast.walk(scope)
                 if isinstance(n, (ast.Assign, ast.AnnAssign, ast.NamedExpr))
                 and getattr(n, "value", None) is not None and _is_a_generation(n.value)
                 for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                 if isinstance(t, ast.Name)}
        for n in ast.walk(scope):
            if isinstance(n, (ast.If, ast.IfExp, ast.While)):
                tests = [n.test]
            elif isinstance(n, ast.comprehension):
                tests = list(n.ifs)
            elif isinstance(n, ast.BoolOp):
                tests = [n]
            else:
                continue
            found |= {t.lineno for t in tests if _asks(t, names)}
    return found


@dataclass
class Structure:
    modules: dict[str, set[str]]        # module -> the project modules it imports
    lines: dict[str, int]
    functions: list[Function]
    inner: list[InnerImport] = field(default_factory=list)
    # (module, line) of each place asking whether a generation is there
    generation_questions: list[tuple[str, int]] = field(default_factory=list)

    @property
    def inner_imports(self) -> int:
        """Project imports inside functions."""
        return sum(i.project for i in self.inner)

    def silent_inner_imports(self) -> list[InnerImport]:
        """Inner imports whose line does not say what they defer."""
        return [i for i in self.inner if not i.says_why]

    def module_named_inner_imports(self) -> list[InnerImport]:
        """Inner imports whose comment names only our own modules
        (:func:`names_only_our_modules`)."""
        return [i for i in self.inner if i.only_ours]

    def circles(self) -> list[list[str]]:
        """Strongly connected groups of more than one module (Tarjan)."""
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on: set[str] = set()
        out: list[list[str]] = []
        counter = [0]

        def strong(v: str) -> None:
            index[v] = low[v] = counter[0]
            counter[0] += 1
            stack.append(v)
            on.add(v)
            for w in self.modules.get(v, ()):
                if w not in index:
                    strong(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                group = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    group.append(w)
                    if w == v:
                        break
                if len(group) > 1:
                    out.append(sorted(group))

        sys.setrecursionlimit(10000)
        for v in sorted(self.modules):
            if v not in index:
                strong(v)
        return sorted(out)

    def upward(self) -> list[tuple[str, str]]:
        """(importer, imported) where the imported module's layer is above the importer's.
        A package's ``__init__`` re-exporting its own modules is not an import up."""
        return sorted((a, b) for a, targets in self.modules.items() for b in targets
                      if layer(b) > layer(a) and not b.startswith(a + "."))

    def long_signatures(self) -> list[Function]:
        """The functions taking ``LONG_SIGNATURE`` parameters or more, the longest first."""
        return sorted((f for f in self.functions
                       if f.params >= LONG_SIGNATURE and not f.fixture),
                      key=lambda f: (-f.params, f.module, f.name))

    def long_modules(self) -> list[tuple[str, int]]:
        return sorted(((m, n) for m, n in self.lines.items() if n > MAX_LINES),
                      key=lambda x: -x[1])


def read_structure(root: Path) -> Structure:
    modules: dict[str, set[str]] = {}
    lines: dict[str, int] = {}
    functions: list[Function] = []
    inner: list[InnerImport] = []
    asked: list[tuple[str, int]] = []
    paths = sorted(root.rglob("*.py"))
    names = frozenset(module_name(path, root) for path in paths)
    for path in paths:
        name = module_name(path, root)
        text = path.read_text()
        tree = ast.parse(text)
        known = imports(tree, name, path.name == "__init__.py")
        modules[name] = known
        inner += inner_imports(tree, name, text, names)
        asked += [(name, line) for line in sorted(generation_questions(tree))]
        lines[name] = len(text.splitlines())
        fixtures = {id(inner) for node in ast.walk(tree)
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and is_fixture(node) for inner in ast.walk(node)}
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append(Function(name, node.name,
                                          (node.end_lineno or node.lineno) - node.lineno + 1,
                                          parameters(node), id(node) in fixtures))

    existing = set(modules)
    for name, targets in modules.items():   # "pkg.mod.name" imports: keep the modules only
        bases = {t[1:] for t in targets if t.startswith("?")}
        names = {t for t in targets if not t.startswith("?")}
        kept = {t for t in names if t in existing}
        kept |= {b for b in bases if any(t.rsplit(".", 1)[0] == b and t not in existing
                                         for t in names)}
        modules[name] = {t for t in kept if t != name}
    return Structure(modules, lines, functions, inner, asked)


def report(root: Path) -> str:
    s = read_structure(root)
    out = [f"{len(s.modules)} modules, {sum(s.lines.values())} lines"]
    circles = s.circles()
    out.append(f"circles: {len(circles)}")
    out += [f"  {' <-> '.join(c)}" for c in circles]
    up = s.upward()
    out.append(f"imports up a layer: {len(up)}")
    out += [f"  {a} (layer {layer(a)}) -> {b} (layer {layer(b)})" for a, b in up]
    long = s.long_modules()
    out.append(f"modules over {MAX_LINES} lines: {len(long)}")
    out += [f"  {m}: {n}" for m, n in long]
    top = sorted(s.functions, key=lambda f: -f.lines)[:5]
    out.append("longest functions: " + ", ".join(f"{f.module}.{f.name} {f.lines}" for f in top))
    over = sum(f.lines > 60 for f in s.functions)
    out.append(f"functions over 60 lines: {over} of {len(s.functions)}")
    out.append(f"project imports inside functions: {s.inner_imports} (at most "
               f"{MAX_INNER_IMPORTS}); third-party: {len(s.inner) - s.inner_imports}")
    silent = s.silent_inner_imports()
    out.append(f"inner imports without a comment saying what they defer: {len(silent)}")
    out += [f"  {i.module}:{i.line}" for i in silent]
    named = s.module_named_inner_imports()
    out.append(f"inner imports whose comment names only our own module: {len(named)}")
    out += [f"  {i.module}:{i.line}" for i in named]
    out.append(f"places asking whether a generation is there: {len(s.generation_questions)} "
               f"in {len({m for m, _ in s.generation_questions})} modules (at most "
               f"{MAX_GENERATION_QUESTIONS})")
    signatures = s.long_signatures()
    out.append(f"functions with {LONG_SIGNATURE} or more parameters: {len(signatures)} "
               f"(at most {MAX_LONG_SIGNATURES})")
    out += [f"  {f.module}.{f.name}: {f.params}" for f in signatures]
    return "\n".join(out)


if __name__ == "__main__":
    print(report(Path(sys.argv[1]) if len(sys.argv) > 1 else
                 Path(__file__).resolve().parent.parent / PACKAGE))
