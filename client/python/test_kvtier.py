"""Checks of the Python binding that need no running service (stdlib unittest):
block keys (the pinned vector of kvtier.h, chaining, parent), status names,
connect errors, and that its copies of kvtier.h (constants, struct layouts) are
the header's. Run: KVTIER_LIB=build/client/libkvtier.so python3 client/python/test_kvtier.py
(CC names the C compiler for the layout check, default cc.)
"""
import ctypes
import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kvtier  # noqa: E402


class BlockKeys(unittest.TestCase):
    def test_pinned_vector_matches_c_header(self):
        # kvtier.h: tokens 0..15, 16 per block, no parent
        self.assertEqual(kvtier.block_keys(range(16), 16)[0].hex(),
                         "16d310809c3605d60b49a1755bdbc8b2")

    def test_partial_block_has_no_key_and_parent_continues_chain(self):
        keys = kvtier.block_keys(range(40), 16)
        self.assertEqual(len(keys), 2)
        self.assertEqual(kvtier.block_keys(range(16, 32), 16, parent=keys[0]), [keys[1]])

    def test_zero_tokens_per_block_is_invalid(self):
        with self.assertRaises(kvtier.KvtError) as cm:
            kvtier.block_keys(range(16), 0)
        self.assertEqual(cm.exception.status, "INVALID_ARGUMENT")


class Errors(unittest.TestCase):
    def test_status_names(self):
        self.assertEqual(kvtier.status_name(-2), "INVALID_ARGUMENT")
        self.assertEqual(kvtier.status_name(99), "UNKNOWN")
        self.assertEqual(kvtier.status_name(kvtier.OVERLOADED), "OVERLOADED")
        self.assertEqual(kvtier.status_name(kvtier.ABORTED), "ABORTED")
        self.assertEqual(kvtier.status_name(-kvtier.PERMISSION_DENIED), "PERMISSION_DENIED")

    def test_connect_without_discovery_source(self):
        with self.assertRaises(kvtier.KvtError) as cm:
            kvtier.Client()
        self.assertEqual(cm.exception.code, 2)
        self.assertIn("no coordinators and no etcd_endpoints", str(cm.exception))

    def test_curve_options_go_together(self):
        with self.assertRaises(kvtier.KvtError) as cm:
            kvtier.Client(coordinators="tcp://127.0.0.1:1", curve_cert="/nonexistent/a.key")
        self.assertEqual(cm.exception.code, 2)
        self.assertIn("curve_server_key is missing", str(cm.exception))

    def test_bad_host_name_is_refused(self):
        with self.assertRaises(kvtier.KvtError) as cm:
            kvtier.Client(coordinators="tcp://127.0.0.1:1", host="a b")
        self.assertEqual(cm.exception.code, 2)
        self.assertIn('host "a b": a host name is', str(cm.exception))

    def test_each_status_has_its_exception_class(self):
        for code in range(1, kvtier.STATUS_MAX + 1):
            e = kvtier.KvtError(-code, "x")
            self.assertIsInstance(e, kvtier.KvtError)
            self.assertIs(type(e), kvtier._ERRORS[code])
            self.assertEqual((e.code, e.status), (code, kvtier.status_name(code)))
            self.assertTrue(type(e).__name__.lower().startswith(
                e.status.replace("_", "").lower()), type(e).__name__)
        self.assertEqual(len(set(kvtier._ERRORS.values())), kvtier.STATUS_MAX)
        with self.assertRaises(kvtier.InvalidArgumentError):
            kvtier.Client()
        with self.assertRaises(kvtier.BusyError):
            raise kvtier.KvtError(kvtier.BUSY, "busy")

    def test_bad_key_length_is_refused_before_the_call(self):
        with self.assertRaises(ValueError):
            kvtier._keys([b"short"])


HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kvtier.h")


class HeaderCopies(unittest.TestCase):
    """Issue "one source for shared identities and limits": a copy of a bound that
    cannot be derived (the binding cannot include C) is checked against its source,
    so a bound changed in kvtier.h cannot leave the binding cutting lists short."""

    def test_constants_are_the_headers(self):
        with open(HEADER) as f:
            text = f.read()
        for py, c in (("KEY_BYTES", "KVT_KEY_BYTES"), ("MAX_KEYS", "KVT_MAX_KEYS"),
                      ("MAX_TIERS", "KVT_MAX_TIERS"), ("STATS_PAGE", "KVT_STATS_PAGE"),
                      ("TRIM_STATUS", "KVT_TRIM_STATUS"), ("TRIM_CANCEL", "KVT_TRIM_CANCEL"),
                      ("MAX_SEGMENTS", "KVT_MAX_SEGMENTS"),
                      ("RESIGN_WAIT_DEFAULT_S", "KVT_RESIGN_WAIT_DEFAULT_S"),
                      ("RESIGN_WAIT_MAX_S", "KVT_RESIGN_WAIT_MAX_S"),
                      ("DRAIN_STATUS", "KVT_DRAIN_STATUS"), ("DRAIN_CANCEL", "KVT_DRAIN_CANCEL")):
            m = re.search(r"#define %s (\d+)u?\b" % c, text)
            self.assertIsNotNone(m, c)
            self.assertEqual(getattr(kvtier, py), int(m.group(1)), py)

    def test_struct_layouts_are_the_headers(self):
        prog = """#include <stddef.h>
#include <stdio.h>
#include "kvtier.h"
int main(void) {
    printf("%zu %zu %zu %zu %zu %zu %zu %zu %zu %zu %zu %d %zu %zu %zu %zu %zu %zu "
           "%zu %zu %zu %zu %d %zu %zu %zu %zu %zu %zu %zu %zu %d %zu\\n",
           sizeof(kvt_cluster_info_t),
           offsetof(kvt_cluster_info_t, tiers), offsetof(kvt_cluster_info_t, total_tiers),
           sizeof(kvt_tier_info_t), sizeof(kvt_stat_t), sizeof(kvt_options_t),
           offsetof(kvt_options_t, curve_server_key), sizeof(kvt_prepare_info_t),
           offsetof(kvt_prepare_info_t, skipped), sizeof(kvt_complete_info_t),
           offsetof(kvt_complete_info_t, failed), (int)KVT_HALF_PUT, sizeof(kvt_trim_info_t),
           offsetof(kvt_trim_info_t, keep_blocks), sizeof(kvt_instance_t),
           offsetof(kvt_instance_t, segments),
           sizeof(kvt_request_begin_info_t), offsetof(kvt_request_begin_info_t, branch_name),
           offsetof(kvt_options_t, cuda_library), offsetof(kvt_options_t, device_staging),
           sizeof(kvt_xfer_t), offsetof(kvt_xfer_t, done_event), (int)KVT_MEM_CUDA,
           offsetof(kvt_cluster_info_t, resigning), sizeof(kvt_resign_info_t),
           offsetof(kvt_resign_info_t, waited_ms), offsetof(kvt_resign_info_t, new_epoch),
           offsetof(kvt_tier_info_t, drain), sizeof(kvt_drain_info_t),
           offsetof(kvt_drain_info_t, next_tier), offsetof(kvt_drain_info_t, elapsed_ms),
           (int)KVT_TIER_RETIRED, offsetof(kvt_tier_info_t, pool));
    return 0;
}
"""
        with tempfile.TemporaryDirectory() as d:
            src, exe = os.path.join(d, "layout.c"), os.path.join(d, "layout")
            with open(src, "w") as f:
                f.write(prog)
            subprocess.run([os.environ.get("CC", "cc"), "-std=c11", "-I",
                            os.path.dirname(HEADER), src, "-o", exe], check=True)
            got = [int(v) for v in subprocess.run([exe], check=True, capture_output=True,
                                                  text=True).stdout.split()]
        want = [ctypes.sizeof(kvtier._ClusterInfo), kvtier._ClusterInfo.tiers.offset,
                kvtier._ClusterInfo.total_tiers.offset, ctypes.sizeof(kvtier._TierInfo),
                ctypes.sizeof(kvtier._Stat), ctypes.sizeof(kvtier._Options),
                kvtier._Options.curve_server_key.offset, ctypes.sizeof(kvtier._PrepareInfo),
                kvtier._PrepareInfo.skipped.offset, ctypes.sizeof(kvtier._CompleteInfo),
                kvtier._CompleteInfo.failed.offset, kvtier.HALF_PUT,
                ctypes.sizeof(kvtier._TrimInfo), kvtier._TrimInfo.keep_blocks.offset,
                ctypes.sizeof(kvtier._Instance), kvtier._Instance.segments.offset,
                ctypes.sizeof(kvtier._BeginInfo), kvtier._BeginInfo.branch_name.offset,
                kvtier._Options.cuda_library.offset, kvtier._Options.device_staging.offset,
                ctypes.sizeof(kvtier._Xfer), kvtier._Xfer.done_event.offset, kvtier.MEM_CUDA,
                kvtier._ClusterInfo.resigning.offset, ctypes.sizeof(kvtier._ResignInfo),
                kvtier._ResignInfo.waited_ms.offset, kvtier._ResignInfo.new_epoch.offset,
                kvtier._TierInfo.drain.offset, ctypes.sizeof(kvtier._DrainInfo),
                kvtier._DrainInfo.next_tier.offset, kvtier._DrainInfo.elapsed_ms.offset,
                [k for k, v in kvtier.DRAIN_STATES.items() if v == "retired"][0],
                kvtier._TierInfo.pool.offset]
        self.assertEqual(want, got)


if __name__ == "__main__":
    unittest.main()
