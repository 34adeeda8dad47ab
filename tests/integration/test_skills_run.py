"""Every agent skill (.agents/skills/) run end to end, as an assistant would run it: its steps'
commands, in order, in one shell in a scratch project, each step followed by its success check
(a check that fails fails the test, naming the step). Nothing of the skill is edited: runs are
shrunk from outside, through PYTEST_ADDOPTS (fewer runs and blocks, a smaller matrix where a
skill names none), and the values only a reader knows (a commit range, a tunnel's port) come
from the environment its ``${VAR:?...}`` asks them from. A prerequisite naming another skill's
step ("`sme2-first-benchmark`, step 1") runs that step first, from that skill's text.

Caches are the session's, fresh per test session and shared by the skills: the export cache
(toy_cnn and tiny_llama exported once, by the fixtures other tests use too), the native
runner and the aarch64 wheel under one XDG cache folder. The kernel skill runs on `--device
qemu`, the phone skill against `pytest-sme2 fake-phone` behind the real adb server. Each
skill's time, and its steps', is printed (`-s` shows it)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.bisect_repo import HISTORY, MODEL, build_repo
from tests.conftest import SMALL_LIBRARY_MODEL
from tests.fakes.android import ADB, AdbServer
from tests.needs import missing
from tests.skills import CHECK, PREREQUISITE, RUN, Skill, read_skills, write_skill

SKILLS = {s.name: s for s in read_skills()}
# Every skill's sessions: few runs and blocks (the skills' defaults are for real measurements).
SHRINK = ("-p no:cacheprovider -p no:hydra_pytest -p no:anyio --runs=3 --warmup=1 "
          "--sme2-loads=1 --sme2-trace-runs=1 --sme2-blocks=2 --sme2-max-pairs=6 "
          "--sme2-precision-budget=10 --sme2-prompt-tokens=16 --sme2-new-tokens=8")
# A skill whose commands name no matrix gets the smallest one.
SMALL_MATRIX = "--sme2-models=toy_cnn --sme2-dtypes=fp32 --sme2-threads=1"
NEEDS_QEMU = {"sme2-prove-kernels", "sme2-android-phone", "sme2-read-report"}
TIMEOUT_S = 1500


@dataclass(frozen=True)
class Ran:
    """What a skill's shell did: its exit status, its output, the seconds of each part."""

    rc: int
    output: str
    seconds: dict[str, float]


def _shims(folder: Path) -> Path:
    """pytest, pytest-sme2, python and adb as a user's activated environment has them: this
    interpreter (a checkout's venv need not have the scripts), adbutils' adb."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, target in {"pytest": f'"{sys.executable}" -m pytest',
                         "pytest-sme2": f'"{sys.executable}" -m pytest_sme2.cli',
                         "python": f'"{sys.executable}"', "adb": f'"{ADB}"'}.items():
        (folder / name).write_text(f'#!/bin/sh\nexec {target} "$@"\n')
        (folder / name).chmod(0o755)
    return folder


@pytest.fixture(scope="module")
def skill_env(tmp_path_factory, user_caches, provisioned_qemu, export_cache,
              toy_export) -> dict[str, str]:
    """The environment every skill runs in; its default export cache is the session's."""
    exports = Path(user_caches["XDG_CACHE_HOME"]) / "pytest-sme2" / "exports"
    if not exports.exists():
        exports.parent.mkdir(parents=True, exist_ok=True)
        exports.symlink_to(export_cache, target_is_directory=True)
    bin_dir = _shims(tmp_path_factory.mktemp("skill-bin"))
    env = {**os.environ, **user_caches, **provisioned_qemu,
           "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTEST_ADDOPTS": SHRINK,
           "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTEST_XDIST_WORKER", None)
    return env


def _steps_script(skill: Skill, numbers: list[int] | None = None, prefix: str = "") -> str:
    lines = []
    for step in skill.steps:
        if numbers is not None and step.number not in numbers:
            continue
        lines.append(f"mark '{prefix}{step.number}'")
        lines += [b.text for b in step.shell(RUN)]
        lines.append(f"mark '{prefix}{step.number} check'")
        lines += [b.text for b in step.shell(CHECK)]
    return "\n".join(lines) + "\n"


def prerequisites(skill: Skill) -> list[tuple[Skill, int]]:
    return [(SKILLS[name], int(n))
            for name, n in PREREQUISITE.findall(skill.section("Prerequisites"))]


def run_skill(skill: Skill, project: Path, env: dict[str, str]) -> Ran:
    """The skill's prerequisites' steps, then its own, in one bash in ``project``."""
    project.mkdir(parents=True, exist_ok=True)
    script = ["set -eo pipefail", 'mark() { echo "@@mark $(date +%s.%N) $1"; }']
    for other, number in prerequisites(skill):
        script.append(_steps_script(other, [number], f"{other.name} step "))
    script.append(_steps_script(skill))
    script.append("mark end")
    (project / "skill.sh").write_text("\n".join(script))
    log = project / "skill.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(["bash", "skill.sh"], cwd=project, env=env, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            rc = proc.wait(TIMEOUT_S)
        except subprocess.TimeoutExpired:
            rc = -1
        finally:
            try:     # its own process group: what the skill left running (a fake phone)
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            proc.wait()
    output = log.read_text(errors="replace")
    marks = [(float(t), name) for t, name in re.findall(r"^@@mark (\S+) (.+)$", output, re.M)]
    seconds = {name: round(marks[i + 1][0] - t, 1) for i, (t, name) in enumerate(marks[:-1])}
    return Ran(rc, output, seconds)


def assert_ran(skill: Skill, ran: Ran) -> None:
    marks = re.findall(r"^@@mark \S+ (.+)$", ran.output, re.M)
    total = sum(ran.seconds.values())
    steps = ", ".join(f"{name} {s:.1f} s" for name, s in ran.seconds.items())
    print(f"\nskill {skill.name}: {total:.1f} s ({steps})")
    if ran.rc != 0 or marks[-1:] != ["end"]:
        where = marks[-1] if marks else "before its first step"
        tail = "\n".join(ran.output.splitlines()[-60:])
        pytest.fail(f"{skill.name}: exit {ran.rc} in {where}:\n{tail}", pytrace=False)


def _project(tmp_path: Path, skill: Skill, env: dict[str, str]) -> Path:
    if skill.name in NEEDS_QEMU and not env.get("PYTEST_SME2_QEMU"):
        missing("QEMU 11 for the emulated SME2 device", "run `pytest-sme2 setup qemu`")
    return tmp_path / "project"


def test_first_benchmark(skill_env, tmp_path):
    skill = SKILLS["sme2-first-benchmark"]
    assert_ran(skill, run_skill(skill, _project(tmp_path, skill, skill_env), skill_env))


@pytest.mark.exports((SMALL_LIBRARY_MODEL, "fp32"))     # its fixture, asked for below
def test_benchmark_own_model(skill_env, tmp_path, request):
    try:        # skips on a developer's machine without the extra, fails in CI (tests/needs.py)
        import transformers  # noqa: F401
    except ImportError:
        missing("transformers", "pip install 'pytest-sme2[transformers]'")
    skill = SKILLS["sme2-benchmark-own-model"]
    # Its library model is the tests' own: exported once per session, then found in the cache.
    assert SMALL_LIBRARY_MODEL in skill.body
    request.getfixturevalue("small_library_export")
    assert_ran(skill, run_skill(skill, _project(tmp_path, skill, skill_env), skill_env))


def test_onboard_model(skill_env, tmp_path):
    skill = SKILLS["sme2-onboard-model"]
    assert_ran(skill, run_skill(skill, _project(tmp_path, skill, skill_env), skill_env))


def test_prove_kernels_on_qemu(skill_env, tmp_path):
    skill = SKILLS["sme2-prove-kernels"]
    assert_ran(skill, run_skill(skill, _project(tmp_path, skill, skill_env), skill_env))


def test_android_phone_on_the_fake_phone(skill_env, adb_server: AdbServer, tmp_path):
    skill = SKILLS["sme2-android-phone"]
    env = {**skill_env, **adb_server.env, "ADB_PORT": str(adb_server.port)}
    assert_ran(skill, run_skill(skill, _project(tmp_path, skill, env), env))


def test_gate_pull_request(skill_env, tmp_path):
    skill = SKILLS["sme2-gate-pull-request"]
    env = {**skill_env, "PYTEST_ADDOPTS": f"{SHRINK} {SMALL_MATRIX}"}
    env.pop("GITHUB_STEP_SUMMARY", None)
    assert_ran(skill, run_skill(skill, _project(tmp_path, skill, env), env))


def test_bisect_slowdown(skill_env, tmp_path):
    """A repository whose third commit widens the MLP (16x slower): the culprit found is it."""
    skill = SKILLS["sme2-bisect-slowdown"]
    project = _project(tmp_path, skill, skill_env)
    history = [HISTORY[0],
               ("docs: say what it is", {"README.md": "# a user project\n\nAn MLP.\n"}),
               ("widen the hidden layer", {"mlp_model.py": MODEL.format(width=1024, seed=0)}),
               ("docs: done", {"README.md": "# a user project\n\nA wide MLP.\n"})]
    shas = build_repo(project, history)
    env = {**skill_env, "GOOD": shas[0], "BAD": shas[-1], "BENCHMARK": "test_mlp"}
    ran = run_skill(skill, project, env)
    assert_ran(skill, ran)
    assert (project / "culprits.txt").read_text().split() == [shas[2]]


def test_read_report(skill_env, tmp_path):
    skill = SKILLS["sme2-read-report"]
    env = {**skill_env, "OFF_ETDUMP": "off.etdump", "ON_ETDUMP": "on.etdump"}
    assert_ran(skill, run_skill(skill, _project(tmp_path, skill, env), env))


def test_llm_generation(skill_env, tiny_llama_exports, tmp_path):
    skill = SKILLS["sme2-llm-generation"]
    assert_ran(skill, run_skill(skill, _project(tmp_path, skill, skill_env), skill_env))


def test_every_skill_is_run_here():
    """A new skill gets its test here (this module's tests name every one)."""
    source = Path(__file__).read_text()
    assert [n for n in SKILLS if f'SKILLS["{n}"]' not in source] == []


def test_a_failing_check_fails_the_skill_at_its_step(tmp_path):
    """The runner itself: a check that does not hold stops the shell there, and the failure
    names the step; variables set by one step reach the next."""
    skill = write_skill(
        tmp_path, "s",
        "---\nname: s\ndescription: d\n---\n## Prerequisites\n\n## Steps\n\n### 1. Set\n\n"
        "```bash\nVALUE=41\n```\n\nSuccess: set.\n\n```bash check\ntest \"$VALUE\" = 41\n```\n\n"
        "### 2. Add\n\n```bash\nVALUE=$((VALUE + 1))\n```\n\nSuccess: 43.\n\n"
        "```bash check\ntest \"$VALUE\" = 43\n```\n")
    ran = run_skill(skill, tmp_path / "p", dict(os.environ))
    assert ran.rc != 0 and set(ran.seconds) == {"1", "1 check", "2"}
    with pytest.raises(pytest.fail.Exception, match="in 2 check"):
        assert_ran(skill, ran)
