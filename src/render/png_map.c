/* png_map.c: per-segment maps as PNG images. */
#include "render/png_map.h"

#include <png.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/mem.h"

const uint32_t pm_colors[PM_STATE_COUNT] = {
    0x3b7ddd, /* active: blue */
    0xf2a93b, /* rounding waste: amber */
    0x8e5bc4, /* pending free: purple */
    0xe2625a, /* free inside a split segment: red, the fragmentation */
    0x9fd39a, /* free whole segment: green, releasable */
};

static const uint32_t pm_track_color = 0xeceff3;

const char *pm_state_label(int state)
{
	static const char *const labels[PM_STATE_COUNT] = {
	    "active (requested bytes)", "rounding waste (size \xe2\x88\x92 requested)",
	    "pending free (waiting for a stream)", "free inside a split segment",
	    "free whole segment (releasable)"};
	return state >= 0 && state < PM_STATE_COUNT ? labels[state] : "";
}

const char *pm_state_class(int state)
{
	static const char *const names[PM_STATE_COUNT] = {"active", "waste", "pending", "split",
	                                                  "whole"};
	return state >= 0 && state < PM_STATE_COUNT ? names[state] : "";
}

/* ---- state runs of one segment ---- */

typedef struct {
	uint64_t offset, length;
	int state;
} pm_run;

static int segment_has_active(const md_block *blocks, const md_segment *seg)
{
	for (size_t i = 0; i < seg->block_count; i++)
		if (blocks[seg->first_block + i].state != MD_BLOCK_INACTIVE)
			return 1;
	return 0;
}

/* Cuts a block into the runs it is drawn as. Returns how many (at most 2). */
static size_t block_runs(const md_block *b, int split_free, uint64_t offset, pm_run *out)
{
	switch (b->state) {
	case MD_BLOCK_ACTIVE_ALLOCATED: {
		uint64_t used = b->requested_known && b->requested_size <= b->size
		                    ? b->requested_size
		                    : b->size;
		size_t n = 0;
		if (used)
			out[n++] = (pm_run){offset, used, PM_ACTIVE};
		if (b->size > used)
			out[n++] = (pm_run){offset + used, b->size - used, PM_WASTE};
		return n;
	}
	case MD_BLOCK_ACTIVE_PENDING_FREE: out[0] = (pm_run){offset, b->size, PM_PENDING}; return 1;
	default:
		out[0] = (pm_run){offset, b->size, split_free ? PM_FREE_SPLIT : PM_FREE_WHOLE};
		return 1;
	}
}

void pm_segment_totals(const md_block *blocks, const md_segment *seg, pm_totals *t)
{
	int split = segment_has_active(blocks, seg);
	for (size_t i = 0; i < seg->block_count; i++) {
		const md_block *b = &blocks[seg->first_block + i];
		pm_run runs[2];
		size_t n = block_runs(b, split, 0, runs);
		for (size_t k = 0; k < n; k++)
			t->bytes[runs[k].state] += runs[k].length;
		t->blocks++;
		if (b->state == MD_BLOCK_INACTIVE)
			t->free_blocks++;
	}
}

/* ---- pixels ---- */

typedef struct {
	unsigned char *rgb; /* width * 3 bytes: one row, repeated for every row of the image */
	uint32_t width;
} pm_row;

static void put_color(pm_row *r, uint32_t x, uint32_t c)
{
	r->rgb[x * 3] = (unsigned char)(c >> 16);
	r->rgb[x * 3 + 1] = (unsigned char)(c >> 8);
	r->rgb[x * 3 + 2] = (unsigned char)c;
}

/* The byte-weighted mix of the state colours of one column. */
static uint32_t mix(const uint64_t bytes[PM_STATE_COUNT])
{
	double total = 0, ch[3] = {0, 0, 0};
	int states = 0, only = 0;
	for (int i = 0; i < PM_STATE_COUNT; i++) {
		total += (double)bytes[i];
		if (bytes[i]) {
			states++;
			only = i;
		}
	}
	if (total <= 0)
		return pm_track_color;
	if (states == 1) /* most columns: one state's colour, which the weighting gives exactly */
		return pm_colors[only];
	for (int i = 0; i < PM_STATE_COUNT; i++) {
		double w = (double)bytes[i] / total;
		ch[0] += w * (double)((pm_colors[i] >> 16) & 255);
		ch[1] += w * (double)((pm_colors[i] >> 8) & 255);
		ch[2] += w * (double)(pm_colors[i] & 255);
	}
	uint32_t c = 0;
	for (int k = 0; k < 3; k++) {
		double v = ch[k] + 0.5;
		c = c << 8 | (uint32_t)(v > 255 ? 255 : v);
	}
	return c;
}

static uint32_t darken(uint32_t c)
{
	uint32_t out = 0;
	for (int k = 2; k >= 0; k--)
		out = out << 8 | (((c >> (8 * k)) & 255) * 5 / 8);
	return out;
}

/* ---- PNG encoding into an mr_buf ---- */

static void png_to_buf(png_structp png, png_bytep data, size_t len)
{
	mr_buf_append(png_get_io_ptr(png), data, len);
}

static void png_flush_none(png_structp png)
{
	(void)png;
}

static mr_status encode(const pm_row *row, uint32_t height, mr_buf *out, mr_error *err)
{
	png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
	png_infop info = png ? png_create_info_struct(png) : NULL;
	if (!png || !info) {
		png_destroy_write_struct(&png, &info);
		return mr_oom(err);
	}
	if (setjmp(png_jmpbuf(png))) {
		png_destroy_write_struct(&png, &info);
		return mr_fail(err, MR_EFAIL, "PNG encoding failed");
	}
	png_set_write_fn(png, out, png_to_buf, png_flush_none);
	png_set_compression_level(png, 9);
	/* A map is a row of a few KiB: zlib's default 64 KiB hash table, zeroed for every image,
	 * cost more than the compression (2% of a 300-segment report). A 512-entry table gives
	 * the same pixels, and on every corpus sample the same bytes. */
	png_set_compression_mem_level(png, 2);
	png_set_IHDR(png, info, row->width, height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
	             PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
	png_write_info(png, info);
	for (uint32_t y = 0; y < height; y++)
		png_write_row(png, row->rgb);
	png_write_end(png, NULL);
	png_destroy_write_struct(&png, &info);
	return out->failed ? mr_oom(err) : MR_OK;
}

static uint32_t bar_length(uint64_t size, uint64_t scale, uint32_t width)
{
	const uint32_t min_len = 4;
	if (!scale || size >= scale)
		return width;
	uint32_t len = (uint32_t)((unsigned __int128)size * width / scale);
	return len < min_len ? (min_len < width ? min_len : width) : len;
}

mr_status pm_segment_png(const md_block *blocks, const md_segment *seg, uint64_t scale_bytes,
                         uint32_t width, uint32_t height, mr_buf *png, mr_error *err)
{
	if (!width || !height || width > 8192 || height > 256)
		return mr_fail(err, MR_EFAIL, "map size out of range");
	pm_row row = {mr_alloc_array(width, 3), width};
	size_t nruns = (size_t)seg->block_count * 2;
	pm_run *runs = mr_alloc_array(nruns ? nruns : 1, sizeof *runs);
	uint64_t *starts = mr_alloc_array(seg->block_count ? seg->block_count : 1, sizeof *starts);
	mr_status st = MR_OK;
	if (!row.rgb || !runs || !starts) {
		st = mr_oom(err);
		goto done;
	}
	/* Blocks tile their segment in address order; offsets are accumulated so a segment whose
	 * blocks do not tile it exactly is still drawn without overlap. */
	int split = segment_has_active(blocks, seg);
	uint64_t size = seg->total_size, offset = 0;
	size_t n = 0;
	for (size_t i = 0; i < seg->block_count && offset < size; i++) {
		const md_block *b = &blocks[seg->first_block + i];
		starts[i] = offset;
		size_t got = block_runs(b, split, offset, runs + n);
		for (size_t k = 0; k < got; k++)
			if (runs[n + k].offset + runs[n + k].length > size)
				runs[n + k].length = size - MR_MIN(size, runs[n + k].offset);
		n += got;
		offset += b->size;
	}
	uint32_t len = bar_length(size, scale_bytes, width);
	size_t r = 0;
	for (uint32_t x = 0; x < width; x++) {
		if (x >= len || !size) {
			put_color(&row, x, pm_track_color);
			continue;
		}
		uint64_t lo = (uint64_t)((unsigned __int128)size * x / len);
		uint64_t hi = (uint64_t)((unsigned __int128)size * (x + 1) / len);
		uint64_t bytes[PM_STATE_COUNT] = {0};
		while (r < n && runs[r].offset + runs[r].length <= lo)
			r++;
		for (size_t k = r; k < n && runs[k].offset < hi; k++) {
			uint64_t a = MR_MAX(lo, runs[k].offset);
			uint64_t e = MR_MIN(hi, runs[k].offset + runs[k].length);
			if (e > a)
				bytes[runs[k].state] += e - a;
		}
		put_color(&row, x, mix(bytes));
	}
	/* A thin dark line where one block ends and the next begins, when both are wide enough
	 * to see: the number of pieces is what fragmentation is about. */
	for (size_t i = 1; i < seg->block_count && size; i++) {
		if (i >= seg->block_count || starts[i] >= size)
			break;
		uint64_t prev = starts[i] - starts[i - 1];
		uint64_t next = (i + 1 < seg->block_count && starts[i + 1] > starts[i])
		                    ? starts[i + 1] - starts[i]
		                    : size - starts[i];
		uint64_t min_px_bytes = size / len * 3;
		if (prev < min_px_bytes || next < min_px_bytes)
			continue;
		uint32_t x = (uint32_t)((unsigned __int128)starts[i] * len / size);
		if (x < len) {
			uint32_t c = ((uint32_t)row.rgb[x * 3] << 16) |
			             ((uint32_t)row.rgb[x * 3 + 1] << 8) | row.rgb[x * 3 + 2];
			put_color(&row, x, darken(c));
		}
	}
	st = encode(&row, height, png, err);
done:
	free(row.rgb);
	free(runs);
	free(starts);
	return st;
}

mr_status pm_totals_png(const pm_totals *t, double bar_fraction, uint32_t width, uint32_t height,
                        mr_buf *png, mr_error *err)
{
	if (!width || !height || width > 8192 || height > 256)
		return mr_fail(err, MR_EFAIL, "map size out of range");
	pm_row row = {mr_alloc_array(width, 3), width};
	if (!row.rgb)
		return mr_oom(err);
	uint64_t total = 0;
	for (int i = 0; i < PM_STATE_COUNT; i++)
		total += t->bytes[i];
	if (!(bar_fraction > 0))
		bar_fraction = 0;
	uint32_t len = bar_fraction >= 1 ? width : (uint32_t)(bar_fraction * width + 0.5);
	if (len < 4 && total)
		len = MR_MIN(4, width);
	uint64_t cum[PM_STATE_COUNT + 1] = {0};
	for (int i = 0; i < PM_STATE_COUNT; i++)
		cum[i + 1] = cum[i] + t->bytes[i];
	for (uint32_t x = 0; x < width; x++) {
		if (x >= len || !total) {
			put_color(&row, x, pm_track_color);
			continue;
		}
		uint64_t lo = (uint64_t)((unsigned __int128)total * x / len);
		uint64_t hi = (uint64_t)((unsigned __int128)total * (x + 1) / len);
		uint64_t bytes[PM_STATE_COUNT] = {0};
		for (int i = 0; i < PM_STATE_COUNT; i++) {
			uint64_t a = MR_MAX(lo, cum[i]), e = MR_MIN(hi, cum[i + 1]);
			if (e > a)
				bytes[i] = e - a;
		}
		put_color(&row, x, mix(bytes));
	}
	mr_status st = encode(&row, height, png, err);
	free(row.rgb);
	return st;
}

typedef struct {
	uint64_t size, address;
	size_t index;
} pm_sort_key;

static int seg_cmp(const void *a, const void *b)
{
	const pm_sort_key *x = a, *y = b;
	if (x->size != y->size)
		return x->size < y->size ? 1 : -1;
	if (x->address != y->address)
		return x->address > y->address ? 1 : -1;
	return (x->index > y->index) - (x->index < y->index);
}

int pm_sort_segments(const md_segment *segments, size_t first, size_t count, size_t *order)
{
	pm_sort_key *keys = mr_alloc_array(count ? count : 1, sizeof *keys);
	if (!keys)
		return -1;
	for (size_t i = 0; i < count; i++)
		keys[i] = (pm_sort_key){segments[first + i].total_size, segments[first + i].address,
		                        first + i};
	qsort(keys, count, sizeof *keys, seg_cmp);
	for (size_t i = 0; i < count; i++)
		order[i] = keys[i].index;
	free(keys);
	return 0;
}
