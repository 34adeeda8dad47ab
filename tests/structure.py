"""The package's import graph and size, read from the source (no import): circles, imports that
run from a lower layer up to a higher one, modules over 450 lines, the longest functions.

    python -m tests.structure [PACKAGE_DIR]      # a report; default: this checkout's pytest_sme2

Imports under ``if TYPE_CHECKING:`` are types only and left out; imports inside functions
count (they run), except in a module's ``__getattr__`` (the deprecation shim of a moved name).
``from pkg import mod`` counts as importing ``pkg.mod`` (as import-linter
does), not the package's ``__init__``. The layers are STYLE.md's, bottom to top; a module
imports only from its own layer or below."""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "pytest_sme2"
MAX_LINES = 450
# Module (or package prefix) -> layer; the longest matching prefix wins.
LAYERS: dict[str, int] = {
    "errors": 0, "versions": 0, "locking": 0, "buildcache": 0, "fsutil": 0,
    "protocol_defaults": 0, "formats": 0,
    "etdump": 1, "etrecord": 1, "tensorfile": 1, "stats": 1, "hwcaps": 1, "thermal": 1,
    "settings": 1, "progress": 1,
    "results": 2, "analysis": 2,
    "export": 3, "exported": 3, "_recipes": 3, "model_spec": 3, "pte_model": 3, "pte_program": 1,
    "library_models": 3, "programs": 3, "baseline_key": 3, "baseline_store": 3,
    "gate": 3, "gate_policy": 3, "gate_ab": 3, "gate_robust": 3, "base_programs": 3,
    "precision": 3, "compare": 3, "matrix": 3, "artifacts": 3, "hooks": 3,
    "runners": 4, "device_programs": 4, "emulation": 4,
    "devices": 5, "fakephone": 5, "measure": 5, "instructions": 5,
    "config": 6, "session": 6, "session_cost": 6, "bench": 6, "benchmarking": 6,
    "scheduling": 6, "hookspec": 6, "history": 6,
    "report": 7,
    "cli": 8, "plugin": 8, "fixtures": 8, "collector": 8, "provision": 8, "__init__": 8,
}


@dataclass(frozen=True)
class Function:
    module: str
    name: str
    lines: int


def module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = [PACKAGE, *rel.parts]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def layer(module: str) -> int:
    rest = module.removeprefix(PACKAGE + ".") if module != PACKAGE else "__init__"
    parts = rest.split(".")
    for i in range(len(parts), 0, -1):
        key = ".".join(parts[:i])
        if key in LAYERS:
            return LAYERS[key]
    return LAYERS.get(parts[0], 8)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """The project modules ``module`` imports at run time."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            return          # a module's shim for moved names, run only when a user asks
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
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


@dataclass
class Structure:
    modules: dict[str, set[str]]        # module -> the project modules it imports
    lines: dict[str, int]
    functions: list[Function]

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

    def long_modules(self) -> list[tuple[str, int]]:
        return sorted(((m, n) for m, n in self.lines.items() if n > MAX_LINES),
                      key=lambda x: -x[1])


def read_structure(root: Path) -> Structure:
    modules: dict[str, set[str]] = {}
    lines: dict[str, int] = {}
    functions: list[Function] = []
    for path in sorted(root.rglob("*.py")):
        name = module_name(path, root)
        text = path.read_text()
        tree = ast.parse(text)
        known = imports(tree, name, path.name == "__init__.py")
        modules[name] = known
        lines[name] = len(text.splitlines())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append(Function(name, node.name,
                                          (node.end_lineno or node.lineno) - node.lineno + 1))
    existing = set(modules)
    for name, targets in modules.items():   # "pkg.mod.name" imports: keep the modules only
        bases = {t[1:] for t in targets if t.startswith("?")}
        names = {t for t in targets if not t.startswith("?")}
        kept = {t for t in names if t in existing}
        kept |= {b for b in bases if any(t.rsplit(".", 1)[0] == b and t not in existing
                                         for t in names)}
        modules[name] = {t for t in kept if t != name}
    return Structure(modules, lines, functions)


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
    return "\n".join(out)


if __name__ == "__main__":
    print(report(Path(sys.argv[1]) if len(sys.argv) > 1 else
                 Path(__file__).resolve().parent.parent / PACKAGE))
