"""The agent skills (.agents/skills/) against the specification and against the code: their
front matter by the Agent Skills rules, their sections and steps, and every command,
subcommand, option, ini name, device kind and fixture they name, through the real parsers (the
``pytest-sme2`` argparse parser; pytest's own parser with this plugin and pytest-xdist
registered; ``config_from_options`` for the values). A flag renamed in the code fails the test
of each skill that names it, with the line. The lists the code holds (verdicts, what a cannot
tell does) are compared with the skills' tables; the device kinds, schemes and option tables
are generated into them (docs/reference/generate.py, checked by test_reference_docs.py).
tests/integration/test_skills_run.py runs their steps."""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import io
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from _pytest.config import get_config
from _pytest.fixtures import getfixturemarker

from pytest_sme2 import hookspec
from pytest_sme2.analysis.kernels import SME2_VERDICTS
from pytest_sme2.cli import build_parser
from pytest_sme2.devices.kinds import KINDS
from pytest_sme2.errors import Sme2Error
from pytest_sme2.gate.policy import ON_UNRESOLVED
from pytest_sme2.measure import options as option_table
from pytest_sme2.measure.config import BaseDirs, config_from_options
from pytest_sme2.results.judgement import STATUSES
from pytest_sme2.runners.spec import runner_kinds
from tests.skills import (CHECK, CLAUDE_SKILLS, PREREQUISITE, ROOT, RUN, SECTIONS, SKILLS_DIR,
                          Skill, front_matter_errors, inline_code, marked_lists, program,
                          read_shell, read_skills, split_front_matter, write_skill)

PLUGINS = ("pytest_sme2.plugin", "xdist.plugin", "xdist.looponfail")
# The lists the code holds that a skill's marked table (<!-- list: NAME -->) must equal.
LISTS = {"gate-verdicts": STATUSES, "sme2-verdicts": SME2_VERDICTS,
         "on-unresolved": ON_UNRESOLVED}
# Flags of other programs that skills name in prose (pip, ssh, adb, llama.cpp's script).
EXTERNAL_FLAGS = {"--index-url", "--use_sdpa_with_kv_cache", "--data_path"}
# The messages a quoted error is matched against are those sharing a run of SHINGLE
# characters with it.
SHINGLE = 12
SKILLS = read_skills()


@dataclass
class Known:
    """What the code offers, read from the real parsers and the plugin."""

    pytest_parser: object
    cli: argparse.ArgumentParser
    pytest_flags: set[str]
    inis: set[str]
    fixtures: set[str]
    runner_kinds: tuple[str, ...] = ()
    cli_flags: dict[str, set[str]] = field(default_factory=dict)   # subcommand -> its flags
    messages: list[str] = field(default_factory=list)              # literal text of the package
    shingles: dict[str, set[int]] = field(default_factory=dict)    # run -> messages holding it

    def parse_pytest(self, args: list[str]) -> argparse.Namespace:
        return self.pytest_parser.parse(args)


def known_now() -> Known:
    config = get_config()
    for name in PLUGINS:
        config.pluginmanager.register(importlib.import_module(name), name)
    if not hasattr(config.hook, "pytest_sme2_runner_kinds"):   # pytest_addhooks ran before
        config.pluginmanager.add_hookspecs(hookspec)
    parser = config._parser
    flags = {n for opt in [*parser._anonymous.options,
                           *(o for g in parser._groups for o in g.options)] for n in opt.names()}
    fixtures = {"request"} | _parametrized(PLUGINS[0])
    for plugin in config.pluginmanager.get_plugins():
        for value in vars(plugin).values() if hasattr(plugin, "__dict__") else ():
            marker = getfixturemarker(value)
            if marker is not None:
                fixtures.add(marker.name or getattr(value, "name", None) or value.__name__)
    cli = build_parser()
    known = Known(parser, cli, flags, set(parser._inidict), fixtures, runner_kinds(config.hook))
    for name, sub in _subparsers(cli).items():
        known.cli_flags[name] = _all_flags(sub)
    return known


def _parametrized(module: str) -> set[str]:
    """The names a plugin's pytest_generate_tests parametrizes (``sme2_case``...): what a
    test asks for like a fixture."""
    tree = ast.parse(Path(importlib.import_module(module).__file__).read_text())
    return {call.args[0].value for call in ast.walk(tree)
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and call.func.attr == "parametrize" and call.args
            and isinstance(call.args[0], ast.Constant)}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _all_flags(parser: argparse.ArgumentParser) -> set[str]:
    flags = {s for a in parser._actions for s in a.option_strings}
    for sub in _subparsers(parser).values():
        flags |= _all_flags(sub)
    return flags


STAR = "\0"      # a wildcard: a value of an f-string, or "..." in a quoted error


def package_messages() -> list[str]:
    """Every string of the package's source as a pattern: an f-string's values are
    wildcards, and so are its two ends (a message may be one piece of a longer one)."""
    out = []
    for path in (ROOT / "pytest_sme2").rglob("*.py"):
        tree = ast.parse(path.read_text())
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef))
                      and n.body and isinstance(n.body[0], ast.Expr)}
        for node in ast.walk(tree):
            if id(node) in docstrings:
                continue
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
            elif isinstance(node, ast.JoinedStr):
                text = "".join(v.value if isinstance(v, ast.Constant) else STAR
                               for v in node.values)
            else:
                continue
            if len(text.replace(STAR, "")) >= 8:
                out.append(STAR + text + STAR)
    return out


def patterns_meet(a: str, b: str) -> bool:
    """Whether some text matches both patterns (STAR in either matches any run of text)."""
    reach = {(0, 0)}
    seen = set()
    while reach:
        i, j = reach.pop()
        if (i, j) in seen:
            continue
        seen.add((i, j))
        if i == len(a) and j == len(b):
            return True
        if i < len(a) and a[i] == STAR:
            reach |= {(i + 1, j)} | ({(i, j + 1)} if j < len(b) else set())
        if j < len(b) and b[j] == STAR:
            reach |= {(i, j + 1)} | ({(i + 1, j)} if i < len(a) else set())
        if i < len(a) and j < len(b) and a[i] == b[j] != STAR:
            reach.add((i + 1, j + 1))
    return False


@pytest.fixture(scope="module")
def known() -> Known:
    k = known_now()
    k.messages = package_messages()
    for n, message in enumerate(k.messages):
        for i in range(len(message) - SHINGLE + 1):
            k.shingles.setdefault(message[i:i + SHINGLE], set()).add(n)
    return k


# -- the checks ------------------------------------------------------------------------------

def command_problems(skill: Skill, known: Known) -> list[str]:
    """Every shell command of the skill that pytest-sme2 or pytest would refuse, every file its
    heredocs write that names an unknown fixture or ini name."""
    out = []
    for block in skill.blocks:
        if block.role is None:
            if block.lang == "python":
                out += [f"line {block.line}: {p}" for p in fixture_problems(block.text, known)]
            continue
        shell = read_shell(block)
        for command in shell.commands:
            out += [f"line {command.line}: {p}" for p in argv_problems(list(command.argv), known)]
        for path, text in shell.files.items():
            if path.endswith(".py"):
                out += [f"line {block.line} ({path}): {p}" for p in fixture_problems(text, known)]
            elif path.endswith(("pytest.ini", "tox.ini", "setup.cfg")):
                out += [f"line {block.line} ({path}): {p}" for p in ini_problems(text, known)]
    return out


def argv_problems(argv: list[str], known: Known) -> list[str]:
    name, args = program(argv)
    if name == "pytest-sme2":
        return cli_problems(args, known)
    if name == "pytest":
        return pytest_problems(args, known)
    return []


def cli_problems(args: list[str], known: Known) -> list[str]:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            ns = known.cli.parse_args(args)
    except SystemExit:
        error = err.getvalue().strip().splitlines()[-1].split("error: ", 1)[-1]
        return [f"pytest-sme2 {' '.join(args)}: {error}"]
    if getattr(ns, "command", None) == "bisect":     # after BAD: a pytest selection
        return pytest_problems(list(ns.pytest_args), known)
    return []


def pytest_problems(args: list[str], known: Known) -> list[str]:
    try:
        ns = known.parse_pytest(args)
    except pytest.UsageError as e:
        error = str(e).strip().splitlines()[-1].split("error: ", 1)[-1]
        return [f"pytest {' '.join(args)}: {error}"]
    values = {dest: getattr(ns, dest, None) for dest in
              (*option_table.OPTIONS, *option_table.FLAGS, option_table.RUNNERS_DEST)}
    out = [f"--device {d!r}: no device kind {d.partition(':')[0]!r} ({', '.join(KINDS)})"
           for d in values.get("device") or () if d.partition(":")[0] not in KINDS]
    here = Path.cwd()
    try:
        config_from_options(values, {}, BaseDirs(here, here), known.runner_kinds)
    except Sme2Error as e:
        out.append(f"pytest {' '.join(args)}: {e}")
    return out


def fixture_problems(source: str, known: Known) -> list[str]:
    """Arguments of test functions and fixtures that are neither a known fixture nor one the
    same code defines."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return [f"python does not parse: {e}"]
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    own = {f.name for f in functions if any("fixture" in ast.unparse(d) for d in f.decorator_list)}
    out = []
    for f in functions:
        if f.name.startswith("test_") or f.name in own:
            out += [f"{f.name}: no fixture {a.arg!r}" for a in f.args.args
                    if a.arg not in known.fixtures | own]
    return out


def ini_problems(text: str, known: Known) -> list[str]:
    keys = re.findall(r"^([A-Za-z_][\w-]*)\s*=", text, re.M)
    return [f"no ini option {k!r}" for k in keys if k not in known.inis]


def prose_problems(skill: Skill, known: Known) -> list[str]:
    """Flags, subcommands, fixtures and ini names in inline code outside code blocks."""
    out = []
    all_flags = known.pytest_flags | set().union(*known.cli_flags.values()) | EXTERNAL_FLAGS
    for span in inline_code(skill.body):
        words = span.split()
        flags = re.findall(r"(?<![\w-])--[a-z0-9]+(?:-[a-z0-9]+)*(?![\w-])", span)
        if words[:1] == ["pytest-sme2"] and len(words) > 1 and not words[1].startswith("-"):
            sub = words[1]
            if sub not in known.cli_flags:
                out.append(f"`{span}`: no subcommand {sub!r}")
                continue
            allowed = known.cli_flags[sub] | (known.pytest_flags if sub == "bisect" else set())
        elif words[:1] == ["pytest"]:
            allowed = known.pytest_flags
        else:
            allowed = all_flags
        out += [f"`{span}`: no option {f}" for f in flags if f not in allowed]
        ident = re.fullmatch(r"(sme2_\w+)(?:\(.*\))?(?:\.\w+)*", span)
        if ident and ident.group(1) not in known.fixtures | known.inis:
            out.append(f"`{span}`: no fixture or ini option {ident.group(1)!r}")
    for what, _ in _generated(skill):
        kind, *args = what.split()
        if kind == "options":
            out += [f"generated block: no option {f}" for f in args
                    if f not in known.pytest_flags]
    return out


def _generated(skill: Skill):
    from tests.skills import generated_blocks

    return generated_blocks(skill.body)


def not_ours(skill: Skill, known: Known) -> list[str]:
    """Quoted errors (a failure table row whose first cell is one code span; ``...`` stands
    for what is left out) that no string of the package can have printed."""
    out = []
    for row in re.findall(r"^\| `([^`]+)` \|", skill.section("Failure handling"), re.M):
        quote = re.sub(r"\.\.\.|…", STAR, row.replace("\\|", "|"))
        runs = [r for r in quote.split(STAR) if len(r) >= SHINGLE]
        candidates = {m for r in runs for i in range(len(r) - SHINGLE + 1)
                      for m in known.shingles.get(r[i:i + SHINGLE], ())}
        if not any(patterns_meet(quote, known.messages[m]) for m in candidates):
            out.append(f"not a message of the package: `{row}`")
    return out


# -- the tests -------------------------------------------------------------------------------

def test_the_skills_are_where_the_tools_look():
    """.agents/skills/NAME/SKILL.md for Codex, Copilot, Gemini CLI and Cursor; .claude/skills
    a relative link to it for Claude Code; AGENTS.md and the README name them."""
    assert len(SKILLS) >= 9
    assert CLAUDE_SKILLS.is_symlink() and not Path(CLAUDE_SKILLS.readlink()).is_absolute()
    assert CLAUDE_SKILLS.resolve() == SKILLS_DIR.resolve()
    agents = (ROOT / "AGENTS.md").read_text()
    for skill in SKILLS:
        assert f"[{skill.name}](.agents/skills/{skill.name}/SKILL.md)" in agents
    assert ".agents/skills" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("skill", SKILLS, ids=[s.folder for s in SKILLS])
def test_front_matter_follows_the_specification(skill: Skill):
    assert front_matter_errors(skill) == []
    assert "Use when" in str(skill.front["description"])


def test_the_front_matter_reads_the_same_in_any_yaml_reader():
    """The strict subset tests/skills.py reads is plain YAML: PyYAML agrees with it (the
    reference validator reads it with strictyaml)."""
    for skill in SKILLS:
        text = skill.path.read_text()
        assert yaml.safe_load(text.split("---\n")[1]) == skill.front, skill.folder


@pytest.mark.parametrize("text, error", [
    ("---\nname: Bad_Name\ndescription: x. Use when y.\n---\n", "lowercase letters"),
    ("---\nname: a--b\ndescription: x\n---\n", "lowercase letters"),
    ("---\nname: other\ndescription: x\n---\n", "differs from its folder"),
    ("---\nname: s\ndescription: a <tag>\n---\n", "'<' or '>'"),
    ("---\nname: s\ndescription: x\nversion: 1\n---\n", "does not allow: version"),
    (f"---\nname: s\ndescription: {'x' * 1025}\n---\n", "over 1024"),
    (f"---\nname: s\ndescription: x\ncompatibility: {'y' * 501}\n---\n", "compatibility"),
])
def test_the_front_matter_check_refuses_what_the_specification_refuses(tmp_path, text, error):
    assert any(error in e for e in front_matter_errors(write_skill(tmp_path, "s", text)))


def test_a_value_yaml_would_read_otherwise_must_be_quoted(tmp_path):
    with pytest.raises(ValueError, match="quote the value"):
        split_front_matter("---\nname: s\ndescription: what: it does\n---\n", tmp_path)


@pytest.mark.parametrize("skill", SKILLS, ids=[s.folder for s in SKILLS])
def test_every_skill_has_the_kits_sections_and_checked_steps(skill: Skill):
    assert [s for s in skill.sections if s in SECTIONS] == list(SECTIONS), skill.sections
    assert skill.steps, "no steps"
    for step in skill.steps:
        assert step.shell(RUN), f"step {step.number} runs nothing"
        assert step.shell(CHECK), f"step {step.number} has no success check"
        assert "Success:" in step.text, f"step {step.number} does not say its criterion"
    in_steps = {b.line for s in skill.steps for b in s.blocks}
    stray = [b.line for b in skill.blocks if b.role in (RUN, CHECK) and b.line not in in_steps]
    assert stray == [], f"run or check blocks outside the steps (use 'bash manual'): {stray}"


@pytest.mark.parametrize("skill", SKILLS, ids=[s.folder for s in SKILLS])
def test_every_command_and_fixture_a_skill_names_exists(skill: Skill, known: Known):
    problems = command_problems(skill, known) + prose_problems(skill, known)
    assert not problems, "\n".join([f"{skill.path.relative_to(ROOT)}:", *problems])


@pytest.mark.parametrize("skill", SKILLS, ids=[s.folder for s in SKILLS])
def test_every_shell_block_is_valid_bash(skill: Skill):
    """``bash -n`` on each shell block (an apostrophe inside ``${VAR:?...}`` within double
    quotes, say, leaves a quote open)."""
    bad = []
    for block in skill.blocks:
        if block.role is not None:
            proc = subprocess.run(["bash", "-n"], input=block.text, capture_output=True,
                                  text=True, timeout=30)
            if proc.returncode:
                bad.append(f"line {block.line}: {proc.stderr.strip()}")
    assert bad == []


@pytest.mark.parametrize("skill", SKILLS, ids=[s.folder for s in SKILLS])
def test_the_errors_a_skill_quotes_are_the_packages_own(skill: Skill, known: Known):
    wrong = not_ours(skill, known)
    assert not wrong, "\n".join([f"{skill.path.relative_to(ROOT)}:", *wrong])


@pytest.mark.parametrize("skill", SKILLS, ids=[s.folder for s in SKILLS])
def test_lists_the_code_holds_match_the_skills_tables(skill: Skill):
    for name, listed in marked_lists(skill.body).items():
        assert name in LISTS, f"no list {name!r} in the code ({', '.join(LISTS)})"
        assert listed == list(LISTS[name]), f"{name}: the skill lists {listed}"


def test_every_list_the_code_holds_is_in_a_skill():
    marked = {name for skill in SKILLS for name in marked_lists(skill.body)}
    assert set(LISTS) <= marked


@pytest.mark.parametrize("skill", SKILLS, ids=[s.folder for s in SKILLS])
def test_the_skills_and_steps_a_skill_refers_to_exist(skill: Skill):
    names = {s.name: s for s in SKILLS}
    for span in inline_code(skill.body):
        if re.fullmatch(r"sme2-[a-z0-9-]+", span):
            assert span in names, f"no skill {span!r}"
    prerequisites = skill.section("Prerequisites")
    for other, step in PREREQUISITE.findall(prerequisites):
        assert int(step) <= len(names[other].steps), f"{other} has no step {step}"


# -- the checks can fail -----------------------------------------------------------------------

def test_a_renamed_option_fails_the_skills_that_name_it(monkeypatch):
    """--save-baseline renamed in the option table: the gate skill's commands are refused, with
    the line, and a skill that does not name it is not."""
    renamed_flags = {("save_baselines" if dest == "save_baseline" else dest): text
                     for dest, text in option_table.FLAGS.items()}
    for module in (option_table, importlib.import_module(PLUGINS[0])):
        monkeypatch.setattr(module, "FLAGS", renamed_flags)
    renamed = known_now()
    gate = next(s for s in SKILLS if s.name == "sme2-gate-pull-request")
    problems = command_problems(gate, renamed) + prose_problems(gate, renamed)
    assert any("unrecognized arguments: --save-baseline" in p and p.startswith("line ")
               for p in problems), problems
    assert any("no option --save-baseline" in p for p in problems), problems
    first = next(s for s in SKILLS if s.name == "sme2-first-benchmark")
    assert command_problems(first, renamed) == []


def test_bad_commands_values_fixtures_and_inis_are_found(known: Known, tmp_path):
    skill = write_skill(
        tmp_path, "x",
        "---\nname: x\ndescription: d. Use when e.\n---\n## Steps\n\n### 1. Go\n\n```bash\n"
        "pytest-sme2 rum m.pte\n"
        "pytest-sme2 run m.pte --etdump e --kernel-trace k.csv --runs-per-block 3\n"
        "pytest benchmarks --sme2-dtypes bf16 --device phone\n"
        "python -m pytest benchmarks --sme2-modelz toy_cnn\n"
        "pytest-sme2 bisect a b -k x --sme2-threads\n"
        "cat > benchmarks/test_x.py <<'EOF'\ndef test_x(sme2_bench, sme2_benchmark):\n    pass\n"
        "EOF\ncat > pytest.ini <<'EOF'\n[pytest]\nsme2_model = toy_cnn\nEOF\n```\n\n"
        "Use `pytest --sme2-modes` and `pytest-sme2 gate --threshold 5`, `sme2_bench_llm`.\n")
    found = "\n".join(command_problems(skill, known) + prose_problems(skill, known))
    for expected in ("invalid choice: 'rum'", "unrecognized arguments: --runs-per-block",
                     "unknown dtype 'bf16'", "no device kind 'phone'",
                     "unrecognized arguments: --sme2-modelz",
                     "--sme2-threads: expected one argument", "no fixture 'sme2_benchmark'",
                     "no ini option 'sme2_model'", "no option --sme2-modes",
                     "no option --threshold", "no fixture or ini option 'sme2_bench_llm'"):
        assert expected in found, (expected, found)


def test_an_invented_error_is_not_taken_for_ours(known: Known, tmp_path):
    skill = write_skill(
        tmp_path, "x",
        "---\nname: x\ndescription: d\n---\n## Failure handling\n\n| a | b | c |\n|---|---|---|\n"
        "| `the benchmark could not find its accelerator board` | b | c |\n"
        "| `unknown model 'x'; registered models: ... (register your own with "
        "pytest_sme2_models.register_model)` | b | c |\n")
    assert not_ours(skill, known) == [
        "not a message of the package: `the benchmark could not find its accelerator board`"]


def test_every_sme2_flag_the_packages_messages_name_exists(known: Known):
    """A message telling the user to pass an option names a real one (one said
    `--sme2-runner python`, which never existed)."""
    named = {f for m in known.messages
             for f in re.findall(r"(?<![\w-])--sme2-[a-z0-9]+(?:-[a-z0-9]+)*(?![\w-])", m)}
    assert named - known.pytest_flags - set().union(*known.cli_flags.values()) == set()
