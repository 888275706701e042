/* A host driver of the MA in C11 against the generated regmap.h: see host_example.h. */
#include "host_example.h"

#ifndef MA_WRITE
#define MA_WRITE(ma, reg, value) ((ma)->reg = (uint32_t)(value))
#endif
#ifndef MA_READ
#define MA_READ(ma, reg) ((uint32_t)(ma)->reg)
#endif

/* A field's value placed in its register word, and read back out of one. */
#define MA_FIELD(reg, field, value) \
    (((uint32_t)(value) << MA__##reg##__##field##_bp) & MA__##reg##__##field##_bm)
#define MA_GET(reg, field, word) \
    (((uint32_t)(word) & MA__##reg##__##field##_bm) >> MA__##reg##__##field##_bp)

#define MA_TAT_SLOTS (sizeof ((ma_t *)0)->TAT / sizeof ((ma_t *)0)->TAT[0])

int ma_open(ma_t *ma, struct ma_caps *caps)
{
    uint32_t id = MA_READ(ma, ID);
    if (MA_GET(ID, BLOCK, id) != MA__ID__BLOCK__MA)
        return MA_NOT_AN_MA;
    uint32_t word = MA_READ(ma, CAPS);
    caps->p = MA_GET(CAPS, P, word);
    caps->bus_bytes = MA_GET(CAPS, BUS_BYTES, word);
    caps->max_dim = MA_GET(CAPS, MAX_DIM, word);
    caps->tat_entries = MA_GET(CAPS, TAT_ENTRIES, word);
    /* Clear both latched events (write 1 to clear); this driver polls, so no interrupt. */
    MA_WRITE(ma, IRQ_STATUS, MA_FIELD(IRQ_STATUS, DONE, 1) | MA_FIELD(IRQ_STATUS, ERROR, 1));
    MA_WRITE(ma, IRQ_ENABLE, 0);
    return 0;
}

int ma_set_tat(ma_t *ma, const struct ma_caps *caps, const struct ma_tat_entry *entries,
               unsigned count)
{
    if (count > caps->tat_entries || count > MA_TAT_SLOTS)
        return MA_BAD_ARGUMENT;
    /* Every slot is written: the ones after `count` invalid, so no stale entry maps. */
    for (unsigned i = 0; i < MA_TAT_SLOTS; i++) {
        const struct ma_tat_entry none = {0, 0, 0};
        const struct ma_tat_entry *e = i < count ? &entries[i] : &none;
        MA_WRITE(ma, TAT[i].LOGIC, MA_FIELD(TATX__LOGIC, VALID, i < count)
                                   | MA_FIELD(TATX__LOGIC, SIZE, e->size)
                                   | MA_FIELD(TATX__LOGIC, BASE, e->logical_base >> 12));
        MA_WRITE(ma, TAT[i].PHYS_LO, MA_FIELD(TATX__PHYS_LO, BASE, e->phys_base >> 12));
        MA_WRITE(ma, TAT[i].PHYS_HI, MA_FIELD(TATX__PHYS_HI, BASE, e->phys_base >> 32));
    }
    return 0;
}

int ma_gemm(ma_t *ma, const struct ma_caps *caps, const struct ma_gemm *g, uint64_t *ctr,
            unsigned long max_polls)
{
    if (g->m > caps->max_dim || g->k > caps->max_dim || g->n > caps->max_dim)
        return MA_BAD_ARGUMENT;
    MA_WRITE(ma, M, MA_FIELD(M, VALUE, g->m));
    MA_WRITE(ma, K, MA_FIELD(K, VALUE, g->k));
    MA_WRITE(ma, N, MA_FIELD(N, VALUE, g->n));
    MA_WRITE(ma, MODE, MA_FIELD(MODE, MODE, g->mode) | MA_FIELD(MODE, ACCUMULATE, g->accumulate));
    MA_WRITE(ma, A_ADDR, MA_FIELD(A_ADDR, ADDR, g->a_addr));
    MA_WRITE(ma, B_ADDR, MA_FIELD(B_ADDR, ADDR, g->b_addr));
    MA_WRITE(ma, C_ADDR, MA_FIELD(C_ADDR, ADDR, g->c_addr));
    MA_WRITE(ma, LDA, MA_FIELD(LDA, STRIDE, g->lda));
    MA_WRITE(ma, LDB, MA_FIELD(LDB, STRIDE, g->ldb));
    MA_WRITE(ma, LDC, MA_FIELD(LDC, STRIDE, g->ldc));
    MA_WRITE(ma, START, MA_FIELD(START, START, 1));
    /* Poll the CTR: it reads 0 until the command completes; reading it non-zero clears it
     * and latches its high word into CTR_HI. A refused or failed command never sets it,
     * so STATUS.ERROR is polled beside it. */
    for (unsigned long poll = 0; poll < max_polls; poll++) {
        uint32_t lo = MA_READ(ma, CTR_LO);
        uint32_t status = MA_READ(ma, STATUS);
        if (lo) {
            *ctr = (uint64_t)MA_READ(ma, CTR_HI) << 32 | lo;
            return 0;
        }
        if (MA_GET(STATUS, ERROR, status))
            return (int)MA_GET(ERROR, CODE, MA_READ(ma, ERROR));
        if (MA_GET(STATUS, DONE, status)) {         /* completed between the two reads */
            lo = MA_READ(ma, CTR_LO);
            *ctr = (uint64_t)MA_READ(ma, CTR_HI) << 32 | lo;
            return 0;
        }
    }
    return MA_TIMEOUT;
}
