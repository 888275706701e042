/* A fake MA for docs/ma/host_example.c: the registers are an ma_t in memory; each access
 * is printed ("W <offset> <value>" / "R <offset> <value>", hexadecimal) and acts as the
 * MA's register block would for a polling host: START (bit 0) makes the command BUSY;
 * after `polls` reads of CTR_LO it completes, with CTR = `ctr`, or, when `error` is not
 * 0, fails at START with that ERROR code. Reading a non-zero CTR_LO latches CTR_HI and
 * clears the CTR; IRQ_STATUS is write-1-to-clear; START reads as 0.
 *
 * usage: ma_host_fake ID CAPS POLLS CTR ERROR MODE ACCUMULATE M K N A_ADDR B_ADDR C_ADDR
 *                     LDA LDB LDC [SIZE LOGICAL_BASE PHYS_BASE]...
 * and prints "RESULT <rc> <ctr>" last. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_example.h"

static ma_t fake;
static unsigned long polls_left;
static uint64_t ctr_at_end, ctr;
static uint32_t error_code;

/* The register at `offset` (ma_t is packed: no access assumes its alignment). */
static uint32_t get(const ma_t *ma, unsigned long offset)
{
    uint32_t value;
    if (offset % 4 || offset + 4 > sizeof *ma) {
        fprintf(stderr, "access at 0x%lx outside ma_t\n", offset);
        exit(3);
    }
    memcpy(&value, (const char *)ma + offset, sizeof value);
    return value;
}

static void put(ma_t *ma, unsigned long offset, uint32_t value)
{
    get(ma, offset);
    memcpy((char *)ma + offset, &value, sizeof value);
}

void ma_fake_write(ma_t *ma, unsigned long offset, uint32_t value)
{
    printf("W 0x%04lx 0x%08x\n", offset, (unsigned)value);
    if (offset == offsetof(ma_t, IRQ_STATUS)) {
        put(ma, offset, get(ma, offset) & ~value);
    } else if (offset == offsetof(ma_t, START)) {
        if (value & MA__START__START_bm) {
            fake.STATUS = error_code ? MA__STATUS__ERROR_bm : MA__STATUS__BUSY_bm;
            fake.ERROR = error_code;
        }
    } else {
        put(ma, offset, value);
    }
}

uint32_t ma_fake_read(ma_t *ma, unsigned long offset)
{
    uint32_t value = get(ma, offset);
    if (offset == offsetof(ma_t, START)) {
        value = 0;
    } else if (offset == offsetof(ma_t, CTR_LO)) {
        if ((fake.STATUS & MA__STATUS__BUSY_bm) && polls_left && !--polls_left) {
            fake.STATUS = MA__STATUS__DONE_bm;
            ctr = ctr_at_end;
        }
        value = (uint32_t)ctr;
        if (value) {
            fake.CTR_HI = (uint32_t)(ctr >> 32);
            ctr = 0;
        }
    }
    printf("R 0x%04lx 0x%08x\n", offset, (unsigned)value);
    return value;
}

int main(int argc, char **argv)
{
    enum { FIXED = 16 };
    if (argc < 1 + FIXED || (argc - 1 - FIXED) % 3) {
        fprintf(stderr, "usage: see tests/ma_host_fake.c\n");
        return 2;
    }
    uint64_t v[FIXED];
    for (int i = 0; i < FIXED; i++)
        v[i] = strtoull(argv[1 + i], NULL, 0);
    fake.ID = (uint32_t)v[0];
    fake.CAPS = (uint32_t)v[1];
    polls_left = (unsigned long)v[2];
    ctr_at_end = v[3];
    error_code = (uint32_t)v[4];
    struct ma_gemm gemm = {
        .mode = (uint32_t)v[5], .accumulate = (uint32_t)v[6],
        .m = (uint32_t)v[7], .k = (uint32_t)v[8], .n = (uint32_t)v[9],
        .a_addr = (uint32_t)v[10], .b_addr = (uint32_t)v[11], .c_addr = (uint32_t)v[12],
        .lda = (uint32_t)v[13], .ldb = (uint32_t)v[14], .ldc = (uint32_t)v[15],
    };
    struct ma_tat_entry entries[8];
    unsigned count = (unsigned)(argc - 1 - FIXED) / 3;
    if (count > 8)
        return 2;
    for (unsigned i = 0; i < count; i++) {
        char **arg = &argv[1 + FIXED + 3 * i];
        entries[i].size = (uint32_t)strtoul(arg[0], NULL, 0);
        entries[i].logical_base = (uint32_t)strtoul(arg[1], NULL, 0);
        entries[i].phys_base = strtoull(arg[2], NULL, 0);
    }
    struct ma_caps caps;
    uint64_t result = 0;
    int rc = ma_open(&fake, &caps);
    if (rc == 0)
        rc = ma_set_tat(&fake, &caps, entries, count);
    if (rc == 0)
        rc = ma_gemm(&fake, &caps, &gemm, &result, 1000);
    printf("RESULT %d 0x%llx\n", rc, (unsigned long long)result);
    return 0;
}
