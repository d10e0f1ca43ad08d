/* png_map.h: per-segment memory maps, drawn with libpng into in-memory PNG images.
 *
 * A segment is drawn as one horizontal bar whose length is proportional to its size (relative
 * to a scale the caller chooses), with every pixel column coloured by what its bytes hold:
 * active (requested bytes), rounding waste (size - requested of active blocks), pending free
 * (freed while a stream event is outstanding), free inside a segment that still has active
 * blocks (the pieces fragmentation is made of), and free whole segments (what empty_cache()
 * returns). A column that covers several states is the byte-weighted mix of their colours, so
 * a small block never vanishes into its neighbour and nothing is drawn that is not there.
 * Aggregates of many segments are drawn as one bar of their summed state bytes.
 *
 * Ownership: every function appends to a caller-owned mr_buf and allocates nothing that
 * outlives the call. Output is deterministic: no time chunk, fixed compression settings. */
#ifndef MR_PNG_MAP_H
#define MR_PNG_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/error.h"
#include "model/model.h"

/* The states a map shows, in legend order. */
enum { PM_ACTIVE, PM_WASTE, PM_PENDING, PM_FREE_SPLIT, PM_FREE_WHOLE, PM_STATE_COUNT };

/* Colours as 0xRRGGBB; templates/report.css uses the same values for the legend. */
extern const uint32_t pm_colors[PM_STATE_COUNT];
const char *pm_state_label(int state); /* "active", "rounding waste", ... */
const char *pm_state_class(int state); /* CSS class suffix: "active", "waste", ... */

typedef struct {
	uint64_t bytes[PM_STATE_COUNT];
	uint64_t blocks, free_blocks;
} pm_totals;

/* Adds one segment's bytes per state to *t. A segment's blocks are
 * blocks[seg->first_block .. + seg->block_count): the snapshot's, or a moment's
 * (analyze/moments.h). */
void pm_segment_totals(const md_block *blocks, const md_segment *seg, pm_totals *t);

/* Draws one segment: the bar is width * total_size / scale_bytes pixels long (at least a few
 * pixels, at most width), on a light track of `width` pixels. scale_bytes 0 means the
 * segment's own size. */
mr_status pm_segment_png(const md_block *blocks, const md_segment *seg, uint64_t scale_bytes,
                         uint32_t width, uint32_t height, mr_buf *png, mr_error *err);

/* Draws an aggregate: the states of t side by side, bar_fraction (0..1] of the width long. */
mr_status pm_totals_png(const pm_totals *t, double bar_fraction, uint32_t width, uint32_t height,
                        mr_buf *png, mr_error *err);

/* Order of segments for drawing: largest first, then by address. Fills order[0..count) with
 * indexes into segments from first..first+count. Returns 0, or -1 when out of memory. */
int pm_sort_segments(const md_segment *segments, size_t first, size_t count, size_t *order);

#endif
