"""The study folder's files, and nothing else: the header, the baselines, the ledger's events and
the rounds, opened, read (every line type-checked) and appended to through
``workbench.study.records``.

    study.json          the header: format, version, name, created
    baselines.jsonl     one Baseline per line, in order
    ledger.jsonl        the ledger's events (proposed, tested, reopenable), appended
    rounds.jsonl        per round: the plan (predictions, written before it runs) and the outcome
    runs/<baseline_id>/ each baseline's run bundle (``run.save``)

Files are only appended to, under each file's lock: round and baseline numbers are assigned under
it, so two processes writing at once get two numbers and both records are kept. A line that
cannot be read is skipped with a warning naming the file and the line. The store profiles and
decides nothing: what the records mean is the ledger's (``workbench.study.ledger``) and the rounds'
(``workbench.study.orchestration``).
"""

from __future__ import annotations

import dataclasses
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import workbench.study.files as files
import workbench.study.records as records
from workbench.errors import StudyError
from workbench.study.baseline import Baseline
from workbench.study.ledger import parse_event
from workbench.study.rounds import StudyRound, parse_round_record

if TYPE_CHECKING:
    from workbench.capture.run import RunRecord

STUDY_FORMAT = "workbench-study"
STUDY_VERSION = 1
HEADER = "study.json"
BASELINES = "baselines.jsonl"
LEDGER = "ledger.jsonl"
ROUNDS = "rounds.jsonl"
RUNS = "runs"


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def study_name(folder: str | Path) -> str:
    """The name the header of the study in ``folder`` records; StudyError where there is none."""
    header = Path(folder) / HEADER
    if not header.exists():
        raise StudyError(
            f"no study in {str(folder)!r} (it has no {HEADER}); create one with wb.Study(name, folder={str(folder)!r})"
        )
    data = files.read_json(header, "study header")
    files.check_format(data, kind=STUDY_FORMAT, version=STUDY_VERSION, path=header)
    return str(data.get("name", ""))


class StudyStore:
    """The files of the study ``name`` in ``folder``: its header written (or checked) on opening,
    its records read into ``baselines``, ``events``, ``plans``, ``rounds``, ``closed`` and
    ``aborted``, and each new record appended to its file and to them."""

    def __init__(self, name: str, folder: Path) -> None:
        self.name = name
        self.folder = folder
        header = folder / HEADER
        if header.exists():
            data = files.read_json(header, "study header")
            files.check_format(data, kind=STUDY_FORMAT, version=STUDY_VERSION, path=header)
            if data.get("name") != name:
                raise StudyError(
                    f"the folder {str(folder)!r} holds the study {data.get('name')!r}, not "
                    f"{name!r}: open it with wb.Study.open({str(folder)!r}) or choose another "
                    f"folder; nothing was changed"
                )
            self.created_at = str(data.get("created_at", ""))
        else:
            if folder.exists() and not folder.is_dir():
                raise StudyError(f"{str(folder)!r} is a file; a study needs a folder")
            self.created_at = now()
            files.write_json(
                header, {"format": STUDY_FORMAT, "version": STUDY_VERSION, "name": name, "created_at": self.created_at}
            )
        self.load()

    # -- reading ----------------------------------------------------------------------------
    def load(self) -> None:
        """Read the folder's records, each line type-checked; an unreadable line is skipped with a
        StudyWarning naming its file and line (``records.read_jsonl``), never a raw exception."""
        lines, _ = records.read_jsonl(self.folder / BASELINES, "study baselines", Baseline.parse, stacklevel=5)
        self.baselines: list[Baseline] = [ln.value for ln in lines]
        lines, _ = records.read_jsonl(self.folder / LEDGER, "study ledger", parse_event, stacklevel=5)
        self.events: list[dict[str, Any]] = [ln.record for ln in lines]
        self.plans: dict[int, dict[str, Any]] = {}
        self.rounds: dict[int, StudyRound] = {}
        self.closed: list[StudyRound] = []  # every closed round, in file order (duplicates too)
        self.aborted: dict[int, dict[str, Any]] = {}
        rounds_path = self.folder / ROUNDS
        lines, _ = records.read_jsonl(rounds_path, "study rounds", parse_round_record, stacklevel=5)
        closed_at: dict[int, int] = {}
        for line in lines:
            rec, n = line.record, line.value["round"]
            if rec["event"] == "planned":
                self.plans[n] = rec
            elif rec["event"] == "closed":
                rnd = line.value["outcome"]
                if line.value["comparison_error"]:
                    warnings.warn(
                        f"study rounds {str(rounds_path)!r}, line {line.number}: round {n}'s comparison "
                        f"is not readable ({line.value['comparison_error']}); the round, its summary and "
                        f"decisions are read without it",
                        files.StudyWarning,
                        stacklevel=4,
                    )
                if n in closed_at:
                    warnings.warn(
                        f"study rounds {str(rounds_path)!r}, lines {closed_at[n]} and {line.number}: round "
                        f"{n} is recorded twice (two processes ran a round at once, before rounds were "
                        f"numbered under the file's lock); both are kept in study.rounds, and "
                        f"study.accept(..., round={n}) takes the one on line {line.number}",
                        files.StudyWarning,
                        stacklevel=4,
                    )
                closed_at[n] = line.number
                self.rounds[n] = rnd
                self.closed.append(rnd)
            elif rec["event"] == "aborted":
                self.aborted[n] = rec

    def load_run(self, base: Baseline) -> RunRecord:
        """The baseline's run bundle, loaded (``wb.load_run``)."""
        from workbench.capture.run import RunRecord

        return RunRecord.load(self.folder / base.run_path)

    # -- writing ----------------------------------------------------------------------------
    def check_writable(self, action: str) -> None:
        """Refuse a folder that cannot be written before any profile or round runs."""
        records.check_writable(
            self.folder,
            "study folder",
            files=(HEADER, BASELINES, LEDGER, ROUNDS),
            folders=(RUNS,),
            action=f"nothing was {action} and nothing was changed",
        )

    def append_event(self, event: dict[str, Any]) -> None:
        files.append_line(self.folder / LEDGER, event, "study ledger")
        self.events.append(files.plain(event))

    def save_run(self, run: Any, baseline_id: str) -> str:
        """Save ``run``'s bundle under ``runs/<baseline_id>`` (once); its path inside the folder."""
        run_rel = f"{RUNS}/{baseline_id}"
        if not (self.folder / run_rel).exists():
            run.save(self.folder / run_rel)
        return run_rel

    def add_baseline(self, base: Baseline) -> Baseline:
        """Append ``base``, numbered under the baselines file's lock (after every one on file)."""
        with records.locked(self.folder / BASELINES, "study baselines") as log:
            on_file = [r.get("index") for r in log.records()]
            index = max([len(self.baselines), *(i for i in on_file if is_int(i))]) + 1
            base = dataclasses.replace(base, index=index)
            log.append(base.to_dict(), files.dumps)
        self.baselines.append(base)
        return base

    def plan_round(self, plan: dict[str, Any]) -> int:
        """Append a round's plan (``plan``: its fields but the number) and return its number, read
        and written under the rounds file's lock: two processes running a round on one study at
        once get two numbers, and both rounds are kept."""
        with records.locked(self.folder / ROUNDS, "study rounds") as log:
            on_file = [r.get("round") for r in log.records()]
            index = max([0, *self.plans, *self.rounds, *self.aborted, *(n for n in on_file if is_int(n))]) + 1
            record = {"event": "planned", "round": index, **plan}
            log.append(record, files.dumps)
        self.plans[index] = {"predictions": plan.get("predictions")}
        return index

    def abort_round(self, index: int, reason: str) -> None:
        files.append_line(
            self.folder / ROUNDS, {"event": "aborted", "round": index, "at": now(), "reason": reason}, "study rounds"
        )
        self.aborted[index] = {"reason": reason}

    def close_round(self, rnd: StudyRound) -> None:
        files.append_line(
            self.folder / ROUNDS, {"event": "closed", "round": rnd.index, "outcome": rnd.to_dict()}, "study rounds"
        )
        self.rounds[rnd.index] = rnd
        self.closed.append(rnd)
