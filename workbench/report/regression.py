"""Compare a report's median time with an earlier report's, for CI."""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from workbench.errors import InvalidArgumentError, ReportError

SUMMARY_FILE = "summary.json"


def load_summary(report_dir: str | Path) -> dict[str, Any]:
    """The ``summary.json`` a report wrote into its folder."""
    path = Path(report_dir) / SUMMARY_FILE
    if not path.is_file():
        raise ReportError(f"{str(report_dir)!r} is not a workbench report folder: {SUMMARY_FILE} is missing; "
                          "pass the --out folder of an earlier `workbench report`")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        float(doc["timing"]["median_ms"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ReportError(f"{path} is not a readable report summary ({exc}); re-run that report") from exc
    return doc


@dataclass(frozen=True)
class RegressionCheck:
    """Median before and after, the change in percent (positive = slower), and the verdict."""

    old_report: str
    old_median_ms: float
    new_median_ms: float
    threshold_pct: float

    @property
    def change_pct(self) -> float:
        return 100.0 * (self.new_median_ms / self.old_median_ms - 1.0) if self.old_median_ms > 0 else math.inf

    @property
    def regressed(self) -> bool:
        return self.change_pct > self.threshold_pct

    def message(self) -> str:
        verdict = "REGRESSION" if self.regressed else "ok"
        return (f"{verdict}: median {self.old_median_ms:.3f} ms -> {self.new_median_ms:.3f} ms "
                f"({self.change_pct:+.1f} %, threshold +{self.threshold_pct:g} %) against {self.old_report}")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "change_pct": self.change_pct, "regressed": self.regressed}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RegressionCheck":
        return cls(old_report=d["old_report"], old_median_ms=float(d["old_median_ms"]),
                   new_median_ms=float(d["new_median_ms"]), threshold_pct=float(d["threshold_pct"]))


def check_regression(old_report: str | Path, new_median_ms: float, threshold_pct: float) -> RegressionCheck:
    if math.isnan(threshold_pct) or threshold_pct < 0:
        raise InvalidArgumentError(f"--fail-on-regression takes a percentage >= 0; got {threshold_pct}")
    old = load_summary(old_report)
    return RegressionCheck(old_report=str(old_report), old_median_ms=float(old["timing"]["median_ms"]),
                           new_median_ms=float(new_median_ms), threshold_pct=float(threshold_pct))
