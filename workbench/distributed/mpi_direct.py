"""``MPI_Allreduce`` called through its address, for the hot all_reduce of ``MPICommunicator``.

mpi4py's ``Comm.Allreduce`` parses its buffer arguments on every call. For an all_reduce the
communicator repeats (the same ``x`` into the same ``out``), everything can be resolved once:
the library's ``MPI_Allreduce``, the two addresses, the count and the handles of the type, op
and communicator. The native module's ``mpi_allreduce`` then converts those integers and
calls the function with the GIL released (``kernels/cpu/core/mpi_call.c``).

The function is looked up in mpi4py's own extension (whose dependencies include the MPI
library it was loaded with), so it is the library mpi4py uses. Handles are mpi4py's
(``MPI._handleof``): ints in MPICH's ABI, pointers in Open MPI's, told apart by the size of
``MPI_Comm``. Without the native module, or where the symbol cannot be found, ``resolve``
returns None and the communicator keeps calling mpi4py.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class DirectAllreduce:
    """``MPI_Allreduce`` of one MPI library: ``call(*args(...))`` returns MPI's error code."""

    call: Callable[..., int]
    function: int  # the address of MPI_Allreduce
    handle_size: int  # sizeof(MPI_Comm): 4 (MPICH's int handles) or 8 (Open MPI's pointers)
    in_place: int  # the library's MPI_IN_PLACE

    def args(self, send: np.ndarray | None, recv: np.ndarray, mpi_type, mpi_op, comm) -> tuple:
        """The arguments of ``call`` for ``send`` (None: in place) reduced into ``recv``.

        Both arrays must stay alive, unmoved, while the arguments are used.
        """
        from mpi4py import MPI

        handle = MPI._handleof
        send_address = self.in_place if send is None else _address(send)
        return (
            self.function, self.handle_size, send_address, _address(recv), recv.size,
            handle(mpi_type), handle(mpi_op), handle(comm),
        )  # fmt: skip


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def resolve(MPI: Any) -> DirectAllreduce | None:
    """The direct call for mpi4py's MPI library, or None (no native module, no symbol, an
    unknown handle size, or ``WORKBENCH_MPI_DIRECT=0``)."""
    from ..backends.cpu.native import NATIVE

    if NATIVE is None or os.environ.get("WORKBENCH_MPI_DIRECT") == "0":
        return None
    handle_size = MPI._sizeof(MPI.Comm)
    if handle_size not in (4, 8):
        return None
    try:
        symbol = ctypes.CDLL(MPI.__file__).MPI_Allreduce
    except (OSError, AttributeError):
        return None
    function = ctypes.cast(symbol, ctypes.c_void_p).value
    if not function:
        return None
    return DirectAllreduce(NATIVE.mpi_allreduce, function, handle_size, int(MPI.IN_PLACE))
