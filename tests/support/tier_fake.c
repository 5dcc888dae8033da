/* tier_fake.c — see tier_fake.h. As a plug-in it calls the tier.h helpers the
 * loading executable exports (tiers/tier_plugin_api.list): tier_option_u64 and
 * tier_checksum resolve at dlopen, which the plug-in tests rely on. */
#include "tier_fake.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tier_checksum.h"

#define S_DEFAULT_MAX_BYTES (1ull << 30)

typedef struct {
    uint8_t *bytes; /* capacity x slot_size */
    tier_slot_header_t *hdrs;
    uint64_t *written; /* bytes last written per slot */
    uint64_t capacity, slot_size;
} s_fake_t;

static const char *const s_option_keys[] = {"max_bytes", NULL};

static int s_max_bytes(const tier_config_t *cfg, uint64_t *out, char *err, size_t errlen)
{
    return tier_option_u64(cfg, "max_bytes", 1, UINT64_MAX, S_DEFAULT_MAX_BYTES, out, err, errlen);
}

static int s_configure(tier_config_t *cfg, char *err, size_t errlen)
{
    uint64_t max;
    int rc = s_max_bytes(cfg, &max, err, errlen);
    if (rc == 0 && (cfg->slot_size > max || cfg->capacity > max / cfg->slot_size)) {
        snprintf(err, errlen, "max_bytes: %llu slots of %llu bytes exceed %llu bytes",
                 (unsigned long long)cfg->capacity, (unsigned long long)cfg->slot_size,
                 (unsigned long long)max);
        rc = -EINVAL;
    }
    return rc;
}

static void s_free(s_fake_t *f)
{
    if (!f)
        return;
    free(f->bytes);
    free(f->hdrs);
    free(f->written);
    free(f);
}

/* tier_open ran configure: the geometry is within max_bytes. */
static int s_open(tier_t *t, const tier_config_t *cfg, char *err, size_t errlen)
{
    s_fake_t *f = calloc(1, sizeof *f);
    if (!f)
        return -ENOMEM;
    f->capacity = cfg->capacity;
    f->slot_size = cfg->slot_size;
    f->bytes = calloc(cfg->capacity, cfg->slot_size);
    f->hdrs = calloc(cfg->capacity, sizeof *f->hdrs);
    f->written = calloc(cfg->capacity, sizeof *f->written);
    if (!f->bytes || !f->hdrs || !f->written) {
        s_free(f);
        snprintf(err, errlen, "out of memory for %llu slots", (unsigned long long)cfg->capacity);
        return -ENOMEM;
    }
    t->priv = f;
    return 0;
}

static void s_close(tier_t *t)
{
    s_free(t->priv);
    t->priv = NULL;
}

/* The slot stops being served before its bytes change (tier.h). */
static int s_write(tier_t *t, uint64_t slot, const struct iovec *iov, int n)
{
    s_fake_t *f = t->priv;
    uint8_t *dst = f->bytes + slot * f->slot_size;
    uint64_t off = 0;
    f->hdrs[slot] = (tier_slot_header_t){.state = TIER_SLOT_WRITING};
    for (int i = 0; i < n; i++) {
        memcpy(dst + off, iov[i].iov_base, iov[i].iov_len);
        off += iov[i].iov_len;
    }
    f->written[slot] = off;
    f->hdrs[slot].size = off;
    return 0;
}

static int s_read(tier_t *t, uint64_t slot, struct iovec *iov, int n)
{
    s_fake_t *f = t->priv;
    const uint8_t *src = f->bytes + slot * f->slot_size;
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        memcpy(iov[i].iov_base, src + off, iov[i].iov_len);
        off += iov[i].iov_len;
    }
    return 0;
}

/* SERVING with checksum 0 stores the checksum of the bytes (as tier_checksum:
 * xxh3-64 of the block). */
static int s_put_header(tier_t *t, uint64_t slot, const tier_slot_header_t *h)
{
    s_fake_t *f = t->priv;
    tier_slot_header_t n = *h;
    if (n.state == TIER_SLOT_SERVING && n.checksum == 0)
        n.checksum = tier_checksum(
            &(struct iovec){.iov_base = f->bytes + slot * f->slot_size, .iov_len = n.size}, 1);
    f->hdrs[slot] = n;
    return 0;
}

static int s_get_header(tier_t *t, uint64_t slot, tier_slot_header_t *h)
{
    const s_fake_t *f = t->priv;
    *h = f->hdrs[slot];
    return 0;
}

const struct tier_ops tier_fake_ops = {
    .version = TIER_OPS_VERSION,
    .kind = TIER_FAKE_KIND,
    .option_keys = s_option_keys,
    .configure = s_configure,
    .open = s_open,
    .close = s_close,
    .write = s_write,
    .read = s_read,
    .put_header = s_put_header,
    .get_header = s_get_header,
};

#ifdef TIER_FAKE_PLUGIN
__attribute__((visibility("default"))) const struct tier_ops *kvtier_tier_entry(uint32_t version);

const struct tier_ops *kvtier_tier_entry(uint32_t version)
{
    return version == TIER_OPS_VERSION ? &tier_fake_ops : NULL;
}
#endif
