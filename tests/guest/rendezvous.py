#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Waits until the other guest of the two-host topology is up on the NIC.

usage: rendezvous.py server|client SERVER_ADDR PORT TIMEOUT_S

The server accepts one TCP connection on SERVER_ADDR:PORT, the client
connects to it (again and again while nobody listens yet); each sends one
byte and reads the other's. Exits 0 once that happened, 1 at the timeout.
The guests have no ping; this also shows that TCP crosses the NIC.
"""

import socket
import sys
import time

role, addr, port, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
deadline = time.monotonic() + timeout


def exchange(c):
    c.settimeout(max(1.0, deadline - time.monotonic()))
    c.sendall(b"k")
    return c.recv(1) == b"k"


try:
    if role == "server":
        with socket.create_server((addr, port)) as s:
            s.settimeout(timeout)
            c, _ = s.accept()
            with c:
                sys.exit(0 if exchange(c) else 1)
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((addr, port), timeout=2) as c:
                sys.exit(0 if exchange(c) else 1)
        except OSError:
            time.sleep(1)
except OSError as e:
    print(f"rendezvous: {e}", file=sys.stderr)
sys.exit(1)
