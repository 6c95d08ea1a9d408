"""Jupyter server for the Galata tests: a throwaway notebook dir, no token, a free port.

Never use this configuration outside tests: it removes every protection.
"""

import os

from jupyterlab.galata import configure_jupyter_server

configure_jupyter_server(c)  # noqa: F821 (c is the config object Jupyter passes in)

c.ServerApp.allow_root = True  # noqa: F821
c.ServerApp.ip = "127.0.0.1"  # noqa: F821
# playwright.config.js picks a free port and passes it down.
c.ServerApp.port = int(os.environ.get("WB_UI_PORT", "8888"))  # noqa: F821
c.ServerApp.port_retries = 0  # noqa: F821
# Offline and deterministic: no update check.
c.LabApp.check_for_updates_class = "jupyterlab.NeverCheckForUpdate"  # noqa: F821
