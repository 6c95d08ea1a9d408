"""Type-check the tutorials: the code cells of notebooks/*.ipynb, through the shipped stubs.

    python tests/typing/notebook_types.py [notebook.ipynb ...]      # make lint runs it

Each notebook's code cells become one module (in a temporary folder), checked by mypy with the
flags ``make lint`` gives tests/typing. IPython syntax is not Python: line magics (``%time``),
shell lines (``!pip``) and the first line of a cell magic become ``pass`` (so line numbers
and indentation survive), ``x = %magic`` gives x the type Any; a cell whose magic runs
another language (``%%bash``) is left out.
Errors are reported as ``notebook.ipynb:cell N:line: message``; the exit status is mypy's.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mypy import api

ROOT = Path(__file__).resolve().parents[2]
FLAGS = [
    "--follow-imports=silent",
    "--ignore-missing-imports",
    "--no-incremental",
    "--cache-dir=/dev/null",
    # a notebook reuses names for new values cell after cell: that is not a type error
    "--allow-redefinition",
    "--no-error-summary",
    "--show-error-codes",
]
# Cell magics whose body is not Python.
OTHER_LANGUAGES = {"bash", "sh", "script", "html", "javascript", "js", "latex", "markdown",
                   "svg", "perl", "ruby", "writefile"}  # fmt: skip
# Names IPython puts in a notebook's namespace (``_``: the last result), and ``_magic``: the
# value of ``x = %magic``.
PRELUDE = (
    "from typing import Any\n"
    "from IPython import get_ipython\n"
    "from IPython.display import display\n"
    "_magic: Any = None\n"
    "_: Any = None\n"  # the last result
)
_MAGIC = re.compile(r"^(\s*)(%|!)")
_ASSIGNED_MAGIC = re.compile(r"^(\s*[\w.,\s]+?=\s*)(%|!)")


@dataclass(frozen=True)
class Line:
    notebook: Path
    cell: int  # 1-based, counting code cells only
    line: int  # 1-based, in the cell


def python_of_cell(source: str) -> str | None:
    """The cell as Python (magics and shell lines as ``pass``), or None to leave it out."""
    lines = source.splitlines()
    if lines and lines[0].startswith("%%"):
        if lines[0][2:].split(maxsplit=1)[0] in OTHER_LANGUAGES:
            return None
        lines[0] = "pass"
    lines = [_ASSIGNED_MAGIC.sub(r"\1_magic  # ", line) for line in lines]
    return "\n".join(_MAGIC.sub(r"\1pass  # ", line) for line in lines)


def module_of(notebook: Path) -> tuple[str, list[Line | None]]:
    """The notebook's code cells as one module, and for each of its lines where it came from."""
    cells = [c for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "code"]
    text = PRELUDE
    origin: list[Line | None] = [None] * PRELUDE.count("\n")
    for index, cell in enumerate(cells, 1):
        source = cell["source"]
        code = python_of_cell("".join(source) if isinstance(source, list) else source)
        if code is None:
            continue
        code_lines = code.splitlines()
        text += "\n".join(code_lines) + "\n"
        origin += [Line(notebook, index, k) for k in range(1, len(code_lines) + 1)]
    return text, origin


def check(notebooks: list[Path]) -> int:
    """Run mypy on the notebooks' code; print the errors by notebook cell; mypy's status."""
    with tempfile.TemporaryDirectory() as folder:
        origins: dict[str, list[Line | None]] = {}
        for notebook in notebooks:
            text, origin = module_of(notebook)
            # a module name must be an identifier ("00_from_pytorch" is not)
            path = Path(folder) / ("nb_" + re.sub(r"\W", "_", notebook.stem) + ".py")
            path.write_text(text)
            origins[str(path)] = origin
        out, err, status = api.run([*FLAGS, *origins])
    for line in out.splitlines():
        found = re.match(r"^(.*?\.py):(\d+): (.*)$", line)
        where = found and origins.get(found.group(1))
        if not found or where is None:
            print(line)
            continue
        number = int(found.group(2))
        at = where[number - 1] if 0 < number <= len(where) else None
        if at is None:
            print(f"{found.group(1)}:{number}: {found.group(3)}")
        else:
            name = (
                at.notebook.relative_to(ROOT) if at.notebook.is_relative_to(ROOT) else at.notebook
            )
            print(f"{name}:cell {at.cell}:{at.line}: {found.group(3)}")
    sys.stderr.write(err)
    return status


def main(argv: list[str]) -> int:
    notebooks = [Path(a).resolve() for a in argv] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    status = check(notebooks)
    print(f"mypy: {len(notebooks)} notebooks, {'no errors' if status == 0 else 'errors above'}")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
