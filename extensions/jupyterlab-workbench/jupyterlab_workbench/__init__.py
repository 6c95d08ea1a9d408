"""JupyterLab extension showing workbench's per-op kernel timings.

The Python package only ships the prebuilt labextension; all behaviour lives
in the TypeScript sources under ``src/``.
"""

try:
    from ._version import __version__
except ImportError:  # a source checkout that was never built
    __version__ = "dev"


def _jupyter_labextension_paths():
    """Where JupyterLab finds the prebuilt extension (for `jupyter labextension develop`)."""
    return [{"src": "labextension", "dest": "jupyterlab-workbench"}]
