/* Included before docs/ma/host_example.c (cc -include) by tests/test_ma_host_example.py:
 * every register access of the example becomes a call into the fake MA of
 * tests/ma_host_fake.c, named by its byte offset in the generated ma_t. */
#include <stdint.h>

#include "regmap.h"

uint32_t ma_fake_read(ma_t *ma, unsigned long offset);
void ma_fake_write(ma_t *ma, unsigned long offset, uint32_t value);

#define MA_OFFSET(ma, reg) \
    ((unsigned long)((const volatile char *)&(ma)->reg - (const volatile char *)(ma)))
#define MA_WRITE(ma, reg, value) ma_fake_write((ma), MA_OFFSET(ma, reg), (uint32_t)(value))
#define MA_READ(ma, reg) ma_fake_read((ma), MA_OFFSET(ma, reg))
