"""``%load_ext workbench`` / ``%unload_ext workbench``.

Everything the extension registers (formatters, events, magics, the comm target, widgets and
their threads) is remembered in one ``_State`` per shell and removed by ``unload``, so
``%reload_ext workbench`` leaves no duplicates.
"""

from __future__ import annotations

import atexit
from dataclasses import dataclass, field

from .timings import COMM_TARGET, Timings

# (module, class name) of types shown as HTML; registered by name so that a missing or
# half-written subpackage (nn, quantized) cannot break loading.
_HTML_TYPES = {
    ("workbench.tensor", "Tensor"): "tensor_html",
    ("workbench.nn.module", "Module"): "module_html",
    ("workbench.quantized.qtensor", "QTensor"): "qtensor_html",
}


@dataclass
class _State:
    timings: Timings = field(default_factory=Timings)
    magics: object = None
    comm_manager: object = None
    widgets: list = field(default_factory=list)
    tensor_views: bool = False

    def stop_widgets(self) -> None:
        for widget in list(self.widgets):
            widget.stop()
        self.widgets.clear()


_STATES: dict[int, _State] = {}


def state(ipython) -> _State | None:
    """The extension's state in ``ipython``, None when not loaded."""
    return _STATES.get(id(ipython))


def _comm_manager():
    try:
        import comm
    except ImportError:  # pragma: no cover - comm ships with ipykernel
        return None
    try:
        return comm.get_comm_manager()
    except Exception:
        return None


def _create_comm(**kwargs):
    """A comm opened from the kernel side (``comm.create_comm``)."""
    import comm

    return comm.create_comm(**kwargs)


def load(ipython, comm_manager=None) -> _State:
    """Register reprs, events, magics and the ``workbench.timings`` comm target in ``ipython``."""
    if id(ipython) in _STATES:
        unload(ipython)
    from . import html
    from .magics import WorkbenchMagics
    from .views import install as install_views

    manager = comm_manager if comm_manager is not None else _comm_manager()
    create = getattr(manager, "create_comm", None) if comm_manager is not None else _create_comm
    st = _State(timings=Timings(ipython, create_comm=create))
    formatter = ipython.display_formatter.formatters["text/html"]
    for (module, name), fn in _HTML_TYPES.items():
        formatter.for_type_by_name(module, name, getattr(html, fn))
    ipython.events.register("pre_run_cell", st.timings.pre_run_cell)
    ipython.events.register("post_run_cell", st.timings.post_run_cell)
    st.magics = WorkbenchMagics(ipython, st)
    ipython.register_magics(st.magics)
    st.comm_manager = manager
    if st.comm_manager is not None:
        st.comm_manager.register_target(COMM_TARGET, st.timings.open_comm)
    st.tensor_views = install_views()
    atexit.register(st.stop_widgets)
    _STATES[id(ipython)] = st
    return st


def unload(ipython) -> None:
    """Undo ``load``: stop widget threads, close comms, drop everything registered."""
    st = _STATES.pop(id(ipython), None)
    if st is None:
        return
    st.stop_widgets()
    atexit.unregister(st.stop_widgets)
    st.timings.stop()
    formatter = ipython.display_formatter.formatters["text/html"]
    for module, name in _HTML_TYPES:
        formatter.pop(f"{module}.{name}", None)
    for event, fn in (("pre_run_cell", st.timings.pre_run_cell),
                      ("post_run_cell", st.timings.post_run_cell)):  # fmt: skip
        try:
            ipython.events.unregister(event, fn)
        except ValueError:
            pass
    manager = ipython.magics_manager
    for kind, names in st.magics.magics.items():
        for name in names:
            if (
                manager.magics[kind].get(name) is not None
                and getattr(manager.magics[kind][name], "__self__", None) is st.magics
            ):
                del manager.magics[kind][name]
    manager.registry.pop(type(st.magics).__name__, None)
    if st.comm_manager is not None:
        st.comm_manager.unregister_target(COMM_TARGET, st.timings.open_comm)
    for comm in list(st.timings.comms):
        try:
            comm.close()
        except Exception:
            pass
    st.timings.comms.clear()
    if st.tensor_views:
        from .views import uninstall

        uninstall()
