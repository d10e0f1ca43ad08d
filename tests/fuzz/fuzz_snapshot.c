/* fuzz_snapshot.c: pickle bytes -> the typed model (sn_load), then the model's invariants.
 *
 * Whatever the bytes, sn_load either fails with a one-line message or builds a model whose
 * every index is in range: the renderers and the analysis trust these without checking. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "decode/snapshot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_snapshot: check failed: %s (line %d)\n", #cond,      \
			        __LINE__);                                                         \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

static void check_stack(const md_snapshot *s, uint32_t stack)
{
	CHECK(stack < s->stack_count);
	const md_stack *st = &s->stacks[stack];
	CHECK(st->first <= s->frame_count && st->count <= s->frame_count - st->first);
}

static void check_model(const md_snapshot *s)
{
	CHECK(s->strings.count >= 1 && s->stack_count >= 1);
	for (size_t i = 0; i < s->strings.count; i++) {
		CHECK(s->strings.offsets[i] + s->strings.lens[i] < s->strings.len);
		CHECK(md_str(s, (uint32_t)i)[md_str_len(s, (uint32_t)i)] == '\0');
	}
	for (size_t i = 0; i < s->stack_count; i++) {
		check_stack(s, (uint32_t)i);
		const md_stack *st = &s->stacks[i];
		for (size_t k = 0; k < st->count; k++) {
			const md_frame *f = &s->frames[st->first + k];
			CHECK(f->name < s->strings.count && f->filename < s->strings.count);
		}
	}
	size_t blocks = 0;
	for (size_t i = 0; i < s->segment_count; i++) {
		const md_segment *seg = &s->segments[i];
		if (i)
			CHECK(s->segments[i - 1].device < seg->device ||
			      (s->segments[i - 1].device == seg->device &&
			       s->segments[i - 1].address <= seg->address));
		CHECK(seg->first_block <= s->block_count &&
		      seg->block_count <= s->block_count - seg->first_block);
		check_stack(s, seg->stack);
		CHECK(md_find_device(s, seg->device) != NULL);
		blocks += seg->block_count;
	}
	CHECK(blocks == s->block_count);
	for (size_t i = 0; i < s->block_count; i++) {
		check_stack(s, s->blocks[i].stack);
		CHECK(s->blocks[i].state <= MD_BLOCK_INACTIVE);
	}
	for (size_t i = 0; i < s->device_count; i++) {
		const md_device *dv = &s->devices[i];
		if (i)
			CHECK(s->devices[i - 1].id < dv->id);
		if (dv->event_count) {
			CHECK(dv->events >= s->event_store);
			CHECK((size_t)(dv->events - s->event_store) <= s->event_store_count);
			CHECK(dv->event_count <=
			      s->event_store_count - (size_t)(dv->events - s->event_store));
		}
		for (size_t k = 0; k < dv->event_count; k++) {
			const md_event *e = &dv->events[k];
			check_stack(s, e->stack);
			CHECK(e->action < MD_ACT_COUNT);
			CHECK(e->stream < s->stream_count || e->stream == 255);
			CHECK(e->meta < s->meta_count || e->meta == 65535);
		}
	}
	for (size_t i = 0; i < s->meta_count; i++)
		CHECK(s->metas[i].user_metadata < s->strings.count &&
		      s->metas[i].compile_context < s->strings.count);
	for (size_t i = 0; i < s->annotation_count; i++)
		CHECK(s->annotations[i].name < s->strings.count);
	for (size_t i = 0; i < s->settings.raw_count; i++)
		CHECK(s->settings.raw[i].key < s->strings.count &&
		      s->settings.raw[i].value < s->strings.count);
	CHECK(s->settings.conf < s->strings.count);
}

static size_t progress_calls;

static void on_progress(void *ctx, size_t done, size_t total)
{
	(void)ctx;
	CHECK(done <= total);
	progress_calls++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	md_snapshot snap;
	mr_error err = {0};
	mr_status st = sn_load(data, size, &snap, on_progress, NULL, &err);
	if (st == MR_OK) {
		CHECK(err.status == MR_OK);
		check_model(&snap);
		md_free(&snap);
	} else {
		CHECK(st == MR_EINPUT || st == MR_EFAIL);
		CHECK(err.status == st && err.msg[0] != '\0');
		CHECK(strchr(err.msg, '\n') == NULL);
	}
	return 0;
}
