"""The magics: ``%%wb_profile``, ``%wb_profile auto on|off``, ``%wb_timeit``, ``%wb_devices``,
``%wb_memory``, ``%wb_gallery``."""

from __future__ import annotations

import argparse
import ast
import shlex
import statistics
import time

from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class
from IPython.display import display

from ..profiler import Profile
from .devices import available, device_table, synchronize_all
from .timings import MIME

# ``--sort`` choices -> the payload row field and direction the inline view sorts by.
_SORT_FIELDS = {
    "total": ("total_ms", True), "self": ("self_ms", True), "calls": ("calls", True),
    "mean": ("mean_ms", True), "device": ("device_ms", True), "name": ("name", False),
}  # fmt: skip


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # a UsageError shows without a traceback
        from IPython.core.error import UsageError

        raise UsageError(f"{self.prog}: {message}")


def _profile_parser() -> _Parser:
    parser = _Parser(prog="%%wb_profile", add_help=False)
    parser.add_argument("-n", type=int, default=20, help="rows of the table")
    parser.add_argument("--sort", default="total", choices=tuple(_SORT_FIELDS))
    parser.add_argument("-o", action="store_true", help="return the Profile")
    return parser


class TimeitResult:
    """Per-loop seconds of each run (the device synchronized after every loop batch)."""

    def __init__(self, loops: int, runs: list[float]) -> None:
        self.loops = loops
        self.runs = runs  # seconds per loop, one per run

    @property
    def best(self) -> float:
        return min(self.runs)

    @property
    def average(self) -> float:
        return statistics.fmean(self.runs)

    @property
    def stdev(self) -> float:
        return statistics.pstdev(self.runs)

    def __repr__(self) -> str:
        return (f"{_time(self.average)} ± {_time(self.stdev)} per loop (mean ± std. dev. of "
                f"{len(self.runs)} runs, {self.loops} loops each)")  # fmt: skip


def _time(seconds: float) -> str:
    for unit, scale in (("s", 1), ("ms", 1e3), ("µs", 1e6)):
        if seconds * scale >= 1:
            return f"{seconds * scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


@magics_class
class WorkbenchMagics(Magics):
    def __init__(self, shell, state) -> None:
        super().__init__(shell)
        self.state = state

    # -- running a cell's code -------------------------------------------------------------
    def _run(self, source: str):
        """Execute ``source`` in the user namespace; the value of a final expression."""
        tree = ast.parse(self.shell.transform_cell(source))
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        ns = self.shell.user_ns
        exec(compile(tree, "<wb_profile>", "exec"), ns)  # noqa: S102
        return eval(compile(last, "<wb_profile>", "eval"), ns) if last else None  # noqa: S307

    # -- %%wb_profile ----------------------------------------------------------------------
    @line_cell_magic
    def wb_profile(self, line: str, cell: str | None = None):
        """``%%wb_profile [-n ROWS] [--sort KEY] [-o]``: run the cell under the profiler and show
        its per-op timings: one output with the timings payload (MIME
        ``application/vnd.workbench.timings+json``, drawn by the JupyterLab extension, top
        ``ROWS`` rows first) and the text table as its plain-text fallback.

        ``%wb_profile auto on|off``: profile every cell and send its payload on the
        ``workbench.timings`` comm, adding no outputs.
        """
        if cell is None:
            return self._auto(line)
        args = _profile_parser().parse_args(shlex.split(line))
        timings = self.state.timings
        profile = Profile()
        try:
            with profile:
                value = self._run(cell)
        finally:
            if timings.profiling is not None:  # auto mode sees this cell's ops too
                timings.profiling.events.extend(profile.events)
        payload = profile.timings_payload(timings.cell_id, timings.execution_count)
        # One output: JupyterLab draws the payload, a terminal (or a frontend without the
        # extension) prints the text table, its plain-text fallback. The payload keeps every
        # row for the panel; the metadata says which ones the inline view shows first.
        key, descending = _SORT_FIELDS[args.sort]
        hint = {"rows": max(args.n, 0), "sort": {"key": key, "descending": descending}}
        display({MIME: payload, "text/plain": profile.table(rows=args.n, sort=args.sort)},
                metadata={MIME: hint}, raw=True)  # fmt: skip
        return profile if args.o else value

    def _auto(self, line: str) -> None:
        """Turn auto mode on or off; the comms (the panel's badge) are told."""
        words = line.split()
        if len(words) != 2 or words[0] != "auto" or words[1] not in ("on", "off"):
            from IPython.core.error import UsageError

            raise UsageError("usage: %wb_profile auto on|off  (or %%wb_profile as a cell magic)")
        self.state.timings.auto = words[1] == "on"

    # -- %wb_timeit ------------------------------------------------------------------------
    @line_cell_magic
    def wb_timeit(self, line: str, cell: str | None = None):
        """``%wb_timeit [-n N] [-r R] [-o] stmt`` (or a cell): like ``%timeit``, but waits for
        every GPU after each batch of loops so that queued device work is counted."""
        opts, stmt = self.parse_options(line, "n:r:o", posix=False, strict=False)
        loops, runs = int(opts.get("n", 0)), int(opts.get("r", 5))
        source = cell if cell is not None else stmt
        if not source.strip():
            from IPython.core.error import UsageError

            raise UsageError("usage: %wb_timeit [-n N] [-r R] [-o] statement")
        code = compile(self.shell.transform_cell(source), "<wb_timeit>", "exec")
        ns = self.shell.user_ns
        devices = available()

        def run(loops: int) -> float:
            start = time.perf_counter()
            for _ in range(loops):
                exec(code, ns)  # noqa: S102
            synchronize_all(devices)
            return time.perf_counter() - start

        if loops <= 0:
            loops = 1
            while run(loops) < 0.2 and loops < 10**7:
                loops *= 10
        result = TimeitResult(loops, [run(loops) / loops for _ in range(max(1, runs))])
        print(result)
        return result if "o" in opts else None

    # -- devices, memory, gallery ----------------------------------------------------------
    @line_magic
    def wb_devices(self, line: str = ""):
        """A table of devices: backend, name, and memory (active, peak, cached, total)."""
        return device_table()

    @line_magic
    def wb_memory(self, line: str = ""):
        """The live device/memory widget (a bar per device plus system RAM)."""
        from .memory_widget import MemoryWidget

        interval = float(line) if line.strip() else 1.0
        widget = MemoryWidget(interval=interval)
        self.state.widgets.append(widget)
        widget.on_stop(lambda w: self.state.widgets.remove(w) if w in self.state.widgets else None)
        return widget

    @line_magic
    def wb_gallery(self, line: str = ""):
        """``%wb_gallery [MODEL]``: the model gallery (registered models)."""
        from .gallery import Gallery

        return Gallery(model=line.strip() or None)
