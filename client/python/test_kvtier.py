"""Checks of the Python binding that need no running service (stdlib unittest):
block keys (the pinned vector of kvtier.h, chaining, parent), status names and
connect errors. Run: KVTIER_LIB=build/client/libkvtier.so python3 client/python/test_kvtier.py
"""
import os
import sys
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

    def test_connect_without_discovery_source(self):
        with self.assertRaises(kvtier.KvtError) as cm:
            kvtier.Client()
        self.assertEqual(cm.exception.code, 2)
        self.assertIn("no coordinators and no etcd_endpoints", str(cm.exception))

    def test_bad_key_length_is_refused_before_the_call(self):
        with self.assertRaises(ValueError):
            kvtier._keys([b"short"])


if __name__ == "__main__":
    unittest.main()
