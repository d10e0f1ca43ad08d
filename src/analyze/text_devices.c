/* text_devices.c: per-device numbers of text evidence. */
#include "analyze/text_devices.h"

#include <string.h>

#include "decode/stats_json.h"
#include "decode/summary.h"

static uint64_t cell(const ev_summary *sm, int metric, int col, uint64_t *unit)
{
	const ev_cell *c = &sm->cells[metric][EV_POOL_ALL][col];
	if (c->known && c->unit > *unit)
		*unit = c->unit;
	return c->known ? c->value : 0;
}

size_t an_text_devices(const ld_evidence *ev, an_numbers *out, size_t max)
{
	size_t n = 0;
	if (ev->has_stats && max > 0) {
		an_numbers *d = &out[n++];
		memset(d, 0, sizeof *d);
		const ev_stats *st = &ev->stats;
		d->source = LD_MEMORY_STATS;
		d->precision = 1;
		ev_stats_get(st, "reserved_bytes.all.current", &d->reserved);
		ev_stats_get(st, "allocated_bytes.all.current", &d->allocated);
		ev_stats_get(st, "active_bytes.all.current", &d->active);
		d->has_requested = ev_stats_get(st, "requested_bytes.all.current", &d->requested);
		ev_stats_get(st, "inactive_split_bytes.all.current", &d->inactive_split);
		ev_stats_get(st, "inactive_split.all.current", &d->inactive_split_blocks);
		ev_stats_get(st, "segment.all.current", &d->segments);
		d->has_peaks = ev_stats_get(st, "allocated_bytes.all.peak", &d->peak_allocated) &
		               ev_stats_get(st, "reserved_bytes.all.peak", &d->peak_reserved);
		return n;
	}
	/* The last table of each device, devices in order of first appearance. */
	for (size_t i = 0; i < ev->text.summary_count && n < max; i++) {
		const ev_summary *sm = &ev->text.summaries[i];
		int seen = 0;
		for (size_t k = 0; k < n; k++)
			seen |= out[k].device == sm->device;
		if (seen)
			continue;
		for (size_t j = i + 1; j < ev->text.summary_count; j++)
			if (ev->text.summaries[j].device == sm->device)
				sm = &ev->text.summaries[j];
		an_numbers *d = &out[n++];
		memset(d, 0, sizeof *d);
		uint64_t unit = 1;
		d->device = sm->device < 0 ? 0 : sm->device;
		d->source = LD_MEMORY_SUMMARY;
		d->reserved = cell(sm, EV_RESERVED, EV_CUR, &unit);
		d->allocated = cell(sm, EV_ALLOCATED, EV_CUR, &unit);
		d->active = cell(sm, EV_ACTIVE, EV_CUR, &unit);
		d->has_requested = sm->cells[EV_REQUESTED][EV_POOL_ALL][EV_CUR].known;
		d->requested = cell(sm, EV_REQUESTED, EV_CUR, &unit);
		d->inactive_split = cell(sm, EV_INACTIVE_SPLIT, EV_CUR, &unit);
		d->inactive_split_blocks = cell(sm, EV_INACTIVE_SPLIT_ALLOCS, EV_CUR, &unit);
		d->segments = cell(sm, EV_SEGMENTS, EV_CUR, &unit);
		d->peak_allocated = cell(sm, EV_ALLOCATED, EV_PEAK, &unit);
		d->peak_reserved = cell(sm, EV_RESERVED, EV_PEAK, &unit);
		d->has_peaks = sm->cells[EV_RESERVED][EV_POOL_ALL][EV_PEAK].known;
		d->precision = unit;
	}
	return n;
}
