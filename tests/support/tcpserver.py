"""A loopback TCP listener with one thread per connection, for in-test protocol stand-ins.

Why shared: the kio stand-in brokers used where a real Kafka cannot run here (workloads'
observer tests, storage's librdkafka capture) need the same accept/close plumbing; each
subclass only speaks its protocol in ``_serve``. Listens on 127.0.0.1 only.
"""
from __future__ import annotations

import socket
import threading


class LoopbackServer:
    def __init__(self) -> None:
        self._srv = socket.create_server(("127.0.0.1", 0))
        self.port = self._srv.getsockname()[1]
        self._stop = threading.Event()
        self._conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._srv.close()
        for c in self._conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._srv.accept()
            except OSError:
                return
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        raise NotImplementedError
