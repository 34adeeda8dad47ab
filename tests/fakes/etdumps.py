"""Crafted ETDumps for tests, written with ExecuTorch's own schema serializer (flatc), so the
reader is checked against the reference writer rather than against itself."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from executorch.devtools.etdump import schema_flatcc as s
from executorch.devtools.etdump.serialize import serialize_to_etdump_flatcc


@dataclass
class Ev:
    """One profile event. ``debug`` set = a delegate event (XNNPACK style: empty name)."""

    name: str | None
    start: int
    end: int
    instruction_id: int = -1
    debug: str | None = None


def execute_run(t0: int, ops: list[tuple[str, int]], *, delegate: bool = True) -> list[Ev]:
    """A plausible Execute block: ops inside one DELEGATE_CALL (or portable OPERATOR_CALLs),
    then Method::execute around everything. Durations in ns."""
    events, t = [], t0 + 100
    for name, dur in ops:
        if delegate:
            events.append(Ev(None, t, t + dur, 0, debug=name))
        else:
            events.append(Ev(f"native_call_{name}.out", t + 10, t + dur - 10, 0))
            events.append(Ev("OPERATOR_CALL", t, t + dur, 0))
        t += dur
    if delegate:
        events.append(Ev("DELEGATE_CALL", t0 + 50, t + 50, 0))
    events.append(Ev("Method::execute", t0, t + 100, 0))
    return events


def _profile(ev: Ev) -> s.Event:
    pe = s.ProfileEvent(name=ev.name, chain_index=0, instruction_id=ev.instruction_id,
                        delegate_debug_id_int=-1, delegate_debug_id_str=ev.debug,
                        delegate_debug_metadata=None, start_time=ev.start, end_time=ev.end)
    return s.Event(profile_event=pe, allocation_event=None, debug_event=None)


def make_etdump(runs: list[list[Ev]], *, init_block: bool = True, size_prefixed: bool = True,
                extra_events: bool = False) -> bytes:
    blocks = []
    if init_block:
        blocks.append(s.RunData(name="Default", bundled_input_index=-1, allocators=[],
                                events=[_profile(Ev("Method::init", 10, 500)),
                                        _profile(Ev("Program::load_method", 5, 600))]))
    for events in runs:
        evs = [_profile(e) for e in events]
        if extra_events:  # allocation events carry no timing: the reader must skip them
            evs.insert(0, s.Event(profile_event=None, debug_event=None,
                                  allocation_event=s.AllocationEvent(allocator_id=0,
                                                                     allocation_size=64)))
        blocks.append(s.RunData(name="Execute", bundled_input_index=-1, allocators=[],
                                events=evs))
    buf = serialize_to_etdump_flatcc(s.ETDumpFlatCC(version=0, run_data=blocks))
    return struct.pack("<I", len(buf)) + buf if size_prefixed else buf


def program_run(t0: int, calls: list[tuple[str, int, list[tuple[str, int]]]],
                framework_ns: int = 100) -> list[Ev]:
    """An Execute block of several calls in order. Each call is ``("delegate", instruction,
    [(op, ns), ...])`` — per-op events inside one DELEGATE_CALL — or ``("portable",
    instruction, [(op, ns)])`` — ``native_call_<op>.out`` inside an OPERATOR_CALL. Each call
    adds ``framework_ns`` of its own time around its operators; Method::execute adds as much."""
    events, t = [], t0 + framework_ns
    for kind, instr, ops in calls:
        start = t
        t += framework_ns // 2
        for name, dur in ops:
            if kind == "delegate":
                events.append(Ev(None, t, t + dur, instr, debug=name))
            else:
                events.append(Ev(f"native_call_{name}.out", t, t + dur, instr))
            t += dur
        t += framework_ns - framework_ns // 2
        events.append(Ev("DELEGATE_CALL" if kind == "delegate" else "OPERATOR_CALL",
                         start, t, instr))
    events.append(Ev("Method::execute", t0, t + framework_ns, 0))
    return events
