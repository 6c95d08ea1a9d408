"""The tutorials are committed in the form JupyterLab saves them (issue: opening one dirtied
git before anything ran), checked against nbformat's own writer."""

from __future__ import annotations

from pathlib import Path

import pytest
from notebook_form import KERNELSPEC, canonical

NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("0[1-8]_*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_in_jupyterlab_form(path):
    text = path.read_text(encoding="utf-8")
    assert canonical(text, python_version=False) == text, (
        f"{path.name} is not in the form JupyterLab saves: run "
        f"python tests/notebook/notebook_form.py --fix {path}"
    )


def test_the_form():
    nb = (
        '{"cells": [{"cell_type": "code", "execution_count": 1, "id": "a", "metadata": {}, '
        '"outputs": [{"data": {"application/json": {"x": 1.0, "y": 0.5}}, "metadata": {}, '
        '"output_type": "display_data"}], "source": "x = 1\\ny = 2"}], '
        '"metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", '
        '"name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}'
    )
    out = canonical(nb)
    assert '"x": 1,' in out and '"y": 0.5' in out  # JavaScript keeps no integral floats
    assert f'"display_name": "{KERNELSPEC["display_name"]}"' in out
    assert '"source": [\n    "x = 1\\n",\n    "y = 2"\n   ]' in out and out.endswith("}\n")
    assert canonical(out) == out
