"""Raw ZMTP 3.0 peer for the integration tests (no ZeroMQ library: a hostile client
speaks the wire protocol itself).

  zmtp_flood.py big HOST PORT MIB     one DEALER message of MIB MiB, sent in 1 MiB
                                      writes until the peer drops the connection;
                                      prints "sent N MiB, dropped: yes|no"
  zmtp_flood.py conns HOST PORT N FILE
                                      N connections, each greeted as a DEALER; after
                                      5 s writes "opened N, dropped D, kept K" to FILE
                                      and holds the kept ones until stdin closes
"""
import select
import socket
import struct
import sys
import time


def handshake(host, port):
    s = socket.create_connection((host, port), timeout=10)
    # greeting: signature, version 3.0, mechanism NULL, as-server 0, filler
    s.sendall(b"\xff" + b"\x00" * 8 + b"\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\x00") +
              b"\x00" + b"\x00" * 31)
    got = b""
    while len(got) < 64:
        chunk = s.recv(64 - len(got))
        if not chunk:
            sys.exit("zmtp_flood: the peer closed during the greeting")
        got += chunk
    name = b"Socket-Type"
    body = b"\x05READY" + bytes([len(name)]) + name + struct.pack(">I", 6) + b"DEALER"
    s.sendall(b"\x04" + bytes([len(body)]) + body)
    return s


def big(host, port, mib):
    s = handshake(host, port)
    size = mib << 20
    sent = 0
    dropped = False
    chunk = b"\x00" * (1 << 20)
    try:
        s.sendall(b"\x02" + struct.pack(">Q", size))  # one long final frame
        while sent < mib:
            s.sendall(chunk)
            sent += 1
        s.settimeout(5)
        dropped = s.recv(1) == b""
    except (BrokenPipeError, ConnectionResetError):
        dropped = True
    except socket.timeout:
        dropped = False
    print("sent %d MiB, dropped: %s" % (sent, "yes" if dropped else "no"))


def conns(host, port, n, out):
    socks = []
    for _ in range(n):
        s = socket.create_connection((host, port), timeout=10)
        try:  # the greeting: a refused connection may already be gone
            s.sendall(b"\xff" + b"\x00" * 8 + b"\x7f" + b"\x03\x00" +
                      b"NULL".ljust(20, b"\x00") + b"\x00" + b"\x00" * 31)
        except OSError:
            pass
        s.setblocking(False)
        socks.append(s)
    deadline = time.monotonic() + 5
    alive = set(socks)
    while time.monotonic() < deadline:
        r, _, _ = select.select(list(alive), [], [], 0.2)
        for s in r:
            try:
                while True:
                    data = s.recv(65536)
                    if not data:
                        alive.discard(s)
                        break
            except BlockingIOError:
                pass
            except OSError:
                alive.discard(s)
    with open(out, "w") as f:
        f.write("opened %d, dropped %d, kept %d\n" % (n, n - len(alive), len(alive)))
    sys.stdin.read()  # held until the caller closes our stdin


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "big":
        big(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif len(sys.argv) == 6 and sys.argv[1] == "conns":
        conns(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    else:
        sys.exit(__doc__)
