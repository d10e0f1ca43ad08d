/* text_devices.c: per-device numbers of text evidence. */
#include "analyze/text_devices.h"

#include <string.h>

#include "decode/stats_json.h"
#include "decode/summary.h"

/* A table cell of pool "all" into *out, its unit into *unit (the largest seen) and `bit` into
 * *known when the table gives it. */
static void cell(const ev_summary *sm, int metric, int col, uint64_t *unit, uint64_t *out,
                 unsigned *known, unsigned bit)
{
	const ev_cell *c = &sm->cells[metric][EV_POOL_ALL][col];
	*out = c->known ? c->value : 0;
	if (!c->known)
		return;
	if (c->unit > *unit)
		*unit = c->unit;
	*known |= bit;
}

static void stat(const ev_stats *st, const char *key, uint64_t *out, unsigned *known, unsigned bit)
{
	if (ev_stats_get(st, key, out))
		*known |= bit;
	else
		*out = 0;
}

static void from_stats(const ev_stats *st, an_numbers *d)
{
	d->source = LD_MEMORY_STATS;
	d->precision = 1;
	stat(st, "reserved_bytes.all.current", &d->reserved, &d->known, AN_KNOWN_RESERVED);
	stat(st, "allocated_bytes.all.current", &d->allocated, &d->known, AN_KNOWN_ALLOCATED);
	stat(st, "active_bytes.all.current", &d->active, &d->known, AN_KNOWN_ACTIVE);
	stat(st, "requested_bytes.all.current", &d->requested, &d->known, AN_KNOWN_REQUESTED);
	stat(st, "inactive_split_bytes.all.current", &d->inactive_split, &d->known,
	     AN_KNOWN_INACTIVE_SPLIT);
	stat(st, "inactive_split.all.current", &d->inactive_split_blocks, &d->known,
	     AN_KNOWN_INACTIVE_SPLIT_BLOCKS);
	stat(st, "segment.all.current", &d->segments, &d->known, AN_KNOWN_SEGMENTS);
	stat(st, "allocated_bytes.all.peak", &d->peak_allocated, &d->known,
	     AN_KNOWN_PEAK_ALLOCATED);
	stat(st, "reserved_bytes.all.peak", &d->peak_reserved, &d->known, AN_KNOWN_PEAK_RESERVED);
}

static void from_summary(const ev_summary *sm, an_numbers *d)
{
	uint64_t unit = 1;
	unsigned *k = &d->known;
	d->device = sm->device < 0 ? 0 : sm->device;
	d->source = LD_MEMORY_SUMMARY;
	cell(sm, EV_RESERVED, EV_CUR, &unit, &d->reserved, k, AN_KNOWN_RESERVED);
	cell(sm, EV_ALLOCATED, EV_CUR, &unit, &d->allocated, k, AN_KNOWN_ALLOCATED);
	cell(sm, EV_ACTIVE, EV_CUR, &unit, &d->active, k, AN_KNOWN_ACTIVE);
	cell(sm, EV_REQUESTED, EV_CUR, &unit, &d->requested, k, AN_KNOWN_REQUESTED);
	cell(sm, EV_INACTIVE_SPLIT, EV_CUR, &unit, &d->inactive_split, k, AN_KNOWN_INACTIVE_SPLIT);
	cell(sm, EV_INACTIVE_SPLIT_ALLOCS, EV_CUR, &unit, &d->inactive_split_blocks, k,
	     AN_KNOWN_INACTIVE_SPLIT_BLOCKS);
	cell(sm, EV_SEGMENTS, EV_CUR, &unit, &d->segments, k, AN_KNOWN_SEGMENTS);
	cell(sm, EV_ALLOCATED, EV_PEAK, &unit, &d->peak_allocated, k, AN_KNOWN_PEAK_ALLOCATED);
	cell(sm, EV_RESERVED, EV_PEAK, &unit, &d->peak_reserved, k, AN_KNOWN_PEAK_RESERVED);
	d->precision = unit;
}

size_t an_text_devices(const ld_evidence *ev, an_numbers *out, size_t max)
{
	size_t n = 0;
	if (ev->has_stats && max > 0) {
		an_numbers *d = &out[n++];
		memset(d, 0, sizeof *d);
		from_stats(&ev->stats, d);
	}
	/* The last table of each device, devices in order of first appearance. */
	for (size_t i = 0; i < ev->text.summary_count && n < max && !ev->has_stats; i++) {
		const ev_summary *sm = &ev->text.summaries[i];
		int seen = 0;
		for (size_t k = 0; k < n; k++)
			seen |= out[k].device == (sm->device < 0 ? 0 : sm->device);
		if (seen)
			continue;
		for (size_t j = i + 1; j < ev->text.summary_count; j++)
			if (ev->text.summaries[j].device == sm->device)
				sm = &ev->text.summaries[j];
		an_numbers *d = &out[n++];
		memset(d, 0, sizeof *d);
		from_summary(sm, d);
	}
	for (size_t i = 0; i < n; i++) {
		out[i].has_requested = (out[i].known & AN_KNOWN_REQUESTED) != 0;
		out[i].has_peaks = (out[i].known & AN_KNOWN_PEAK_ALLOCATED) &&
		                   (out[i].known & AN_KNOWN_PEAK_RESERVED);
	}
	return n;
}
