"""``results.json``: the versioned document with its one loader, and the writer that lays it
out once and rewrites only what changed.

The document's ``session`` (what the session was: versions, configuration, the saving session's
id, where in the history it sits, its runners) is one typed record, :class:`SessionInfo`. The
loader reads it (:meth:`SessionInfo.from_json`); everything else reads its attributes. A key
this version does not know is kept in ``extra``, and :meth:`SessionInfo.to_json` gives back the
document's ``session`` as it was read, keys in their order."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pytest_sme2.errors import Sme2Error
from pytest_sme2._util.fsutil import atomic_write_text
from pytest_sme2.results.block import BlockResult
from pytest_sme2.results.comparison import ComparisonRecord

RESULTS_SCHEMA = "pytest-sme2/results/1"

# -- the session -----------------------------------------------------------------------------

@dataclass
class SessionInfo:
    versions: Any = None                   # {package: version}; None: not recorded
    config: dict[str, Any] | None = field(default_factory=dict)   # None only as read
    baseline_session_id: str | None = None  # the id baseline files give a session that saved
    identity: dict[str, Any] | None = field(default_factory=dict)   # commit, branch, time, ci
    runners: dict[str, dict[str, Any]] | None = field(default_factory=dict)  # kind, labels, path
    device: dict[str, Any] | None = None   # documents that recorded one device for the session
    # The machine's speeds as the probe saw them across the session (MachineStates.to_dict());
    # None in documents before it.
    machine: dict[str, Any] | None = None
    # A session cut short (Ctrl-C): {"by": ..., "in_flight": the test then running or None,
    # "comparison": whether it was a comparison}; None: it ran to its end.
    interrupted: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)       # keys this version does not know
    order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> SessionInfo:
        d = dict(d or {})
        names = {f.name for f in fields(cls)} - {"extra", "order"}
        known = {k: v for k, v in d.items() if k in names}
        return cls(**known, extra={k: v for k, v in d.items() if k not in names},
                   order=tuple(d))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        defaults = SessionInfo()
        for key in (*self.order, *(f.name for f in fields(self))):
            if key in out or key in ("extra", "order"):
                continue
            if key in self.extra:
                out[key] = self.extra[key]
            elif hasattr(defaults, key) and (key in self.order or
                                             getattr(self, key) != getattr(defaults, key)):
                out[key] = getattr(self, key)
        out.update({k: v for k, v in self.extra.items() if k not in out})
        return out


# -- the document ----------------------------------------------------------------------------

@dataclass
class ResultsDoc:
    """A whole ``results.json``: what :func:`load_results` gives and the reports read."""

    session: SessionInfo = field(default_factory=SessionInfo)   # versions, configuration, runners
    benchmarks: list[BlockResult] = field(default_factory=list)
    comparisons: list[ComparisonRecord] = field(default_factory=list)
    schema: str = RESULTS_SCHEMA

    def blocks(self, nodeids: Iterable[str]) -> list[BlockResult]:
        """The benchmarks with these node ids, in that order (ids not in the document left
        out)."""
        by_id = {b.nodeid: b for b in self.benchmarks}
        return [by_id[i] for i in nodeids if i in by_id]

    def to_json(self) -> dict[str, Any]:
        return results_document(self.benchmarks, self.comparisons, self.session, self.schema)


def load_results(source: ResultsDoc | Mapping[str, Any] | str | Path) -> ResultsDoc:
    """The one loader of ``results.json``: a path (which must carry the schema), a document
    already parsed, or a :class:`ResultsDoc` (returned as it is). Anything else, or content
    this version cannot read, raises :class:`Sme2Error` in one line naming the source."""
    if isinstance(source, ResultsDoc):
        return source
    if isinstance(source, Mapping):
        name, doc = "results document", source
        if doc.get("schema", RESULTS_SCHEMA) != RESULTS_SCHEMA:
            raise _not_results(name, doc)
    else:
        name = str(source)
        try:
            doc = json.loads(Path(source).read_text())
        except FileNotFoundError:
            raise Sme2Error(f"{name}: no such results file") from None
        except (OSError, ValueError) as e:
            raise Sme2Error(f"{name}: not a readable results.json ({e})") from None
        if not isinstance(doc, dict) or doc.get("schema") != RESULTS_SCHEMA:
            raise _not_results(name, doc)
    try:
        return ResultsDoc(session=SessionInfo.from_json(doc.get("session")),
                          benchmarks=[BlockResult.from_json(b)
                                      for b in doc.get("benchmarks") or []],
                          comparisons=[ComparisonRecord.from_json(c)
                                       for c in doc.get("comparisons") or []],
                          schema=doc.get("schema", RESULTS_SCHEMA))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise Sme2Error(f"{name}: a results document this version cannot read "
                        f"({type(e).__name__}: {e}); was it edited by hand?") from None


def _not_results(name: str, doc: Any) -> Sme2Error:
    schema = doc.get("schema") if isinstance(doc, Mapping) else None
    return Sme2Error(f"{name}: not a pytest-sme2 results document (schema {schema!r}, expected "
                     f"{RESULTS_SCHEMA!r})")


def results_document(results: Iterable[BlockResult], comparisons: Iterable[Any] = (),
                     session: SessionInfo | dict[str, Any] | None = None,
                     schema: str = RESULTS_SCHEMA) -> dict[str, Any]:
    """The results.json document: ``session`` (configuration, versions), ``benchmarks`` (one
    per measured block) and ``comparisons`` (records, comparisons or their JSON documents)."""
    if isinstance(session, SessionInfo):
        session = session.to_json()
    return {"schema": schema, "session": session or {},
            "benchmarks": [r.to_json() for r in results],
            "comparisons": [c if isinstance(c, dict) else c.to_json() for c in comparisons]}


def write_results(path: Path, results: Iterable[BlockResult], comparisons: Iterable[Any] = (),
                  session: SessionInfo | dict[str, Any] | None = None) -> None:
    doc = results_document(results, comparisons, session)
    atomic_write_text(path, json.dumps(doc, indent=2) + "\n")


_SLOT = "\0benchmarks\0"   # where the kept texts go in the document's layout


class ResultsWriter:
    """``results.json`` rewritten after every benchmark at the cost of what changed: each
    benchmark is laid out once and its text kept (the pure-Python indenting encoder took ~1 s of
    a 28-benchmark session, laying out every earlier benchmark again on each write). The file is
    byte-identical to :func:`write_results`'. A result must not change once written."""

    def __init__(self) -> None:
        self._kept: dict[int, tuple[BlockResult, str]] = {}

    def _text(self, result: BlockResult) -> str:
        kept = self._kept.get(id(result))
        if kept is None or kept[0] is not result:
            # As json.dumps(document, indent=2) lays out an element of a top-level list.
            kept = (result, json.dumps(result.to_json(), indent=2).replace("\n", "\n    "))
            self._kept[id(result)] = kept
        return kept[1]

    def text(self, results: Iterable[BlockResult], comparisons: Iterable[Any] = (),
             session: SessionInfo | dict[str, Any] | None = None) -> str:
        doc = results_document((), comparisons, session)
        items = [self._text(r) for r in results]
        doc["benchmarks"] = _SLOT if items else []
        text = json.dumps(doc, indent=2)
        if items:
            text = text.replace(json.dumps(_SLOT), "[\n    " + ",\n    ".join(items) + "\n  ]", 1)
        return text + "\n"

    def write(self, path: Path, results: Iterable[BlockResult],
              comparisons: Iterable[Any] = (),
              session: SessionInfo | dict[str, Any] | None = None) -> None:
        atomic_write_text(path, self.text(results, comparisons, session))
