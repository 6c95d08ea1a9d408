"""The form JupyterLab saves a notebook in, so that opening a committed tutorial leaves git clean.

JupyterLab holds the notebook as JavaScript JSON, which has no integral floats (``1.0`` comes
back as ``1``, in outputs and widget state alike); on connecting it sets the kernelspec and
``language_info`` to the running kernel's; the server writes with nbformat (indent 1, sorted
keys, lines split, a final newline). ``python tests/notebook/notebook_form.py --fix FILES``
rewrites notebooks in that form.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import nbformat

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def language_info() -> dict:
    """What ipykernel's kernel_info reply says, for this interpreter."""
    return {
        "codemirror_mode": {"name": "ipython", "version": 3},
        "file_extension": ".py",
        "mimetype": "text/x-python",
        "name": "python",
        "nbconvert_exporter": "python",
        "pygments_lexer": "ipython3",
        "version": ".".join(map(str, sys.version_info[:3])),
    }


def _js_numbers(value):
    """``value`` after a JavaScript JSON round trip: integral floats become ints."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _js_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_js_numbers(v) for v in value]
    return value


def canonical(text: str, python_version: bool = True) -> str:
    """The notebook ``text`` as JupyterLab would save it right after opening it.
    ``python_version=False`` keeps the file's ``language_info.version`` (the one part that
    depends on the interpreter that runs the check)."""
    nb = _js_numbers(json.loads(text))
    nb["metadata"]["kernelspec"] = dict(KERNELSPEC)
    info = language_info()
    if not python_version:
        info["version"] = nb["metadata"].get("language_info", {}).get("version", info["version"])
    nb["metadata"]["language_info"] = info
    out = nbformat.writes(nbformat.from_dict(nb), version=nbformat.NO_CONVERT)
    return out if out.endswith("\n") else out + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fix", action="store_true", help="rewrite the files")
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args(argv)
    bad = 0
    for path in args.files:
        text = path.read_text(encoding="utf-8")
        form = canonical(text)
        if form != text:
            bad += 1
            if args.fix:
                path.write_text(form, encoding="utf-8")
            print(f"{path}: {'rewritten' if args.fix else 'not in the form JupyterLab saves'}")
    return 0 if args.fix or not bad else 1


if __name__ == "__main__":
    sys.exit(main())
