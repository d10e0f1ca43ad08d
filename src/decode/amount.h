/* amount.h: byte amounts as PyTorch prints them, in tables and in OOM messages.
 *
 * Ownership: plain values; nothing is allocated. */
#ifndef MR_AMOUNT_H
#define MR_AMOUNT_H

#include <stddef.h>
#include <stdint.h>

/* Converts "204.00 MiB", "0 bytes", "1.5GiB", "146836 KB" (binary multiples whatever the
 * spelling) at s[0..len) to bytes, rounding to the nearest byte. Returns the number of
 * characters consumed (spaces between number and unit allowed), 0 when it is not an amount.
 * *overflow (may be NULL) is set when the amount does not fit in 64 bits (then *out is
 * UINT64_MAX). */
size_t ev_parse_amount(const char *s, size_t len, uint64_t *out, int *overflow);

/* The unit spelled at s[pos..n) ("KiB", "MB", "bytes"...): its length, with its multiple and
 * whether it is a legacy (KB/MB/GB) spelling; 0 when there is none. */
size_t ev_unit_at(const char *s, size_t n, size_t pos, uint64_t *mult, int *legacy);

#endif
