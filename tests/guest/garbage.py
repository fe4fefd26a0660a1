#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A user-space peer that sends garbage to a listening kfi_sockets endpoint.

Runs in the test VM next to the kfi_sockets_msg case
`user_space_garbage_sender` (tests/sockets), which listens on PORT. Each
attempt uses a fresh TCP connection:

- before the handshake: random bytes, a bad magic, version, opcode or
  length, a request cut short -- the listener must drop the connection and
  report nothing;
- after a handshake the test accepts (private data "garbage-N"): one bad
  frame each (the last two with TCP urgent data) -- the endpoint must end with
  an EPROTO error and a SHUTDOWN event, never an oops, a write out of
  bounds or a stuck endpoint.

Finally a request with private data "done", which the test rejects. The
wire format is Documentation/sockets-wire.rst.

usage: garbage.py PORT [HOST]
"""

import random
import socket
import struct
import sys
import time

MAGIC, VERSION = 0x666B, 3
CONNREQ, ACCEPT, REJECT, MSG, TAGGED, WRITE, READREQ, READRESP = 1, 2, 3, 4, 5, 6, 7, 8
ATOMIC, ATOMICRESP, ACK, SHUTDOWN = 9, 10, 11, 12


def hdr(op, flags=0, rma=0, ident=0, length=0, data=0, tag=0, magic=MAGIC,
        version=VERSION, pad=0):
    return struct.pack("<HBBHBBQQQQ", magic, version, op, flags, rma, pad,
                       ident, length, data, tag)


def desc(addr, length, key):
    return struct.pack("<QQQ", addr, length, key)


def connect(port, host, deadline):
    while True:
        try:
            return socket.create_connection((host, port), timeout=30)
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.2)


def handshake(port, host, data, deadline):
    """Connects and sends a request; returns the socket once accepted."""
    s = connect(port, host, deadline)
    s.sendall(hdr(CONNREQ, length=len(data)) + data)
    answer = b""
    while len(answer) < 40:
        chunk = s.recv(40 - len(answer))
        if not chunk:
            raise OSError("closed during handshake")
        answer += chunk
    op = answer[3]
    length = struct.unpack("<Q", answer[16:24])[0]
    if length:
        s.recv(length, socket.MSG_WAITALL)
    if op != ACCEPT:
        raise OSError("not accepted: op %d" % op)
    return s


def drain(s):
    """Reads until the peer closes (the endpoint tore the connection down)."""
    s.settimeout(30)
    try:
        while s.recv(4096):
            pass
    except OSError:
        pass
    s.close()


rng = random.Random(1234)

BEFORE = [
    bytes(rng.getrandbits(8) for _ in range(40)),
    hdr(CONNREQ, magic=0x1234),
    hdr(CONNREQ, version=9),
    hdr(77),
    hdr(CONNREQ, length=1 << 40),
    hdr(CONNREQ, pad=1),
    hdr(MSG, length=4),
    hdr(CONNREQ, length=200)[:17],
]

AFTER = [
    hdr(99),
    hdr(MSG, length=(64 << 20) + 1),
    hdr(WRITE, rma=9),
    hdr(WRITE, rma=0, length=8) + b"x" * 8,
    hdr(WRITE, rma=1, length=100) + desc(0, 99, 0x1000) + b"y" * 100,
    hdr(READRESP, ident=424242),
    hdr(ACK, ident=77),
    hdr(ATOMIC, rma=1, length=8, tag=7 | (2 << 32)) + desc(0, 512, 0x1000) + b"z" * 8,
    # A compare op whose length would overflow when doubled.
    hdr(ATOMIC, rma=1, length=16, tag=7 | (12 << 32)) + desc(0, 1 << 63, 0x1000) + b"c" * 16,
    hdr(MSG, flags=0x80),
    hdr(READREQ, rma=1, length=5) + desc(0, 8, 1),
    bytes(rng.getrandbits(8) for _ in range(64)),
    # A header's worth of bytes whose last is TCP urgent data (MSG_OOB),
    # which the protocol has none of.
    (socket.MSG_OOB, b"u" * 40),
    # A well-formed message whose last payload byte is urgent, sent a
    # moment after its header: the receive work, which took the header,
    # reads the payload (the urgent byte inline).
    (socket.MSG_OOB, hdr(MSG, length=8), b"m" * 8),
]


def main():
    port = int(sys.argv[1])
    host = sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1"
    deadline = time.time() + 600
    for junk in BEFORE:
        s = connect(port, host, deadline)
        s.sendall(junk)
        s.shutdown(socket.SHUT_WR)
        drain(s)
    for i, junk in enumerate(AFTER):
        s = handshake(port, host, b"garbage-%d" % i, deadline)
        if isinstance(junk, tuple) and len(junk) == 3:
            flags, first, junk = junk
            s.sendall(first)
            time.sleep(0.3)
            assert s.send(junk, flags) == len(junk)
        elif isinstance(junk, tuple):
            flags, junk = junk
            assert s.send(junk, flags) == len(junk)
        else:
            s.sendall(junk)
        drain(s)
    s = connect(port, host, deadline)
    s.sendall(hdr(CONNREQ, length=4) + b"done")
    drain(s)
    print("garbage.py: sent %d before and %d after the handshake"
          % (len(BEFORE), len(AFTER)))


if __name__ == "__main__":
    main()
