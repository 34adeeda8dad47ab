"""The bisect, start to end: the range checked, the ends exported, the sandwich (GOOD against
BAD, by the gate's paired rule), then the search (:mod:`pytest_sme2.bisect.search`) with a
probe per commit: its programs exported in its own worktree, reused where byte-identical to an
end of the range being searched, else compared with its nearer end. Every culprit is then
measured against its parent for its effect, and the sub-ranges beside it are searched."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from pytest_sme2.errors import Sme2Error
from pytest_sme2.gate.decide import PairBudget
from pytest_sme2.gate.policy import DEFAULT_INSTRUCTIONS_PCT
from pytest_sme2.measure.settings import BenchSettings
from pytest_sme2.results.judgement import CANNOT_TELL, IMPROVEMENT, NO_CHANGE, REGRESSION
from pytest_sme2.bisect import search
from pytest_sme2.bisect.git import Repo, Worktrees, pin_changes
from pytest_sme2.bisect.outcome import Culprit, Outcome, Probe
from pytest_sme2.bisect.exporter import open_sessions
from pytest_sme2.bisect.measures import (Bench, Compared, InstructionBench, KernelBench,
                                         ProbePlan, key)
from pytest_sme2.bisect.programs import (NOTHING_SELECTED, USAGE_ERROR, Exported, Program,
                                         export_commit)
from pytest_sme2.bisect.state import State, load, state_dir


@dataclass(frozen=True)
class Ask:
    """What the command was asked: the range, the user's pytest arguments, and how."""

    good: str
    bad: str
    pytest_args: tuple[str, ...] = ()
    setup: str | None = None
    improvement: bool = False
    all_commits: bool = False
    resume: bool = False
    plan: ProbePlan | None = None
    runner_specs: dict[str, str] = field(default_factory=dict)
    export_timeout_s: float = 1800.0
    most_steps: int = 3
    measure: str = "time"           # or "instructions" (counted, then confirmed in time)
    instructions_pct: float = DEFAULT_INSTRUCTIONS_PCT
    fresh_exports: bool = False     # a new pytest process per commit (the exporter's fallback)


class Bisect:
    """One bisect of ``ask`` in the repository at ``root`` (see the module docstring)."""

    def __init__(self, root: Path, ask: Ask, say: Callable[[str], None] = print):
        self.repo = Repo(root)
        self.ask, self.say = ask, say
        good, bad = self.repo.resolve(ask.good), self.repo.resolve(ask.bad)
        self.commits = [good, *self.repo.commits(good, bad, not ask.all_commits)]
        self.target = IMPROVEMENT if ask.improvement else REGRESSION
        self.state: State = load(state_dir(self.repo.git_dir, good, bad), list(ask.pytest_args)) \
            if ask.resume else State(state_dir(self.repo.git_dir, good, bad),
                                     list(ask.pytest_args))
        self.outcome = Outcome(good=good, bad=bad, direction=self.target)
        self.export_s: list[float] = []

    # -- programs ---------------------------------------------------------------------------
    def exported(self, sha: str) -> Exported:
        got = self.state.exported.get(sha)
        if got is not None:
            return got
        start = time.monotonic()
        path = self.worktrees.add(sha)
        try:
            got = export_commit(path, list(self.ask.pytest_args), self.ask.setup,
                                self.state.store, self.ask.export_timeout_s, self.sessions)
        finally:
            self.worktrees.remove(path)
        got = Exported(got.programs, got.skipped, time.monotonic() - start)
        self.export_s.append(got.seconds)
        self.outcome.seconds["exports"] += got.seconds
        self.outcome.exported += 1
        self.state.exported[sha] = got
        self.state.save()
        return got

    def program(self, i: int, bench: str) -> Program | None:
        got = self.exported(self.commits[i])
        return got.programs.get(bench)

    # -- comparisons ------------------------------------------------------------------------
    def compare(self, base: Program, candidate: Program, what: str,
                bench: Bench | InstructionBench | None = None) -> tuple[Compared, bool]:
        """The comparison by ``bench`` (default: the bisect's measure; measured, or kept from
        before: True)."""
        bench = bench or self.bench
        k = key(base, candidate) if bench.measure == "time" else \
            f"{bench.measure}:{key(base, candidate)}"
        if k in self.state.compared:
            return self.state.compared[k], True
        try:
            got = bench.compare(base, candidate, what)
        except Sme2Error as e:
            self.state.save()
            raise Sme2Error(f"bisect stopped while measuring {what} ({e}); the state is kept "
                            f"in {self.state.folder}: rerun with --resume") from None
        self.state.compared[k] = got
        self.state.save()
        self.outcome.seconds["measuring"] += got.seconds
        self.outcome.pairs_measured += got.pairs
        return got, False

    def differs(self, a: Program, b: Program, what: str) -> Compared | None:
        """b against a: None when their programs are byte-identical."""
        return None if a.sha256 == b.sha256 else self.compare(a, b, what)[0]

    # -- the search -------------------------------------------------------------------------
    def _probe(self, bench: str) -> Callable[[int, int, int], str]:
        def probe(m: int, lo: int, hi: int) -> str:
            sha = self.commits[m]
            p = self.program(m, bench)
            if p is None:
                why = self.state.exported[sha].skipped or f"{bench} not exported"
                self.outcome.skip(sha, why)
                self.say(f"  {sha[:10]}  skipped: {why}")
                return search.SKIP
            # Byte-identical to an end of the range being searched: that end's side. Only
            # the ends: a commit placed in another range's search (before a step was found)
            # says nothing of its side in this one.
            ends = {lo: search.GOOD, hi: search.BAD}
            same = [i for i in ends if self.program(i, bench).sha256 == p.sha256]
            if same:
                side = ends[same[0]]
                self.outcome.reused.append(sha)
                self.outcome.probes.append(Probe(sha, side, 0, "", f"reused "
                                                 f"{self.commits[same[0]][:10]}"))
                self.say(f"  {sha[:10]}  {side}: its program is byte-identical to "
                         f"{self.commits[same[0]][:10]}'s (reused, nothing measured)")
                return side
            order = [(lo, GOOD_FIRST), (hi, BAD_FIRST)]
            if hi - m < m - lo:
                order.reverse()
            side, c = search.UNCLEAR, None
            for other, kind in order:
                base, cand = (self.program(other, bench), p) if kind == GOOD_FIRST else \
                    (p, self.program(other, bench))
                c, _ = self.compare(base, cand, f"{sha[:10]} vs {self.commits[other][:10]}")
                side = self._side(c.status, kind)
                if side != search.UNCLEAR:
                    self.say(f"  {sha[:10]}  {side}: vs {self.commits[other][:10]} "
                             f"{c.word} {c.interval}, {c.evidence}; "
                             f"range {self.commits[lo][:10]}..{self.commits[hi][:10]}")
                    break
            if side == search.UNCLEAR:
                self.say(f"  {sha[:10]}  cannot tell: {c.reason}")
            self.outcome.probes.append(Probe(sha, side, c.pairs, c.interval, c.status))
            return side
        return probe

    def _side(self, status: str, kind: str) -> str:
        """Which side a probe's comparison puts it on: against the good end (probe the
        candidate), the target verdict means bad; against the bad end (probe the base), it
        means good; no change (or the other direction) the other way round."""
        hit = status == self.target
        miss = status in (NO_CHANGE, REGRESSION, IMPROVEMENT) and not hit
        if not (hit or miss):
            return search.UNCLEAR
        if kind == GOOD_FIRST:
            return search.BAD if hit else search.GOOD
        return search.GOOD if hit else search.BAD

    def run(self) -> Outcome:
        start = time.monotonic()
        try:
            self._in_worktrees()
        except KeyboardInterrupt:
            # Ctrl-C: what was learnt is kept, and the line says how to go on.
            self.state.save()
            raise KeyboardInterrupt(f"the bisect's state is kept in {self.state.folder}: the "
                                    "same command with --resume continues") from None
        finally:
            self.outcome.seconds["wall"] = time.monotonic() - start
        if self.outcome.verdict:
            self.state.remove()
        return self.outcome

    def _in_worktrees(self) -> None:
        with Worktrees(self.repo) as self.worktrees:
            # Started first: it imports while the ends' worktrees are checked out.
            self.sessions = open_sessions(self.worktrees.base, self.ask.fresh_exports)
            plan = self.ask.plan or ProbePlan(10.0, PairBudget(), BenchSettings())
            plan = replace(plan, settings=replace(plan.settings,
                                                  report_dir=self.worktrees.base / "blocks"))
            self.timing = Bench(plan, self.ask.runner_specs, self.say)
            self.bench = {"time": lambda: self.timing,
                          "instructions": lambda: InstructionBench(self.ask.instructions_pct,
                                                                   self.say),
                          "kernels": lambda: KernelBench(self.timing, self.target, self.say),
                          }[self.ask.measure]()
            try:
                self._run()
            finally:
                self.timing.close()
                self.sessions.close()

    def _run(self) -> None:
        good, bad, last = self.commits[0], self.commits[-1], len(self.commits) - 1
        self.say(f"bisect {good[:10]}..{bad[:10]}: {last} commit(s), ~"
                 f"{search.expected_probes(last - 1)} probe(s) expected; looking for a "
                 + ("change in the SME2 kernels that ran" if self.ask.measure == "kernels"
                    else "speed-up" if self.target == IMPROVEMENT else "slowdown"))
        ends = [self.exported(good), self.exported(bad)]
        if all(e.skipped.startswith(USAGE_ERROR) for e in ends):
            self.state.remove()
            raise Sme2Error(f"{ends[1].skipped.replace(' after BAD', '')}, at GOOD and BAD "
                            f"alike: the selection is wrong, not the commits; check that "
                            f"`pytest {' '.join(self.ask.pytest_args)}` runs (bisect's own "
                            "options go before GOOD)")
        if ends[0].skipped and ends[1].skipped and not all(
                e.skipped.startswith(NOTHING_SELECTED) for e in ends):
            self.state.remove()
            raise Sme2Error(f"every commit tried is unbuildable, GOOD and BAD alike (BAD: "
                            f"{ends[1].skipped}): check that `pytest "
                            f"{' '.join(self.ask.pytest_args)}` runs in a checkout of BAD")
        if all(e.skipped.startswith(NOTHING_SELECTED) for e in ends):
            ends = [Exported({}), Exported({})]          # said once, below
        for sha, got in zip((good, bad), ends):
            if got.skipped:
                self.state.remove()         # bad input: nothing left behind
                raise Sme2Error(f"{'GOOD' if sha == good else 'BAD'} {sha[:10]} cannot be "
                                f"exported: {got.skipped}")
        benches = [b for b in ends[0].programs if b in ends[1].programs]
        if not benches:
            self.state.remove()
            raise Sme2Error("no benchmark selected at both GOOD and BAD: pass the pytest "
                            "arguments that select one (e.g. benchmarks -k test_latency)")
        self._measurable([ends[0].programs[b] for b in benches])
        for bench in benches:
            self._bisect(bench)

    def _measurable(self, programs: list[Program]) -> None:
        """--measure instructions counts on the host; --measure kernels traces on qemu."""
        need = {"instructions": ("host", "counts on the host only", "bisect it in time"),
                "kernels": ("qemu", "traces kernels on --device qemu only",
                            "add --device qemu to the selection")}.get(self.ask.measure)
        wrong = [p for p in programs if need and p.device.split(":")[0] != need[0]]
        if wrong:
            self.state.remove()
            raise Sme2Error(f"--measure {self.ask.measure} {need[1]}; {wrong[0].benchmark} "
                            f"runs on {wrong[0].device}: {need[2]}")

    def _bisect(self, bench: str) -> None:
        last = len(self.commits) - 1
        a, b = self.program(0, bench), self.program(last, bench)
        self.say(f"{bench}: sandwich GOOD vs BAD ({a.where}); an export took "
                 f"{max(self.export_s or [0]):.0f} s")
        if a.sha256 == b.sha256:
            self.outcome.not_reproducible(bench, "GOOD and BAD export byte-identical "
                                                 "programs")
            return
        c, _ = self.compare(a, b, "GOOD vs BAD")
        self.outcome.probes.append(Probe(self.commits[last], "sandwich", c.pairs, c.interval,
                                         c.status))
        if c.status == CANNOT_TELL:
            self._deterministic_enough(bench, a, c)
        if c.status != self.target:
            self.outcome.not_reproducible(bench, c.reason)
            return
        per_probe = c.seconds / max(c.pairs, 1) * 3 + max(self.export_s or [0])
        probes = search.expected_probes(last - 1)
        self.say(f"{bench}: {c.word} {c.interval} ({c.evidence}, {c.seconds:.1f} "
                 f"s); ~{probes} probe(s) left, about {probes * per_probe / 60:.1f} min")
        probe = self._probe(bench)

        def ends_differ(i: int, j: int) -> bool:
            pi, pj = self.program(i, bench), self.program(j, bench)
            if pi is None or pj is None:
                return False
            what = f"{self.commits[i][:10]}..{self.commits[j][:10]}"
            got = self.differs(pi, pj, what)
            differ = got is not None and got.status == self.target
            self.say(f"  range {what}: " + ("byte-identical programs" if got is None else
                     f"{got.word} {got.interval}, {got.evidence}")
                     + ("; searching it" if differ else ""))
            return differ

        found = search.find_steps(last, probe, ends_differ, self.ask.most_steps)
        for step in found.steps:
            self._culprit(bench, step)

    def _deterministic_enough(self, bench: str, good: Program, sandwich: Compared) -> None:
        """When GOOD vs BAD cannot tell: GOOD against itself. If that cannot tell either, the
        benchmark's unchanged-vs-unchanged spread is too wide to bisect at this threshold and
        budget: one line, and nothing more spent."""
        same, _ = self.compare(good, good, "GOOD vs GOOD")
        if same.status == NO_CHANGE:
            return
        self.state.remove()
        raise Sme2Error(f"{bench} is not deterministic enough to bisect at "
                        f"{self.timing.plan.threshold_pct:g}%: GOOD against itself reads "
                        f"{same.word} {same.interval} after {same.pairs} "
                        f"pairs (GOOD vs BAD: {sandwich.interval}); raise --threshold, --runs "
                        "or --max-pairs, or bisect on a quieter machine or --measure "
                        "instructions")

    def _culprit(self, bench: str, step: search.Step) -> None:
        lo, hi = self.commits[step.lo], self.commits[step.hi]
        if step.unclear is not None:
            self.outcome.unclear(bench, lo, hi)
            self.say(f"cannot tell: {bench}: the step lies in {lo[:10]}..{hi[:10]}; a probe "
                     "could not be resolved within the pairs budget")
            return
        c = self.differs(self.program(step.lo, bench), self.program(step.hi, bench),
                         f"{hi[:10]} vs its parent")
        confirmed = None
        if self.ask.measure == "instructions":    # a count found it: is it slower in time?
            confirmed, _ = self.compare(self.program(step.lo, bench),
                                        self.program(step.hi, bench),
                                        f"{hi[:10]} vs its parent, in time", self.timing)
            self.say(f"  {hi[:10]} vs its parent in time: "
                     f"{confirmed.word} {confirmed.interval}, "
                     f"{confirmed.evidence}")
        commit = self.repo.commit(hi)
        pins = pin_changes(self.repo.pins(f"{hi}^"), self.repo.pins(hi))
        culprit = Culprit(bench, commit.sha, commit.subject, commit.date, lo,
                          [self.commits[i] for i in step.skipped], c, pins, confirmed)
        self.outcome.culprits.append(culprit)


GOOD_FIRST, BAD_FIRST = "vs good", "vs bad"
