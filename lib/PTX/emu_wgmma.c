/* emu_wgmma.c - host semantics of the Hopper instructions wgmma.c generates, for the PTX
 * emulator (emu.c): mbarriers and wgmma.mma_async reading shared memory through matrix
 * descriptors. Written from the PTX ISA's definitions (descriptor fields, canonical layouts,
 * the 128-byte swizzle on address bits), not from the generator, so that the emulated run
 * checks the generator's layouts and descriptors on machines without a GPU.
 *
 * Shared addresses here are byte offsets into the kernel's emulated shared memory (`smem`);
 * copies complete synchronously, so cp.async.mbarrier.arrive arrives at once. */
#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include "ptx-impl.h"

/* An mbarrier: pending arrivals (bits 0-31), the expected count (32-62), phase (63). */
void ic__emu_mbar_init(void *bar, int32_t count)
{
    atomic_store((_Atomic uint64_t *)bar, (uint64_t)(uint32_t)count | (uint64_t)(uint32_t)count << 32);
}

void ic__emu_mbar_arrive(void *bar)
{
    _Atomic uint64_t *b = bar;
    uint64_t old = atomic_load(b), nw;
    do {
        uint64_t pending = old & 0xffffffffu, expected = (old >> 32) & 0x7fffffffu, phase = old >> 63;
        nw = pending > 1 ? (old & ~(uint64_t)0xffffffffu) | (pending - 1) /* same phase */
                         : expected | expected << 32 | (phase ^ 1) << 63; /* phase completes */
    } while (!atomic_compare_exchange_weak(b, &old, nw));
}

/* mbarrier.try_wait.parity: 1 when the phase of parity `parity` has completed, i.e. the
 * current phase has the other parity. Yields when not, as the waiting lanes spin. */
int32_t ic__emu_mbar_test(void *bar, int32_t parity)
{
    uint64_t v = atomic_load((_Atomic uint64_t *)bar);
    if ((int32_t)(v >> 63) != (parity & 1))
        return 1;
    sched_yield();
    return 0;
}

/* All 128 threads of a warpgroup meet here (bar: an mbarrier of count 128). The generated
 * code's warpgroup-collective instructions (wgmma.fence/mma_async .sync.aligned) keep a
 * warpgroup together on the GPU; emulated lanes are separate host threads, and one that fell a
 * round behind would read a stage the producer has refilled. */
void ic__emu_wgsync(void *bar)
{
    _Atomic uint64_t *b = bar;
    uint64_t phase = atomic_load(b) >> 63; /* cannot flip before this thread arrives */
    ic__emu_mbar_arrive(bar);
    while (atomic_load(b) >> 63 == phase)
        sched_yield();
}

/* The 16-bit element at logical byte address `addr` of 128B-swizzled shared memory: the
 * hardware XORs address bits 4-6 with bits 7-9. */
static float elem(const uint8_t *smem, uint32_t addr, int32_t bf16)
{
    addr ^= ((addr >> 7) & 7) << 4;
    uint16_t h;
    memcpy(&h, smem + addr, 2);
    return bf16 ? ic_bf16_to_f32(h) : ic_f16_to_f32(h);
}

typedef struct {
    uint32_t start, lbo, sbo;
} desc_t;

static desc_t decode(uint64_t d)
{
    desc_t r = { (uint32_t)(d & 0x3fff) << 4, (uint32_t)((d >> 16) & 0x3fff) << 4, (uint32_t)((d >> 32) & 0x3fff) << 4 };
    return r;
}

/* Logical address of element (o, k) of a 16-bit operand (o = m or n) in the canonical
 * 128B-swizzle layouts: K-major ((8,o),(T,2k)):((8T,SBO),(1,T)), MN-major
 * ((T,8,o),(8,k)):((1,T,LBO),(8T,SBO)), T = 8 elements. */
static uint32_t where(desc_t d, int trans, int o, int k)
{
    if (!trans)
        return d.start + (uint32_t)(o / 8) * d.sbo + (uint32_t)(o % 8) * 128 + (uint32_t)k * 2;
    return d.start + (uint32_t)(o / 64) * d.lbo + (uint32_t)(k / 8) * d.sbo + (uint32_t)(k % 8) * 128 +
           (uint32_t)(o % 64) * 2;
}

/* wgmma.mma_async.m64nNk16.f32.{bf16,f16} for thread `wtid` (0..127) of its warpgroup: its
 * accumulators d[4j + 2h + e] are D(16 w + l/4 + 8h, 8j + 2(l%4) + e), warp w, lane l. */
void ic__emu_wgmma(const uint8_t *smem, uint64_t da, uint64_t db, int32_t n, int32_t trans_a,
                   int32_t trans_b, int32_t bf16, int32_t wtid, float *acc)
{
    desc_t A = decode(da), B = decode(db);
    int w = wtid / 32, l = wtid % 32;
    for (int j = 0; j < n / 8; j++)
        for (int h = 0; h < 2; h++)
            for (int e = 0; e < 2; e++) {
                int r = 16 * w + l / 4 + 8 * h, c = 8 * j + 2 * (l % 4) + e;
                float s = acc[4 * j + 2 * h + e];
                for (int k = 0; k < 16; k++)
                    s = fmaf(elem(smem, where(A, trans_a, r, k), bf16), elem(smem, where(B, trans_b, c, k), bf16), s);
                acc[4 * j + 2 * h + e] = s;
            }
}
