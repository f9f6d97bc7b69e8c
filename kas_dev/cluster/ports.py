"""Free loopback ports. Everything the local cluster serves binds 127.0.0.1 only.

Ports are drawn at random below the kernel's ephemeral range: a port the kernel hands out
for bind(0) is also what it picks as the source port of outgoing connections, and the
many connections of several clusters starting at once made such ports collide (a
component then found "its" port taken). Ports handed out by this process are never handed
out twice."""

from __future__ import annotations

import random
import socket
import threading

LOOPBACK = "127.0.0.1"
_RANGE = (20000, 32000)
_given: set[int] = set()
_lock = threading.Lock()


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((LOOPBACK, port))
        except OSError:
            return False
        return True


def free_port() -> int:
    with _lock:
        for _ in range(200):
            port = random.randint(*_RANGE)
            if port not in _given and _bindable(port) and not port_in_use(port):
                _given.add(port)
                return port
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((LOOPBACK, 0))
            port = int(s.getsockname()[1])
        _given.add(port)
        return port


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((LOOPBACK, port)) == 0
