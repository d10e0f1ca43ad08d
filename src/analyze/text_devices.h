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

typedef struct {
	int32_t device;
	ld_kind source; /* LD_MEMORY_STATS or LD_MEMORY_SUMMARY */
	uint64_t reserved, allocated, active, requested, inactive_split, inactive_split_blocks,
	    segments, peak_allocated, peak_reserved;
	int has_requested, has_peaks;
	uint64_t precision; /* 1: exact; else each byte value v means [v, v + precision) */
} an_numbers;

/* Fills out[0..max) and returns how many devices the text evidence describes: the dump's one
 * device when there is a dump, else each table's device in order of first appearance. */
size_t an_text_devices(const ld_evidence *ev, an_numbers *out, size_t max);

#endif
