"""ports.py — loopback ports for the integration tests.

A port the kernel picks (bind to port 0) comes from its ephemeral range, the range
it also hands out as the source port of every outgoing connection and to the next
bind(0) anywhere: between a test's pick and its server's bind, another test (or a
client connecting) could be given the same port — seen in CI, where two tests'
etcd and coordinator met on one port. These are drawn at random below the
ephemeral range instead, where nothing is assigned behind the tests' backs, and
checked free by binding; the caller keeps the socket bound until all its ports are
picked, so they differ."""
import random
import socket

_BOTTOM = 10000


def _top():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def bind_free(sock, host="127.0.0.1"):
    """Binds SOCK to a free port of HOST below the ephemeral range; returns it."""
    top = _top()
    if top - _BOTTOM >= 1000:
        rng = random.SystemRandom()
        for _ in range(500):
            port = rng.randrange(_BOTTOM, top)
            try:
                sock.bind((host, port))
                return port
            except OSError:
                continue
    sock.bind((host, 0))  # a machine whose ephemeral range starts low: the kernel's pick
    return sock.getsockname()[1]


def free_port(host="127.0.0.1"):
    """A port that was free a moment ago (the socket is closed again)."""
    s = socket.socket()
    try:
        return bind_free(s, host)
    finally:
        s.close()


if __name__ == "__main__":  # ports.py [N]: N distinct free ports on one line
    import sys
    socks = [socket.socket() for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 1)]
    print(" ".join(str(bind_free(s)) for s in socks))
    for s in socks:
        s.close()
