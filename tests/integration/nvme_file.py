"""Reads and damages an nvme tier file for the integration tests (the layout of
tiers/tier_nvme.h "File layout", version 2: slot i's header record at
headers_off + i * slot_stride, its bytes right after the record).

  nvme_file.py slot FILE KEYHEX     "SLOT DATA_OFFSET SIZE RECORD_OFFSET" of the one
                                    SERVING slot holding KEY (fails unless exactly one)
  nvme_file.py garble FILE OFF LEN  random bytes over that range, on disk (fsync)
                                    before the tier's next O_DIRECT read or open
"""
import os
import struct
import sys


def slot(path, key):
    with open(path, "rb") as f:
        sb = f.read(4096)
        magic, version, record_bytes, _slot_size, capacity, stride, headers_off, data_off = \
            struct.unpack_from("<QIIQQQQQ", sb, 0)
        if magic != 0x31454D564E54564B or version != 2:
            sys.exit("%s: not a version 2 nvme tier file" % path)
        found = []
        for s in range(capacity):
            rec_off = headers_off + s * stride
            f.seek(rec_off)
            rec = f.read(record_bytes)
            rmagic, state, rslot = struct.unpack_from("<IIQ", rec, 0)
            # magic "KVSH", state SERVING (2), the record's own slot
            if rmagic == 0x4853564B and state == 2 and rslot == s and rec[40:56] == key:
                size = struct.unpack_from("<Q", rec, 64)[0]
                found.append((s, rec_off + record_bytes, size, rec_off))
    if len(found) != 1:
        sys.exit("%d SERVING records hold key %s" % (len(found), key.hex()))
    print(*found[0])


def garble(path, off, n):
    fd = os.open(path, os.O_WRONLY)
    os.pwrite(fd, os.urandom(n), off)
    os.fsync(fd)
    os.close(fd)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "slot":
        slot(sys.argv[2], bytes.fromhex(sys.argv[3]))
    elif len(sys.argv) == 5 and sys.argv[1] == "garble":
        garble(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit(__doc__)
