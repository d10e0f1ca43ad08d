/* units.h: byte sizes for people: binary units written and read.
 *
 * Ownership: plain values; the caller owns every buffer. */
#ifndef MR_UNITS_H
#define MR_UNITS_H

#include <stddef.h>
#include <stdint.h>

#define MR_KIB ((uint64_t)1024)
#define MR_MIB ((uint64_t)1024 * 1024)
#define MR_GIB ((uint64_t)1024 * 1024 * 1024)

/* Human-readable size with binary units: "1.52 GiB", "204.00 MiB", "512 B". */
void mr_format_bytes(char *out, size_t outsz, uint64_t bytes);

/* Parses "4GiB", "4G", "512MiB", "123" (bytes). Returns 0 on success. */
int mr_parse_size(const char *s, uint64_t *out);

#endif
