"""Progress bars on stderr, drawn by tqdm, only where stderr is a terminal
(a pipe, a log file or a test sees nothing).

Example::

    with Bar("speaking", total=3, unit="chunk") as bar:
        for chunk in chunks:
            bar.advance(1)

    with Steps("converting") as progress:      # a converter's progress(i, n, name)
        convert_hf(src, out, progress=progress)
"""

from __future__ import annotations

import sys
from typing import Any


def _shown(show: bool | None) -> bool:
    return sys.stderr.isatty() if show is None else show


class Bar:
    """A bar of ``total`` units; ``show`` None: only on a terminal. With
    ``leave`` False the bar's line is cleared when it closes."""

    def __init__(
        self, desc: str, total: float, unit: str, show: bool | None = None, leave: bool = True, **style: Any
    ) -> None:
        self._bar: Any = None
        if _shown(show):
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=leave, **style)

    def advance(self, n: float) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def to(self, done: float) -> None:
        """Moves the bar to ``done`` units (never back)."""
        if self._bar is not None and done > self._bar.n:
            self._bar.update(done - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Steps:
    """The ``progress(i, n, name)`` callback the converters take: a bar of
    ``n`` steps made at the first call, the step's name beside it, closed
    after the last step or by :meth:`close` (a failed conversion)."""

    def __init__(self, desc: str, unit: str = "tensor", show: bool | None = None) -> None:
        self._desc, self._unit, self._show = desc, unit, _shown(show)
        self._bar: Any = None

    @property
    def shown(self) -> bool:
        return self._show

    def __call__(self, i: int, n: int, name: str) -> None:
        if not self._show:
            return
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(total=n, desc=self._desc, unit=self._unit, file=sys.stderr, leave=True)
        self._bar.set_postfix_str(name[:32], refresh=False)
        self._bar.update(i + 1 - self._bar.n)
        if i + 1 == n:
            self.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Steps:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
