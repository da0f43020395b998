"""The live display of a running benchmark: done/running/failed, pass rate, ETA, tokens/s."""

from __future__ import annotations

import time
from collections.abc import Iterable
from types import TracebackType
from typing import TYPE_CHECKING

from rich.console import Console, Group
from rich.live import Live
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from clawgym_env.metrics import is_pass
from clawgym_env.results import AttemptResult

if TYPE_CHECKING:
    from clawgym_env.runner.config import AttemptJob

__all__ = ["RunProgress"]


class RunProgress:
    """Counts attempts as they start and finish and renders them with rich (to stderr).

    Disabled, it only counts, so callers need not branch.
    """

    def __init__(
        self,
        total: int,
        already: Iterable[AttemptResult] = (),
        pass_threshold: float = 1.0,
        enabled: bool = True,
        console: Console | None = None,
    ) -> None:
        self.total = total
        self.pass_threshold = pass_threshold
        self.running = 0
        self.done = self.passed = self.failed = self.errors = 0
        self.tokens = 0
        self._resumed = 0
        for a in already:
            self._count(a)
            self._resumed += 1
        self._t0 = time.monotonic()
        self.enabled = enabled
        self._console = console or Console(stderr=True)
        self._bar = Progress(TextColumn("[bold]bench"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=self._console)
        self._task = self._bar.add_task("attempts", total=total, completed=self.done)
        self._live: Live | None = None

    def _count(self, a: AttemptResult) -> None:
        self.done += 1
        self.tokens += a.completion_tokens
        if a.status in ("error", "timeout"):
            self.errors += 1
        elif is_pass(a, self.pass_threshold):
            self.passed += 1
        else:
            self.failed += 1

    def started(self, job: AttemptJob) -> None:
        """An attempt began."""
        self.running += 1

    def finished(self, result: AttemptResult) -> None:
        """An attempt's record was written."""
        self.running = max(0, self.running - 1)
        self._count(result)
        self._bar.update(self._task, completed=self.done)
        if self.enabled and not self._console.is_terminal:  # logs (CI): one line per attempt instead
            self._console.print(
                f"[{self.done}/{self.total}] {result.task_id} {result.harness} #{result.attempt}: "
                f"{result.status} {result.score:.3f}  ({self.status_line()})",
                highlight=False,
            )

    def status_line(self) -> str:
        """The figures as one line (also what the live view shows under the bar)."""
        elapsed = max(time.monotonic() - self._t0, 1e-6)
        ran = self.done - self._resumed
        scored = self.passed + self.failed
        rate = f"{self.passed / scored:.0%}" if scored else "-"
        remaining = self.total - self.done
        eta = f"{elapsed / ran * remaining:.0f}s" if ran and remaining else ("0s" if not remaining else "-")
        return (
            f"done {self.done}/{self.total}  running {self.running}  passed {self.passed}  failed {self.failed}  "
            f"errors {self.errors}  pass rate {rate}  ETA {eta}  {self.tokens / elapsed:.1f} tok/s"
        )

    def __rich__(self) -> Group:
        return Group(self._bar, Text(self.status_line()))

    def __enter__(self) -> RunProgress:
        if self.enabled and self._console.is_terminal:
            self._live = Live(self, console=self._console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if self._live is not None:
            self._live.__exit__(et, ev, tb)
            self._live = None
