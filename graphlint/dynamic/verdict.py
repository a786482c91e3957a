"""The verdict attached to a finding by --confirm, and how a child's answer becomes one."""

from __future__ import annotations

from dataclasses import dataclass

CONFIRMED = "confirmed"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive"
STATUSES = (CONFIRMED, NOT_REPRODUCED, INCONCLUSIVE)


@dataclass(frozen=True)
class Confirmation:
    """What running the flagged code showed (RULES.md, "Confirmation verdicts")."""

    status: str
    evidence: str
    iterations: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {
            "status": self.status,
            "evidence": self.evidence,
            "iterations": self.iterations,
            "seconds": round(self.seconds, 3),
        }

    def line(self) -> str:
        """One line for the text report, e.g. ``confirmed: RuntimeError "..." at line 23, iteration 2``."""
        return f"{self.status}: {self.evidence}"


def inconclusive(reason: str, seconds: float = 0.0) -> Confirmation:
    return Confirmation(INCONCLUSIVE, reason, 0, seconds)


def counts_toward_exit(finding) -> bool:
    """With --confirm, a finding that was not reproduced does not make the exit code 1."""
    confirmation = getattr(finding, "confirmation", None)
    return confirmation is None or confirmation.status != NOT_REPRODUCED


def from_child(indexes: list, done: dict) -> dict:
    """Verdicts for the findings of one file from the child's ``done`` message."""
    seconds = float(done.get("seconds") or 0.0)
    report = done.get("report")
    verdicts: dict = {}
    if report:
        for index in indexes:
            item = report.get("verdicts", {}).get(str(index))
            if item and item.get("status") in STATUSES:
                verdicts[index] = Confirmation(item["status"], str(item.get("evidence", "")),
                                               int(item.get("iterations") or 0), seconds)
    streamed = {item.get("index"): item for item in done.get("confirmed", [])}
    reason = failure_reason(done)
    for index in indexes:
        if index in verdicts:
            continue
        item = streamed.get(index)
        if item is not None:
            verdicts[index] = Confirmation(CONFIRMED, str(item.get("evidence", "")),
                                           int(item.get("iterations") or 0), seconds)
        else:
            verdicts[index] = inconclusive(reason, seconds)
    return verdicts


def failure_reason(done: dict) -> str:
    """Why a child ended without a report, with the last words of its stderr."""
    reason = (done.get("exit") or {}).get("reason") or "the checker process ended without a report"
    stderr = (done.get("stderr") or "").strip().splitlines()
    last = next((line.strip() for line in reversed(stderr) if line.strip()), "")
    if last and (done.get("exit") or {}).get("kind") != "timeout":
        last = last if len(last) <= 120 else last[:117] + "..."
        reason = f"{reason} ({last})"
    return reason
