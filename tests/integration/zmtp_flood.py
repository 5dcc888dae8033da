"""Raw ZMTP 3.0 peer for the integration tests (no ZeroMQ library: a hostile client
speaks the wire protocol itself).

  zmtp_flood.py big HOST PORT MIB     one DEALER message of MIB MiB, sent in 1 MiB
                                      writes until the peer drops the connection;
                                      prints "sent N MiB, dropped: yes|no"
"""
import socket
import struct
import sys


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


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "big":
        big(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit(__doc__)
