"""The agent skills in ``.agents/skills/`` read as data: front matter, sections, numbered steps
and their code blocks, the shell commands those blocks run, the files their heredocs write.
tests/unit/test_skills.py checks them against the code; tests/integration/test_skills_run.py
runs their steps; docs/reference/generate.py rewrites their generated blocks.

A skill's ``## Steps`` section is a list of ``### N. Title`` steps. A fenced block's info
string says what it is for: ``bash`` runs (a step's command), ``bash check`` is the step's
success criterion (run after it; it fails when the criterion does not hold), ``bash manual``
is shown and checked against the command line but never run by the test (a real phone, an
SSH tunnel), ``text`` is expected output. Shell state carries from step to step: one shell
runs a skill, as an assistant's terminal would."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKILLS_DIR = ROOT / ".agents" / "skills"
CLAUDE_SKILLS = ROOT / ".claude" / "skills"

# The sections every skill has, in this order (the seed kit's: when to use, prerequisites,
# steps, expected output, success criteria, failure handling).
SECTIONS = ("When to use", "Prerequisites", "Steps", "Expected output", "Success criteria",
            "Failure handling")
# The front matter fields the Agent Skills specification allows (agentskills/agentskills,
# docs/specification.mdx; its reference validator, skills-ref, refuses any other).
FIELDS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
MAX_NAME, MAX_DESCRIPTION, MAX_COMPATIBILITY, MAX_LINES = 64, 1024, 500, 500
NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")

RUN, CHECK, MANUAL = "run", "check", "manual"
GENERATED = re.compile(r"<!-- generated: (?P<what>[^>]*?) -->\n(?P<body>.*?)<!-- /generated -->",
                       re.S)
# A prerequisite that is another skill's step: "`sme2-first-benchmark`, step 1".
PREREQUISITE = re.compile(r"`(sme2-[a-z0-9-]+)`, step (\d+)")
LIST_MARK = re.compile(r"<!-- list: (?P<what>[\w-]+) -->\n(?P<body>(?:\|.*\n)+)")


class SkillError(ValueError):
    """A SKILL.md that cannot be read as a skill: the message names the file and the line."""


@dataclass(frozen=True)
class Block:
    """A fenced code block: ``lang`` (bash, python, text...), ``role`` (run, check, manual for
    shell blocks; None for others) and its text."""

    lang: str
    role: str | None
    text: str
    line: int


@dataclass(frozen=True)
class Step:
    number: int
    title: str
    text: str
    blocks: tuple[Block, ...]
    line: int

    def shell(self, role: str) -> list[Block]:
        return [b for b in self.blocks if b.role == role]


@dataclass(frozen=True)
class Skill:
    path: Path
    front: dict[str, object]
    body: str
    lines: int
    sections: tuple[str, ...]
    steps: tuple[Step, ...]
    blocks: tuple[Block, ...]

    @property
    def name(self) -> str:
        return str(self.front.get("name", ""))

    @property
    def folder(self) -> str:
        return self.path.parent.name

    def section(self, title: str) -> str:
        """The text of ``## title`` up to the next ``## `` heading."""
        match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", self.body, re.M | re.S)
        return match.group(1) if match else ""


@dataclass(frozen=True)
class Command:
    """One simple shell command of a block: its words (quotes removed, variables as written)
    and the line of the SKILL.md it starts on."""

    argv: tuple[str, ...]
    line: int


@dataclass
class Shell:
    """What a shell block holds: its commands, and the files its heredocs write (path ->
    text)."""

    commands: list[Command] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)


def skill_paths(folder: Path = SKILLS_DIR) -> list[Path]:
    return sorted(folder.glob("*/SKILL.md"))


def read_skill(path: Path) -> Skill:
    text = path.read_text()
    front, body, body_line = split_front_matter(text, path)
    blocks = fenced_blocks(body, body_line, path)
    return Skill(path, front, body, len(text.splitlines()),
                 tuple(re.findall(r"^## (.+)$", body, re.M)),
                 tuple(_steps(body, body_line, blocks, path)), tuple(blocks))


def read_skills(folder: Path = SKILLS_DIR) -> list[Skill]:
    return [read_skill(p) for p in skill_paths(folder)]


def write_skill(root: Path, name: str, text: str) -> Skill:
    """A test's own skill: ``text`` as ``root/name/SKILL.md`` (the folder named as the
    specification wants), read back."""
    path = root / name / "SKILL.md"
    path.parent.mkdir()
    path.write_text(text)
    return read_skill(path)


# -- front matter --------------------------------------------------------------------------

def split_front_matter(text: str, path: Path) -> tuple[dict[str, object], str, int]:
    """(fields, body, the body's first line number). A strict subset of YAML, which any YAML
    reader (the reference validator's strictyaml included) reads the same: ``key: value`` on
    one line, a value plain or double-quoted, and ``metadata:`` with indented ``key: value``
    lines under it."""
    lines = text.split("\n")
    if lines[0] != "---":
        raise SkillError(f"{path}:1: a SKILL.md starts with '---' and its front matter")
    try:
        end = lines.index("---", 1)
    except ValueError:
        raise SkillError(f"{path}: the front matter has no closing '---'") from None
    front: dict[str, object] = {}
    current: dict[str, str] | None = None
    for number, line in enumerate(lines[1:end], start=2):
        if line.startswith("  ") and current is not None:
            key, value = _pair(line.strip(), path, number)
            current[key] = value
            continue
        key, value = _pair(line, path, number)
        if key in front:
            raise SkillError(f"{path}:{number}: {key!r} given twice")
        if value == "":
            current = {}
            front[key] = current
        else:
            current = None
            front[key] = value
    return front, "\n".join(lines[end + 1:]), end + 2


def _pair(line: str, path: Path, number: int) -> tuple[str, str]:
    key, sep, value = line.partition(":")
    if not sep or not re.fullmatch(r"[a-z][a-z0-9-]*", key):
        raise SkillError(f"{path}:{number}: expected 'key: value', got {line!r}")
    value = value.strip()
    if value.startswith('"'):
        if not (len(value) > 1 and value.endswith('"')) or '"' in value[1:-1]:
            raise SkillError(f"{path}:{number}: a double-quoted value closes on its line")
        return key, value[1:-1]
    # A plain YAML scalar must not hold ': ' or ' #' (a mapping, a comment) nor start with
    # an indicator character; quote such a value.
    if ": " in value or " #" in value or (value and value[0] in "!&*[]{}|>'%@`,?-"):
        raise SkillError(f"{path}:{number}: quote the value of {key!r} (it holds YAML syntax)")
    return key, value


def front_matter_errors(skill: Skill) -> list[str]:
    """What the specification's rules find wrong with the front matter (empty: valid)."""
    front, errors = skill.front, []
    extra = set(front) - set(FIELDS)
    if extra:
        errors.append(f"fields the specification does not allow: {', '.join(sorted(extra))}")
    name = front.get("name")
    if not isinstance(name, str) or not name:
        errors.append("no 'name'")
    else:
        if len(name) > MAX_NAME:
            errors.append(f"name is {len(name)} characters, over {MAX_NAME}")
        if not NAME.match(name):
            errors.append(f"name {name!r}: lowercase letters, digits and single hyphens only, "
                          "not at either end")
        if name != skill.folder:
            errors.append(f"name {name!r} differs from its folder {skill.folder!r}")
    description = front.get("description")
    if not isinstance(description, str) or not description.strip():
        errors.append("no 'description'")
    else:
        if len(description) > MAX_DESCRIPTION:
            errors.append(f"description is {len(description)} characters, over "
                          f"{MAX_DESCRIPTION}")
        if "<" in description or ">" in description:
            errors.append("description holds '<' or '>' (tools put it inside XML tags)")
    compatibility = front.get("compatibility")
    if compatibility is not None and (not isinstance(compatibility, str)
                                      or not 0 < len(compatibility) <= MAX_COMPATIBILITY):
        errors.append(f"compatibility: 1 to {MAX_COMPATIBILITY} characters")
    metadata = front.get("metadata")
    if metadata is not None and not (isinstance(metadata, dict)
                                     and all(isinstance(v, str) for v in metadata.values())):
        errors.append("metadata: a map of strings to strings")
    if skill.lines >= MAX_LINES:
        errors.append(f"{skill.lines} lines: keep SKILL.md under {MAX_LINES} (details go to "
                      "references/)")
    return errors


# -- body: blocks and steps ----------------------------------------------------------------

FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)


def fenced_blocks(body: str, first_line: int, path: Path) -> list[Block]:
    blocks = []
    for match in FENCE.finditer(body):
        info = match.group(1).split()
        lang = info[0] if info else ""
        role = None
        if lang == "bash":
            tags = set(info[1:])
            if tags - {CHECK, MANUAL}:
                raise SkillError(f"{path}: a bash block's tags are 'check' or 'manual', got "
                                 f"{' '.join(info[1:])!r}")
            role = CHECK if CHECK in tags else MANUAL if MANUAL in tags else RUN
        line = first_line + body.count("\n", 0, match.start()) + 1
        blocks.append(Block(lang, role, match.group(2), line))
    return blocks


def _steps(body: str, first_line: int, blocks: list[Block], path: Path) -> list[Step]:
    match = re.search(r"^## Steps\n(.*?)(?=^## |\Z)", body, re.M | re.S)
    if not match:
        return []
    start = match.start(1)
    heads = list(re.finditer(r"^### (\d+)\. (.+)$", match.group(1), re.M))
    steps = []
    for i, head in enumerate(heads):
        lo = start + head.start()
        hi = start + (heads[i + 1].start() if i + 1 < len(heads) else len(match.group(1)))
        line_lo = first_line + body.count("\n", 0, lo)
        line_hi = first_line + body.count("\n", 0, hi)
        if int(head.group(1)) != i + 1:
            raise SkillError(f"{path}:{line_lo}: step {head.group(1)} should be {i + 1}")
        steps.append(Step(i + 1, head.group(2).strip(), body[lo:hi],
                          tuple(b for b in blocks if line_lo <= b.line < line_hi), line_lo))
    return steps


def inline_code(text: str) -> list[str]:
    """The inline code spans of markdown text outside fenced blocks and generated blocks."""
    return re.findall(r"`([^`\n]+)`", FENCE.sub("", GENERATED.sub("", text)))


# -- shell -------------------------------------------------------------------------------

HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
# Words that start a command without being it.
PREFIXES = {"if", "then", "else", "elif", "do", "while", "until", "!", "time", "exec", "{"}
SEPARATORS = {";", "&&", "||", "|", "&", "(", ")", ";;", "|&", "$("}


def read_shell(block: Block) -> Shell:
    """The simple commands of a shell block, and the files its heredocs write (``cat > F
    <<'EOF'``): their text is content, not commands."""
    out = Shell()
    lines = block.text.split("\n")
    i = 0
    while i < len(lines):
        line, start = lines[i], i
        # A continued line, or a quoted string that spans lines (python -c "..."), is one.
        while (line.endswith("\\") or not _closed(line)) and i + 1 < len(lines):
            i += 1
            line = line[:-1] + " " + lines[i].strip() if line.endswith("\\") \
                else line + "\n" + lines[i]
        i += 1
        heredoc = HEREDOC.search(line)
        if heredoc:
            end = lines.index(heredoc.group(2), i)
            target = re.search(r">\s*(\S+)", line[:heredoc.start()] + line[heredoc.end():])
            if target:
                out.files[target.group(1)] = "\n".join(lines[i:end]) + "\n"
            line = line[:heredoc.start()]
            i = end + 1
        for argv in _simple_commands(line):
            out.commands.append(Command(tuple(argv), block.line + start))
    return out


def _closed(line: str) -> bool:
    """Whether every quote of ``line`` is closed (a heredoc's opening line counts as closed)."""
    if HEREDOC.search(line):
        return True
    try:
        shlex.split(line, comments=True)
        return True
    except ValueError:
        return False


def _simple_commands(line: str) -> list[list[str]]:
    # A digit right before a redirection is its file descriptor (2>&1, 2> err), not a word.
    line = re.sub(r"(?<![\w$])\d+(?=>)", " ", line).replace("$(", " $( ")
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>")
    lexer.commenters = "#"
    lexer.wordchars += "$:{}?*@=,.[]/+-%~^!"
    try:
        tokens = list(lexer)
    except ValueError as e:
        raise SkillError(f"cannot split {line!r}: {e}") from None
    commands: list[list[str]] = []
    current: list[str] = []
    skip_next = False
    for token in tokens:
        if skip_next:
            skip_next = False
            continue
        if token in SEPARATORS or token == "$":
            if current:
                commands.append(current)
            current = []
        elif set(token) <= set("<>&") and ("<" in token or ">" in token):
            skip_next = True          # a redirection and its target
        else:
            current.append(token)
    if current:
        commands.append(current)
    return [c for c in (_strip_prefixes(c) for c in commands) if c]


def _strip_prefixes(argv: list[str]) -> list[str]:
    while argv and (argv[0] in PREFIXES or re.match(r"^[A-Za-z_]\w*=", argv[0])):
        argv = argv[1:]
    if argv[:1] == ["nice"]:
        argv = argv[3:] if argv[1:2] == ["-n"] else argv[1:]
    return argv


def program(argv: tuple[str, ...] | list[str]) -> tuple[str, list[str]]:
    """(``pytest`` or ``pytest-sme2`` or the program's own name, its arguments): ``python -m
    pytest`` is ``pytest``, ``python -m pytest_sme2.cli`` is ``pytest-sme2``."""
    argv = list(argv)
    if len(argv) >= 3 and argv[0] in ("python", "python3") and argv[1] == "-m":
        name = {"pytest": "pytest", "pytest_sme2.cli": "pytest-sme2"}.get(argv[2], argv[2])
        return name, argv[3:]
    return argv[0], argv[1:]


# -- generated blocks and checked lists ----------------------------------------------------

def generated_blocks(text: str) -> list[tuple[str, str]]:
    """(what, body) of each ``<!-- generated: WHAT -->`` ... ``<!-- /generated -->``."""
    return [(m.group("what"), m.group("body")) for m in GENERATED.finditer(text)]


def rewrite_generated(text: str, make) -> str:
    """``text`` with each generated block's body replaced by ``make(what)``."""
    return GENERATED.sub(lambda m: f"<!-- generated: {m.group('what')} -->\n{make(m.group('what'))}"
                         "<!-- /generated -->", text)


def marked_lists(text: str) -> dict[str, list[str]]:
    """``<!-- list: NAME -->`` before a markdown table: NAME -> the first backticked word of
    each row of the table (its header and rule left out)."""
    out = {}
    for match in LIST_MARK.finditer(text):
        rows = match.group("body").strip().split("\n")[2:]
        out[match.group("what")] = [m.group(1) for row in rows
                                    if (m := re.match(r"\|\s*`([^`]+)`", row))]
    return out
