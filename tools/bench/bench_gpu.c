/* bench_gpu.c — `kvt-bench gpu` (issue 11 §1): GB/s host-to-device, device-to-host and
 * device-to-device through the gpu tier against raw cudaMemcpyAsync with pinned
 * memory in the same run, and what the machine allows (CUDA IPC between processes,
 * cudaHostRegister of a shared-memory mapping).
 *
 *   H2D  tier_write of whole slots from pageable host memory (the tier actor's
 *        frames), through the tier's pinned staging  vs  cudaMemcpyAsync from a
 *        registered buffer into device memory, one stream;
 *   D2H  tier_read  vs  cudaMemcpyAsync into a registered buffer;
 *   and both again from / into registered memory, which the tier copies directly
 *   (no staging): what a registered host-tier segment or pinned frames would give;
 *   D2D  a second process (this executable again: CUDA contexts do not survive
 *        fork) opens the arena's IPC handle from describe and copies between it and
 *        its own allocation  vs  the same copy between two of its own allocations.
 *   shm  a POSIX shm mapping registered with cudaHostRegister (what a host tier's
 *        segment would be), H2D from it vs from the registered heap buffer.
 *
 * Every figure is printed as it is measured (a device run may be cut short). With
 * the suite's fake runtime it runs the same code but measures memcpy, and says so. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <dlfcn.h>

#include "bench.h"
#include "tier.h"
#include "tier_cuda.h"
#include "tier_gpu.h"

typedef struct {
    const char *library;
    const char *device;
    uint64_t block;
    uint64_t total;
    uint64_t staging;
    int rounds;
    bool require;
    const char *child_handle; /* --ipc-child HEX: the D2D half, in a fresh process */
    int child_device;
} s_args_t;

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void s_usage(void)
{
    fprintf(stderr,
            "usage: kvt-bench gpu [--cuda-library PATH] [--device IDX|UUID] [--block BYTES]\n"
            "                     [--total MIB] [--staging BYTES] [--rounds N] [--require]\n"
            "  H2D / D2H / D2D GB/s through the gpu tier vs raw cudaMemcpyAsync with pinned\n"
            "  memory (defaults: block 4 MiB, total 256 MiB, staging 8 MiB, 3 rounds, best\n"
            "  kept). Without a runtime or device it says why and exits 0 (1 with --require).\n");
}

static int s_parse(int argc, char **argv, s_args_t *a)
{
    *a = (s_args_t){
        .block = 4u << 20, .total = 256u << 20, .staging = TIER_GPU_STAGING_DEFAULT, .rounds = 3};
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(o, "--require") == 0) {
            a->require = true;
            continue;
        }
        if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0 || !v) {
            s_usage();
            return -1;
        }
        i++;
        if (strcmp(o, "--cuda-library") == 0)
            a->library = v;
        else if (strcmp(o, "--device") == 0)
            a->device = v;
        else if (strcmp(o, "--block") == 0)
            a->block = strtoull(v, NULL, 0);
        else if (strcmp(o, "--total") == 0)
            a->total = strtoull(v, NULL, 0) << 20;
        else if (strcmp(o, "--staging") == 0)
            a->staging = strtoull(v, NULL, 0);
        else if (strcmp(o, "--rounds") == 0)
            a->rounds = atoi(v);
        else if (strcmp(o, "--ipc-child") == 0)
            a->child_handle = v;
        else if (strcmp(o, "--child-device") == 0)
            a->child_device = atoi(v);
        else {
            s_usage();
            return -1;
        }
    }
    if (a->block < 4096 || a->block % 4096 || a->total < a->block || a->rounds < 1) {
        fprintf(stderr, "kvt-bench gpu: --block a multiple of 4096, --total >= one block, "
                        "--rounds >= 1\n");
        return -1;
    }
    return 0;
}

static void s_fig(const char *what, double gbs, double base)
{
    if (base > 0)
        printf("%-44s %8.2f GB/s   raw %8.2f GB/s   ratio %.2fx\n", what, gbs, base, gbs / base);
    else
        printf("%-44s %8.2f GB/s\n", what, gbs);
    fflush(stdout);
}

/* GB/s of the best of rounds of n raw async copies of block bytes, one sync each round. */
static double s_raw(tier_cuda_t *cu, tier_cuda_stream_t s, char *dst, const char *src,
                    uint64_t block, uint64_t n, int kind, int rounds, bool dst_step, bool src_step)
{
    double best = 0;
    for (int r = 0; r < rounds; r++) {
        double t0 = s_now();
        for (uint64_t i = 0; i < n; i++)
            if (cu->memcpy_async(dst + (dst_step ? i * block : 0), src + (src_step ? i * block : 0),
                                 block, kind, s) != 0)
                return -1;
        if (cu->stream_synchronize(s) != 0)
            return -1;
        double gbs = (double)(block * n) / (s_now() - t0) / 1e9;
        best = gbs > best ? gbs : best;
    }
    return best;
}

static double s_tier_pass(tier_t *t, char *host, uint64_t block, uint64_t n, bool write, int rounds)
{
    double best = 0;
    for (int r = 0; r < rounds; r++) {
        double t0 = s_now();
        for (uint64_t i = 0; i < n; i++) {
            struct iovec v = {host, block};
            if ((write ? tier_write(t, i, &v, 1) : tier_read(t, i, &v, 1)) != 0)
                return -1;
        }
        double gbs = (double)(block * n) / (s_now() - t0) / 1e9;
        best = gbs > best ? gbs : best;
    }
    return best;
}

/* The D2D half, in its own process: open the arena, copy to and fro. */
static int s_child(const s_args_t *a)
{
    char err[512];
    tier_cuda_t *cu = tier_cuda_open(a->library, "--cuda-library", err, sizeof err);
    if (!cu) {
        printf("D2D: not measured: %s\n", err);
        return 1;
    }
    tier_cuda_ipc_handle_t h;
    const char *x = a->child_handle;
    for (size_t i = 0; i < sizeof h.reserved; i++) {
        unsigned b = 0;
        if (sscanf(x + 2 * i, "%2x", &b) != 1)
            return 1;
        h.reserved[i] = (char)b;
    }
    uint64_t n = a->total / a->block;
    void *arena = NULL, *mine = NULL, *other = NULL;
    tier_cuda_stream_t s = NULL;
    int rc = cu->set_device(a->child_device);
    if (rc == 0)
        rc = cu->ipc_open_mem_handle(&arena, h, TIER_CUDA_IPC_LAZY_PEER_ACCESS);
    if (rc != 0) {
        char text[256];
        printf("CUDA IPC: UNAVAILABLE here: cudaIpcOpenMemHandle: %s (same-GPU clients fall "
               "back to frames)\n",
               tier_cuda_strerror(cu, rc, text, sizeof text));
        tier_cuda_close(&cu);
        return 0;
    }
    printf("CUDA IPC: available (a second process opened the tier's arena)\n");
    if (cu->malloc_device(&mine, a->block * n) != 0 || cu->malloc_device(&other, a->block * n) ||
        cu->stream_create(&s, TIER_CUDA_STREAM_NON_BLOCKING) != 0) {
        printf("D2D: not measured: cannot allocate %" PRIu64 " bytes twice\n", a->block * n);
        return 1;
    }
    uint64_t stride = a->block; /* the bench's slot size is a multiple of 4096 */
    double raw = s_raw(cu, s, other, mine, a->block, n, TIER_CUDA_D2D, a->rounds, true, true);
    double out = s_raw(cu, s, mine, arena, stride, n, TIER_CUDA_D2D, a->rounds, true, true);
    s_fig("D2D tier arena -> client (IPC mapping)", out, raw);
    /* the parent wrote 0xa5 into the last slot last: the mapping shows it */
    unsigned char check[4096];
    bool same =
        cu->memcpy_sync(check, (char *)mine + (n - 1) * stride, sizeof check, TIER_CUDA_D2H) == 0;
    for (size_t i = 0; same && i < sizeof check; i++)
        same = check[i] == 0xa5;
    printf("CUDA IPC bytes: %s\n", same ? "the tier's slot bytes, as written (checked)"
                                        : "WRONG: the mapping does not show the tier's bytes");
    double in = s_raw(cu, s, arena, mine, stride, n, TIER_CUDA_D2D, a->rounds, true, true);
    s_fig("D2D client -> tier arena (IPC mapping)", in, raw);
    cu->stream_destroy(s);
    cu->free_device(mine);
    cu->free_device(other);
    cu->ipc_close_mem_handle(arena);
    tier_cuda_close(&cu);
    return same ? 0 : 1;
}

static void s_run_child(const s_args_t *a, const tier_desc_t *d, int dev)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n < 0) {
        printf("D2D: not measured: /proc/self/exe: %s\n", strerror(errno));
        return;
    }
    exe[n] = '\0';
    char hex[2 * TIER_DESC_HANDLE_MAX + 1];
    for (uint32_t i = 0; i < d->handle_len; i++)
        snprintf(hex + 2 * i, 3, "%02x", d->handle[i]);
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "'%s' gpu --ipc-child %s --child-device %d --block %" PRIu64 " --total %" PRIu64
             " --rounds %d%s%s%s",
             exe, hex, dev, a->block, a->total >> 20, a->rounds,
             a->library ? " --cuda-library '" : "", a->library ? a->library : "",
             a->library ? "'" : "");
    fflush(stdout);
    int rc = system(cmd);
    if (rc != 0)
        printf("D2D: the second process failed (status %d)\n", rc);
}

/* cudaHostRegister of a POSIX shm mapping, and H2D from it. */
static void s_shm(tier_cuda_t *cu, tier_cuda_stream_t s, char *dev, const s_args_t *a, uint64_t n,
                  double base)
{
    char name[64];
    snprintf(name, sizeof name, "/kvt-bench-gpu-%d", (int)getpid());
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    size_t len = (size_t)(a->block * n);
    void *m = MAP_FAILED;
    if (fd >= 0 && ftruncate(fd, (off_t)len) == 0)
        m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (fd >= 0)
        shm_unlink(name);
    if (m == MAP_FAILED) {
        printf("cudaHostRegister of a shm mapping: not tried: shm of %zu bytes: %s\n", len,
               strerror(errno));
        if (fd >= 0)
            close(fd);
        return;
    }
    memset(m, 0x5a, len);
    int rc = cu->host_register(m, len, TIER_CUDA_HOST_REGISTER_PORTABLE);
    if (rc != 0) {
        char text[256];
        printf("cudaHostRegister of a shm mapping: UNAVAILABLE here: %s (demotion to a host "
               "tier would go through bounded staging)\n",
               tier_cuda_strerror(cu, rc, text, sizeof text));
    } else {
        printf("cudaHostRegister of a shm mapping: available\n");
        s_fig("H2D from a registered shm mapping",
              s_raw(cu, s, dev, m, a->block, n, TIER_CUDA_H2D, a->rounds, true, true), base);
        cu->host_unregister(m);
    }
    munmap(m, len);
    close(fd);
}

static int s_measure(const s_args_t *a, tier_cuda_t *cu, int dev)
{
    uint64_t n = a->total / a->block;
    char *host = NULL, *pinned = NULL, *devbuf = NULL;
    tier_cuda_stream_t s = NULL;
    if (posix_memalign((void **)&host, 4096, a->block) != 0 ||
        posix_memalign((void **)&pinned, 4096, a->block * n) != 0) {
        fprintf(stderr, "kvt-bench gpu: out of host memory\n");
        return 1;
    }
    memset(host, 0xa5, a->block);
    memset(pinned, 0x3c, a->block * n);
    char err[512];
    int rc = tier_cuda_check(cu, cu->set_device(dev), "cudaSetDevice", err, sizeof err);
    if (rc == 0)
        rc = tier_cuda_check(cu, cu->host_register(pinned, a->block * n, 0), "cudaHostRegister",
                             err, sizeof err);
    if (rc == 0)
        rc = tier_cuda_check(cu, cu->malloc_device((void **)&devbuf, a->block * n), "cudaMalloc",
                             err, sizeof err);
    if (rc == 0)
        rc = tier_cuda_check(cu, cu->stream_create(&s, TIER_CUDA_STREAM_NON_BLOCKING),
                             "cudaStreamCreateWithFlags", err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "kvt-bench gpu: %s\n", err);
        return 1;
    }
    double raw_h2d =
        s_raw(cu, s, devbuf, pinned, a->block, n, TIER_CUDA_H2D, a->rounds, true, true);
    s_fig("raw H2D cudaMemcpyAsync, pinned", raw_h2d, 0);
    double raw_d2h =
        s_raw(cu, s, pinned, devbuf, a->block, n, TIER_CUDA_D2H, a->rounds, true, true);
    s_fig("raw D2H cudaMemcpyAsync, pinned", raw_d2h, 0);

    tier_config_t cfg = {.capacity = n, .slot_size = a->block};
    snprintf(cfg.name, sizeof cfg.name, "bench-gpu0");
    snprintf(cfg.kind, sizeof cfg.kind, "gpu");
    char sbuf[32];
    snprintf(sbuf, sizeof sbuf, "%" PRIu64, a->staging);
    tier_config_set(&cfg, "staging_bytes", sbuf);
    snprintf(sbuf, sizeof sbuf, "%d", dev);
    tier_config_set(&cfg, "device", sbuf);
    if (a->library)
        tier_config_set(&cfg, "cuda_library", a->library);
    tier_t *t = tier_open(&cfg, err, sizeof err);
    if (!t) {
        fprintf(stderr, "kvt-bench gpu: %s\n", err);
        return 1;
    }
    tier_desc_t d;
    tier_describe(t, &d);
    printf("tier: %" PRIu64 " slots of %" PRIu64 " bytes, %s\n", n, a->block, d.detail);
    s_fig("H2D tier_write (frames -> pinned staging)",
          s_tier_pass(t, host, a->block, n, true, a->rounds), raw_h2d);
    s_fig("D2H tier_read (pinned staging -> frames)",
          s_tier_pass(t, host, a->block, n, false, a->rounds), raw_d2h);
    s_fig("H2D tier_write from registered memory",
          s_tier_pass(t, pinned, a->block, n, true, a->rounds), raw_h2d);
    s_fig("D2H tier_read into registered memory",
          s_tier_pass(t, pinned, a->block, n, false, a->rounds), raw_d2h);
    s_shm(cu, s, devbuf, a, n, raw_h2d);
    /* the child checks the last slot shows what was written there: the 0xa5 block
     * (the registered passes above left 0x3c) */
    struct iovec last = {host, a->block};
    if (d.access_kind == TIER_ACCESS_CUDA_IPC && tier_write(t, n - 1, &last, 1) != 0)
        printf("D2D: not measured: writing the checked slot failed\n");
    else if (d.access_kind == TIER_ACCESS_CUDA_IPC)
        s_run_child(a, &d, dev);
    else
        printf("CUDA IPC: UNAVAILABLE here: the tier has no IPC handle (%s)\n", d.detail);
    tier_close(&t);
    cu->stream_destroy(s);
    cu->free_device(devbuf);
    cu->host_unregister(pinned);
    free(pinned);
    free(host);
    return 0;
}

int bench_gpu(int argc, char **argv)
{
    s_args_t a;
    if (s_parse(argc, argv, &a) < 0)
        return 2;
    if (a.child_handle)
        return s_child(&a);
    char err[512];
    tier_cuda_t *cu = tier_cuda_open(a.library, "--cuda-library", err, sizeof err);
    int dev = 0;
    if (cu && tier_cuda_find_device(cu, a.device, &dev, err, sizeof err) < 0)
        tier_cuda_close(&cu);
    if (!cu) {
        printf("kvt-bench gpu: not measured: %s\n", err);
        return a.require ? 1 : 0;
    }
    char name[TIER_CUDA_NAME_MAX] = "", uuid_text[TIER_CUDA_UUID_STR_LEN] = "";
    uint8_t uuid[TIER_CUDA_UUID_LEN];
    if (tier_cuda_device_identity(cu, dev, uuid, name, sizeof name, err, sizeof err) == 0)
        tier_cuda_uuid_format(uuid, uuid_text, sizeof uuid_text);
    bool fake = dlsym(cu->dl, "kvt_fakecuda_counter") != NULL;
    printf("kvt-bench gpu: runtime %s, device %d %s (%s), block %" PRIu64 " bytes, %" PRIu64
           " MiB per pass, staging %" PRIu64 " bytes, best of %d\n",
           cu->path, dev, name, uuid_text, a.block, a.total >> 20, a.staging, a.rounds);
    if (fake)
        printf("NOTE: this is the suite's FAKE CUDA runtime (host memory behind device "
               "pointers): every figure below measures memcpy, not a GPU\n");
    fflush(stdout);
    int rc = s_measure(&a, cu, dev);
    tier_cuda_close(&cu);
    return rc;
}
