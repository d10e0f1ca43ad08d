/* text_devices.h: per-device numbers from text evidence, for a run without a snapshot: exact
 * from a memory_stats() dump, lower bounds from the last memory_summary() table of each
 * device (its cells are truncated to their unit).
 *
 * Ownership: fills a caller-owned array; nothing is allocated. */
#ifndef MR_TEXT_DEVICES_H
#define MR_TEXT_DEVICES_H

#include <stddef.h>
#include <stdint.h>

#include "load/load.h"

/* The values a table or dump gives: a table pasted in part, a dump without some keys, a
 * column dropped leave the others unknown (0 in the struct, null in JSON, never 0 there). */
enum {
	AN_KNOWN_RESERVED = 1 << 0,
	AN_KNOWN_ALLOCATED = 1 << 1,
	AN_KNOWN_ACTIVE = 1 << 2,
	AN_KNOWN_REQUESTED = 1 << 3,
	AN_KNOWN_INACTIVE_SPLIT = 1 << 4,
	AN_KNOWN_INACTIVE_SPLIT_BLOCKS = 1 << 5,
	AN_KNOWN_SEGMENTS = 1 << 6,
	AN_KNOWN_PEAK_ALLOCATED = 1 << 7,
	AN_KNOWN_PEAK_RESERVED = 1 << 8,
};

typedef struct {
	int32_t device;
	ld_kind source; /* LD_MEMORY_STATS or LD_MEMORY_SUMMARY */
	uint64_t reserved, allocated, active, requested, inactive_split, inactive_split_blocks,
	    segments, peak_allocated, peak_reserved;
	unsigned known;               /* AN_KNOWN_* bits */
	int has_requested, has_peaks; /* AN_KNOWN_REQUESTED; both peaks */
	uint64_t precision; /* 1: exact; else each byte value v means [v, v + precision) */
} an_numbers;

/* Fills out[0..max) and returns how many devices the text evidence describes: the dump's one
 * device when there is a dump, else each table's device in order of first appearance. */
size_t an_text_devices(const ld_evidence *ev, an_numbers *out, size_t max);

#endif
