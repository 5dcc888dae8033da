/* config_testkit.h — deployment fragments for the config tests: a deployment must
 * name "cluster" and "tiers" itself (coord_config.c), but most cases are about other
 * keys, so ckit_full(TEXT) gives TEXT a cluster and the default host tier when it has
 * none at its top level. Header-only (static inline), test use only. */
#ifndef KVT_CONFIG_TESTKIT_H
#define KVT_CONFIG_TESTKIT_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Does KEY (quoted) appear as a key of the top-level object of TEXT? */
static inline bool ckit_top_key(const char *text, const char *key)
{
    int depth = 0;
    bool in_str = false;
    size_t n = strlen(key);
    for (const char *p = text; *p; p++) {
        if (in_str) {
            if (*p == '\\' && p[1])
                p++;
            else if (*p == '"')
                in_str = false;
            continue;
        }
        if (*p == '"') {
            if (depth == 1 && strncmp(p, key, n) == 0)
                return true;
            in_str = true;
        } else if (*p == '{' || *p == '[') {
            depth++;
        } else if (*p == '}' || *p == ']') {
            depth--;
        }
    }
    return false;
}

static inline const char *ckit_full(const char *text)
{
    static char buf[8192];
    const char *rest = strchr(text, '{');
    if (!rest)
        return text;
    rest++;
    while (*rest == ' ' || *rest == '\n')
        rest++;
    const char *cluster = ckit_top_key(text, "\"cluster\"") ? "" : "\"cluster\": \"t\"";
    const char *tiers =
        ckit_top_key(text, "\"tiers\"")
            ? ""
            : "\"tiers\": [{\"name\": \"host0\", \"kind\": \"host\", "
              "\"endpoint\": \"tcp://127.0.0.1:7710\", \"capacity\": 4096, "
              "\"slot_size\": \"256KiB\", \"policy\": \"lru\", \"prefault\": true}]";
    bool sep1 = *cluster && *tiers, sep2 = (*cluster || *tiers) && *rest != '}';
    snprintf(buf, sizeof buf, "{%s%s%s%s%s", cluster, sep1 ? ", " : "", tiers, sep2 ? ", " : "",
             rest);
    return buf;
}

#endif
