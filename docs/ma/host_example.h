/* A host driver of the MA in C11, written against the generated register map regmap.h
 * (docs/ma/regmap.md): the design notes' sequence of docs/ma/README.md, "Host sequence".
 *
 *     ma_t *ma = (ma_t *)MA_BASE;         // the MA's s_axi_control window
 *     struct ma_caps caps;
 *     if (ma_open(ma, &caps) != 0) ...    // ID is the MA's; CAPS read; interrupts off
 *     ma_set_tat(ma, &caps, entries, 1);  // program the TAT (the other entries invalid)
 *     rc = ma_gemm(ma, &caps, &gemm, &ctr, max_polls);
 *                                         // M, K, N, MODE, addresses, strides, START, poll
 *
 * Every register access goes through MA_WRITE / MA_READ, plain volatile accesses of the
 * ma_t struct unless the includer defines them first (tests/test_ma_host_example.py runs
 * this file against a fake MA that way).
 */
#ifndef MA_HOST_EXAMPLE_H
#define MA_HOST_EXAMPLE_H

#include <stdint.h>

#include "regmap.h"

/* The MA's build parameters, from the fields of CAPS. */
struct ma_caps {
    uint32_t p;             /* the array is p x p */
    uint32_t bus_bytes;     /* m_axi_gmem width in bytes */
    uint32_t max_dim;       /* the largest M, K and N */
    uint32_t tat_entries;   /* entries of the TAT */
};

/* One TAT entry: logical [logical_base, logical_base + (4 KiB << size)) maps to
 * physical [phys_base, ...); both bases aligned to the region. */
struct ma_tat_entry {
    uint32_t size;          /* 0..19 */
    uint32_t logical_base;  /* byte address, a multiple of 4 KiB << size */
    uint64_t phys_base;     /* byte address below 2^48, aligned the same way */
};

/* One GEMM: C (M x N) = A (M x K) . B (K x N), or C += A . B (accumulate). */
struct ma_gemm {
    uint32_t mode;          /* MA__MODE__MODE__INT8, __BF16, __INT8_BT or __BF16_BT */
    uint32_t accumulate;    /* 1: C += A . B */
    uint32_t m, k, n;       /* 1..max_dim */
    uint32_t a_addr, b_addr, c_addr;    /* logical byte addresses (through the TAT) */
    uint32_t lda, ldb, ldc;             /* row strides in bytes */
};

/* What ma_open and ma_gemm return besides 0 (ma_gemm's positive values are
 * spec.codes.ErrorCode, the ERROR register: MA__ERROR__CODE__BAD_COMMAND, ...). */
enum {
    MA_NOT_AN_MA = -1,      /* ID.BLOCK is not MA__ID__BLOCK__MA */
    MA_TIMEOUT = -2,        /* the command did not end within max_polls polls */
    MA_BAD_ARGUMENT = -3,   /* a dimension beyond CAPS.MAX_DIM, too many TAT entries */
};

int ma_open(ma_t *ma, struct ma_caps *caps);
int ma_set_tat(ma_t *ma, const struct ma_caps *caps, const struct ma_tat_entry *entries,
               unsigned count);
int ma_gemm(ma_t *ma, const struct ma_caps *caps, const struct ma_gemm *gemm, uint64_t *ctr,
            unsigned long max_polls);

#endif /* MA_HOST_EXAMPLE_H */
