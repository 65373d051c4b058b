"""Switch torch.compile log artifacts on for a span, collect their records, put every setting back.

The equivalent of ``torch._logging.set_logs(<artifact>=True, ...)`` for the named artifacts only,
touching no other logging setting. A collecting handler sits on the top dynamo/inductor loggers
(torch's own loggers there do not propagate further). Records of artifacts we switched on are
filtered out of the handlers they would otherwise reach, so nothing extra is printed unless the
user had switched those artifacts on themselves. On exit the level and ``propagate`` flag of
every artifact logger we reconfigured are restored exactly; artifact loggers created during the
span (modules imported by the compile) are re-derived from torch's restored log state.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterable

Classify = Callable[[logging.LogRecord], Iterable[tuple[str, str]]]


class RecordCollector(logging.Handler):
    """Keeps ``(kind, text)`` pairs that ``classify`` makes of each record."""

    def __init__(self, classify: Classify) -> None:
        super().__init__(level=logging.DEBUG)
        self.classify = classify
        self.records: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.records.extend(self.classify(record))
        except Exception:  # a record that cannot format must not break the user's code
            pass


class DropArtifacts(logging.Filter):
    def __init__(self, artifacts: set[str]) -> None:
        super().__init__()
        self.suffixes = tuple("__" + a for a in artifacts)

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.name.endswith(self.suffixes)


def artifact_of(record: logging.LogRecord) -> str:
    """The artifact a record was logged on ("" for a plain logger)."""
    head, sep, tail = record.name.rpartition(".__")
    return tail if sep else ""


def _artifact_loggers(internal: Any, artifacts: set[str]) -> list[logging.Logger]:
    found = []
    for qname in internal.log_registry.get_artifact_log_qnames():
        log = logging.getLogger(qname)
        if getattr(log, "artifact_name", None) in artifacts:
            found.append(log)
    return found


def _handlers_reached(log: logging.Logger) -> list[logging.Handler]:
    """Handlers a record logged on ``log`` passes through (the logger's own and its ancestors')."""
    handlers: list[logging.Handler] = []
    current: logging.Logger | None = log
    while current is not None:
        handlers.extend(current.handlers)
        if not current.propagate:
            break
        current = current.parent
    return handlers


class ArtifactCapture:
    """Enable ``artifacts`` and attach ``collector`` to ``loggers`` until ``restore()``."""

    def __init__(self, artifacts: tuple[str, ...], loggers: tuple[str, ...], collector: logging.Handler) -> None:
        self.artifacts = set(artifacts)
        self.logger_names = loggers
        self.collector = collector
        self.added: set[str] = set()
        self._saved: dict[str, tuple[int, bool]] | None = None
        self._filters: list[tuple[logging.Handler, logging.Filter]] = []

    def enable(self) -> None:
        import torch._logging._internal as internal

        state = internal.log_state
        existing = _artifact_loggers(internal, self.artifacts)
        self._saved = {log.name: (log.level, log.propagate) for log in existing}
        self.added = {a for a in self.artifacts if a not in state.artifact_names}
        for name in self.added:  # loggers created later read this when configured
            state.enable_artifact(name)
        for log in existing:
            log.setLevel(logging.NOTSET)
            log.propagate = True
            internal.configure_artifact_log(log)
        self._filter_handlers(existing)
        for name in self.logger_names:
            logging.getLogger(name).addHandler(self.collector)

    def _filter_handlers(self, existing: list[logging.Logger]) -> None:
        if not self.added:
            return
        reached: dict[int, logging.Handler] = {}
        sources = [log for log in existing if log.artifact_name in self.added]  # type: ignore[attr-defined]
        sources += [logging.getLogger(n) for n in self.logger_names]
        for log in sources:
            for handler in _handlers_reached(log):
                reached.setdefault(id(handler), handler)
        for handler in reached.values():
            if handler is self.collector:
                continue
            flt = DropArtifacts(self.added)
            handler.addFilter(flt)
            self._filters.append((handler, flt))

    def restore(self) -> None:
        for name in self.logger_names:
            logging.getLogger(name).removeHandler(self.collector)
        for handler, flt in self._filters:
            handler.removeFilter(flt)
        self._filters.clear()
        if self._saved is None:
            return
        import torch._logging._internal as internal

        internal.log_state.artifact_names.difference_update(self.added)
        for log in _artifact_loggers(internal, self.artifacts):
            if log.name in self._saved:
                level, propagate = self._saved[log.name]
                log.setLevel(level)
                log.propagate = propagate
            else:  # created during the span: derive as torch would have, from the restored state
                log.setLevel(logging.NOTSET)
                log.propagate = True
                internal.configure_artifact_log(log)
        self._saved = None
