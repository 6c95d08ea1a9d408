"""A one-shot TCP rendezvous: rank 0 hands the same bytes (NCCL's unique id) to every rank.

The torchrun-style way to start NCCL without MPI: rank 0 listens on ``MASTER_ADDR:MASTER_PORT``;
every other rank connects (retrying until ``timeout``), reads a length-prefixed message and
closes. No pickling: the payload is raw bytes.
"""

from __future__ import annotations

import socket
import struct
import time

from .errors import CommunicatorTimeout, DistributedError


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(n - got)
        if not chunk:
            raise DistributedError("TCP rendezvous: rank 0 closed the connection early")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def broadcast_bytes(
    data: bytes | None, rank: int, world_size: int, addr: str, port: int, timeout: float = 300.0
) -> bytes:
    """Rank 0 passes ``data``; every rank returns it."""
    deadline = time.monotonic() + timeout
    if rank == 0:
        if data is None:
            raise DistributedError("TCP rendezvous: rank 0 must give the bytes to share")
        with socket.create_server((addr, port), reuse_port=False) as server:
            server.settimeout(timeout)
            for _ in range(world_size - 1):
                try:
                    conn, _peer = server.accept()
                except TimeoutError:
                    raise CommunicatorTimeout(
                        f"TCP rendezvous on {addr}:{port}: not every one of {world_size} ranks "
                        f"connected within {timeout} s"
                    ) from None
                with conn:
                    conn.sendall(struct.pack("<Q", len(data)) + data)
        return data
    while True:
        try:
            with socket.create_connection((addr, port), timeout=timeout) as conn:
                (n,) = struct.unpack("<Q", _recv_exact(conn, 8))
                return _recv_exact(conn, n)
        except (ConnectionRefusedError, OSError) as e:
            if isinstance(e, DistributedError):
                raise
            if time.monotonic() > deadline:
                raise CommunicatorTimeout(
                    f"TCP rendezvous: rank {rank} could not reach rank 0 at {addr}:{port} "
                    f"within {timeout} s ({e})"
                ) from None
            time.sleep(0.05)
