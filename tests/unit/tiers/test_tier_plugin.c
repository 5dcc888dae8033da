/* test_tier_plugin.c — the kind registry and the plug-in loader (tier.h): a tier
 * kind outside the tree is one shared object loaded by path, refused with the
 * reason a person needs ("file not found", "symbol missing", "version mismatch",
 * "invalid ops table", "kind already registered"); and tier.c's fallbacks for the
 * optional ops, run on the fake tier (tests/support/tier_fake.c), which
 * implements only the required single-slot ops. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include <cmocka.h>

#include "tier.h"
#include "tier_checksum.h"

#define CAP 8
#define SLOT 4096

static const struct tier_ops *g_fake;

static void s_refused(const char *path, const char *why)
{
    char err[512] = "";
    assert_null(tier_load(path, err, sizeof err));
    if (!strstr(err, why))
        fail_msg("loading %s: \"%s\" does not say \"%s\"", path, err, why);
}

static int s_setup(void **state)
{
    (void)state;
    char err[512] = "";
    g_fake = tier_load(KVT_TIER_FAKE_SO, err, sizeof err);
    if (!g_fake)
        fprintf(stderr, "%s\n", err);
    return g_fake ? 0 : -1;
}

/* Registry: one place maps name <-> wire kind <-> ops; a plug-in kind has no wire
 * number (UNSPECIFIED) and is found by name. */
static void test_registry_maps_names_wire_kinds_and_ops(void **state)
{
    (void)state;
    assert_int_equal(tier_kind_wire("host"), 1);
    assert_int_equal(tier_kind_wire("nvme"), 2);
    assert_string_equal(tier_kind_name(1), "host");
    assert_string_equal(tier_kind_name(2), "nvme");
    assert_null(tier_kind_name(0));
    assert_null(tier_kind_name(99));
    assert_int_equal(tier_kind_wire("fake"), 0);
    assert_int_equal(tier_kind_wire("nope"), 0);
    assert_ptr_equal(tier_find("fake"), g_fake);
    assert_string_equal(g_fake->kind, "fake");
}

/* The loader names what went wrong, and a refused object is not registered. */
static void test_loader_says_which_failure(void **state)
{
    (void)state;
    s_refused("/nonexistent/kvt-plugin.so", "file not found");
    s_refused(KVT_TIER_BAD_NOSYM_SO, "symbol missing");
    s_refused(KVT_TIER_BAD_OLDVERSION_SO, "version mismatch");
    s_refused(KVT_TIER_BAD_REFUSES_SO, "version mismatch");
    s_refused(KVT_TIER_BAD_NOOPEN_SO, "invalid ops table");
    s_refused("/etc/hostname", "cannot load");
    s_refused("", "a path");
    assert_null(tier_find("bad"));
}

/* Loading the same path again returns the same table; another object serving a
 * kind already registered is refused. */
static void test_same_path_again_and_duplicate_kind(void **state)
{
    (void)state;
    char err[512] = "", copy[] = "/tmp/kvt-plugin-copy-XXXXXX";
    assert_ptr_equal(tier_load(KVT_TIER_FAKE_SO, err, sizeof err), g_fake);
    char spelled[600]; /* the same object under another spelling of its path */
    const char *slash = strrchr(KVT_TIER_FAKE_SO, '/');
    assert_non_null(slash);
    snprintf(spelled, sizeof spelled, "%.*s/.%s", (int)(slash - KVT_TIER_FAKE_SO), /* dir/./x.so */
             KVT_TIER_FAKE_SO, slash);
    assert_ptr_equal(tier_load(spelled, err, sizeof err), g_fake);
    int fd = mkstemp(copy);
    assert_true(fd >= 0);
    FILE *in = fopen(KVT_TIER_FAKE_SO, "rb");
    assert_non_null(in);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(write(fd, buf, n), (ssize_t)n);
    fclose(in);
    close(fd);
    s_refused(copy, "kind already registered");
    unlink(copy);
}

/* A copy of the fake plug-in in a fresh private directory (the caller removes
 * both): path into out. */
static void s_copy_plugin(char *dir, char *out, size_t len)
{
    assert_non_null(mkdtemp(dir));
    snprintf(out, len, "%s/kvt_tier_fake_copy.so", dir);
    FILE *in = fopen(KVT_TIER_FAKE_SO, "rb"), *o = fopen(out, "wb");
    assert_true(in && o);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(fwrite(buf, 1, n, o), n);
    fclose(in);
    fclose(o);
    assert_int_equal(chmod(out, 0644), 0);
}

/* Issue 12 §8: a plug-in runs inside the tier process, so it loads only from a
 * file owned by root or this user and writable by no one else, in a directory no
 * one else can replace it in. */
static void test_loader_refuses_untrusted_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/kvt-plugin-trust-XXXXXX", path[128];
    s_copy_plugin(dir, path, sizeof path);
    assert_int_equal(chmod(path, 0666), 0);
    s_refused(path, "writable by group or others (mode 0666)");
    assert_int_equal(chmod(path, 0644), 0);
    assert_int_equal(chmod(dir, 0777), 0);
    s_refused(path, "its directory");
    assert_int_equal(chmod(dir, 0700), 0);
    /* a symlink is judged by what it points to: a link in a private directory to
     * the plug-in in a directory anyone can write is refused, naming that
     * directory; a link to a fifo is not a regular file */
    char safe[] = "/tmp/kvt-plugin-link-XXXXXX", link[160];
    assert_non_null(mkdtemp(safe));
    snprintf(link, sizeof link, "%s/kvt_tier_link.so", safe);
    assert_int_equal(symlink(path, link), 0);
    assert_int_equal(chmod(dir, 0777), 0);
    s_refused(link, dir);
    s_refused(link, "its directory");
    assert_int_equal(chmod(dir, 0700), 0);
    /* its directory private again: the link loads (the copy's kind is the fake's, so
     * the registry refuses it only after the load) */
    s_refused(link, "kind already registered");
    char fifo[160];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    unlink(link);
    assert_int_equal(symlink(fifo, link), 0);
    s_refused(link, "not a regular file");
    unlink(link);
    unlink(fifo);
    rmdir(safe);
    if (geteuid() == 0) { /* give it to nobody: only root can */
        assert_int_equal(chown(path, 65534, 65534), 0);
        s_refused(path, "owned by uid 65534");
    }
    s_refused(dir, "not a regular file");
    unlink(path);
    rmdir(dir);
}

static tier_config_t s_cfg(void)
{
    tier_config_t c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "fake0");
    snprintf(c.kind, sizeof c.kind, "fake");
    c.capacity = CAP;
    c.slot_size = SLOT;
    return c;
}

/* Options are the backend's: an undeclared key is refused before the backend sees
 * it, a declared one is checked by the backend's configure. */
static void test_options_are_checked_by_the_backend(void **state)
{
    (void)state;
    char err[512] = "";
    tier_config_t c = s_cfg();
    assert_int_equal(tier_config_set(&c, "queue_depth", "8"), 0);
    assert_null(tier_open(&c, err, sizeof err));
    assert_non_null(strstr(err, "queue_depth: not an option of kind \"fake\""));
    c = s_cfg();
    assert_int_equal(tier_config_set(&c, "max_bytes", "4096"), 0);
    assert_null(tier_open(&c, err, sizeof err));
    assert_non_null(strstr(err, "max_bytes:"));
    assert_int_equal(tier_config_set(&c, "max_bytes", "x"), 0); /* replaces */
    assert_int_equal(c.n_options, 1);
    assert_int_equal(tier_configure(&c, err, sizeof err), -EINVAL);
    assert_int_equal(tier_config_set(&c, "", "v"), -EINVAL);
    char longkey[TIER_OPTION_KEY_MAX + 1];
    memset(longkey, 'k', sizeof longkey - 1);
    longkey[sizeof longkey - 1] = '\0';
    assert_int_equal(tier_config_set(&c, longkey, "v"), -ENAMETOOLONG);
    c = s_cfg();
    snprintf(c.kind, sizeof c.kind, "ssd");
    assert_null(tier_open(&c, err, sizeof err));
    assert_non_null(strstr(err, "unknown kind \"ssd\""));
}

static void s_fill(uint8_t *b, uint8_t seed)
{
    for (size_t i = 0; i < SLOT; i++)
        b[i] = (uint8_t)(seed + i * 7);
}

/* write_batch without a backend op: a loop that stops at the first refused item,
 * the rest -ECANCELED; commit_batch sets SERVING and the backend fills the
 * checksum; read_batch refuses a slot that is not SERVING (-ENODATA); inventory,
 * probe and describe have their fallbacks. */
static void test_fallbacks_match_one_by_one(void **state)
{
    (void)state;
    char err[512] = "";
    tier_config_t c = s_cfg();
    tier_t *t = tier_open(&c, err, sizeof err);
    assert_non_null(t);
    static uint8_t in[3][SLOT], out[3][SLOT];
    struct iovec iv[3], ov[3];
    tier_io_t w[3];
    for (int i = 0; i < 3; i++) {
        s_fill(in[i], (uint8_t)(i + 1));
        iv[i] = (struct iovec){in[i], SLOT};
        w[i] = (tier_io_t){.slot = (uint64_t)i, .iov = &iv[i], .n = 1};
    }
    w[1].slot = CAP; /* out of range */
    assert_int_equal(tier_write_batch(t, w, 3), -ERANGE);
    assert_int_equal(w[0].rc, 0);
    assert_int_equal(w[1].rc, -ERANGE);
    assert_int_equal(w[2].rc, -ECANCELED);
    w[1].slot = 1;
    assert_int_equal(tier_write_batch(t, w, 3), 0);
    for (int i = 0; i < 3; i++)
        w[i].hdr = (tier_slot_header_t){.size = SLOT, .instance = 7};
    assert_int_equal(tier_commit_batch(t, w, 2), 0); /* slots 0 and 1 */
    for (int i = 0; i < 2; i++) {
        assert_int_equal(w[i].hdr.state, TIER_SLOT_SERVING);
        assert_true(w[i].hdr.checksum == tier_checksum(&iv[i], 1));
    }
    tier_io_t r[3];
    for (int i = 0; i < 3; i++) {
        ov[i] = (struct iovec){out[i], SLOT};
        r[i] = (tier_io_t){.slot = (uint64_t)i, .iov = &ov[i], .n = 1};
    }
    assert_int_equal(tier_read_batch(t, r, 3), -ENODATA); /* slot 2 is WRITING */
    assert_int_equal(r[0].rc, 0);
    assert_int_equal(r[1].rc, 0);
    assert_int_equal(r[2].rc, -ENODATA);
    assert_int_equal(r[0].size, SLOT);
    assert_memory_equal(out[0], in[0], SLOT);
    assert_memory_equal(out[1], in[1], SLOT);
    uint64_t slots[3] = {0, 1, 2};
    bool present[3];
    assert_int_equal(tier_probe(t, slots, 3, present), 0);
    assert_true(present[0] && present[1] && !present[2]);
    tier_io_t clr[1] = {{.slot = 0}};
    assert_int_equal(tier_clear_batch(t, clr, 1), 0);
    assert_int_equal(tier_probe(t, slots, 3, present), 0);
    assert_true(!present[0] && present[1]);
    tier_desc_t d1, d2;
    tier_describe(t, &d1);
    tier_describe(t, &d2);
    assert_true(d1.epoch != 0 && d1.epoch == d2.epoch);
    assert_int_equal(d1.access_kind, TIER_ACCESS_NONE);
    assert_null(tier_slot_data(t, 1));
    tier_close(&t);
    assert_null(t);
}

static int s_count_inventory(void *arg, uint64_t slot, const tier_slot_header_t *h)
{
    (void)slot;
    (*(int *)arg) += h->state == TIER_SLOT_SERVING;
    return 0;
}

static void test_inventory_fallback_walks_serving_slots(void **state)
{
    (void)state;
    char err[512] = "";
    tier_config_t c = s_cfg();
    tier_t *t = tier_open(&c, err, sizeof err);
    assert_non_null(t);
    static uint8_t b[SLOT];
    struct iovec v = {b, 100};
    for (uint64_t s = 0; s < CAP; s += 2) {
        assert_int_equal(tier_write(t, s, &v, 1), 0);
        tier_slot_header_t h = {.state = TIER_SLOT_SERVING, .size = 100};
        assert_int_equal(tier_put_header(t, s, &h), 0);
    }
    int n = 0;
    assert_int_equal(tier_inventory(t, s_count_inventory, &n), 0);
    assert_int_equal(n, CAP / 2);
    tier_close(&t);
}

/* tier.h write: before new bytes go over a slot it stops being served — a rule of
 * every backend (nothing above the ops table marks the slot), checked on each
 * registered kind. */
static void test_write_stops_serving_for_every_kind(void **state)
{
    (void)state;
    static const char *const kinds[] = {"host", "nvme", "fake"};
    char dir[] = "/tmp/kvt-conform-XXXXXX";
    assert_non_null(mkdtemp(dir));
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        char err[512] = "";
        tier_config_t c = s_cfg();
        snprintf(c.kind, sizeof c.kind, "%s", kinds[k]);
        if (k == 0)
            snprintf(c.path, sizeof c.path, "/kvt-conform-%d", (int)getpid());
        else if (k == 1)
            snprintf(c.path, sizeof c.path, "%s/t.dat", dir);
        tier_t *t = tier_open(&c, err, sizeof err);
        if (!t)
            fail_msg("%s: %s", kinds[k], err);
        static uint8_t b[SLOT];
        s_fill(b, 9);
        struct iovec v = {b, SLOT};
        tier_slot_header_t h = {.state = TIER_SLOT_SERVING, .size = SLOT}, got;
        assert_int_equal(tier_write(t, 2, &v, 1), 0);
        assert_int_equal(tier_put_header(t, 2, &h), 0);
        assert_int_equal(tier_get_header(t, 2, &got), 0);
        assert_int_equal(got.state, TIER_SLOT_SERVING);
        s_fill(b, 10);
        assert_int_equal(tier_write(t, 2, &v, 1), 0);
        assert_int_equal(tier_get_header(t, 2, &got), 0);
        if (got.state == TIER_SLOT_SERVING)
            fail_msg("%s: slot still SERVING while its bytes were replaced", kinds[k]);
        tier_close(&t);
    }
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* tier_put_batch gives every kind the same outcome for a refusal before any I/O
 * (a slot out of range): a backend that commits in its write (nvme) and the
 * write-then-commit fallback (host, the fake) store SERVING headers with the
 * bytes' size and checksum, stop at the first refused item (the rest
 * -ECANCELED) and serve what they stored. A refused checksum differs (tier.h:
 * nvme still tries the later items); the nvme tier's refusal is in
 * test_tier_nvme.c. */
static void test_put_batch_same_outcome_for_every_kind(void **state)
{
    (void)state;
    static const char *const kinds[] = {"host", "nvme", "fake"};
    char dir[] = "/tmp/kvt-conform-XXXXXX";
    assert_non_null(mkdtemp(dir));
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        char err[512] = "";
        tier_config_t c = s_cfg();
        snprintf(c.kind, sizeof c.kind, "%s", kinds[k]);
        if (k == 0)
            snprintf(c.path, sizeof c.path, "/kvt-conform-put-%d", (int)getpid());
        else if (k == 1)
            snprintf(c.path, sizeof c.path, "%s/p.dat", dir);
        tier_t *t = tier_open(&c, err, sizeof err);
        if (!t)
            fail_msg("%s: %s", kinds[k], err);
        static uint8_t in[3][SLOT], out[SLOT];
        struct iovec iv[3];
        tier_io_t w[3];
        for (int i = 0; i < 3; i++) {
            s_fill(in[i], (uint8_t)(i + 20));
            iv[i] = (struct iovec){in[i], SLOT};
            w[i] = (tier_io_t){.slot = (uint64_t)i, .iov = &iv[i], .n = 1};
            w[i].hdr.instance = 5;
            w[i].hdr.key.b[0] = (uint8_t)(i + 1);
        }
        w[1].slot = CAP; /* out of range */
        assert_int_equal(tier_put_batch(t, w, 3), -ERANGE);
        assert_int_equal(w[0].rc, 0);
        assert_int_equal(w[1].rc, -ERANGE);
        assert_int_equal(w[2].rc, -ECANCELED);
        w[1].slot = 1;
        assert_int_equal(tier_put_batch(t, w, 3), 0);
        for (int i = 0; i < 3; i++) {
            tier_slot_header_t h;
            assert_int_equal(w[i].rc, 0);
            assert_int_equal(tier_get_header(t, (uint64_t)i, &h), 0);
            assert_int_equal(h.state, TIER_SLOT_SERVING);
            assert_int_equal(h.size, SLOT);
            assert_int_equal(h.instance, 5);
            assert_int_equal(h.key.b[0], i + 1);
            struct iovec ov = {out, SLOT};
            assert_int_equal(tier_read(t, (uint64_t)i, &ov, 1), 0);
            assert_memory_equal(out, in[i], SLOT);
        }
        tier_close(&t);
    }
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry_maps_names_wire_kinds_and_ops),
        cmocka_unit_test(test_loader_says_which_failure),
        cmocka_unit_test(test_loader_refuses_untrusted_files),
        cmocka_unit_test(test_same_path_again_and_duplicate_kind),
        cmocka_unit_test(test_options_are_checked_by_the_backend),
        cmocka_unit_test(test_fallbacks_match_one_by_one),
        cmocka_unit_test(test_inventory_fallback_walks_serving_slots),
        cmocka_unit_test(test_write_stops_serving_for_every_kind),
        cmocka_unit_test(test_put_batch_same_outcome_for_every_kind),
    };
    return cmocka_run_group_tests(tests, s_setup, NULL);
}
