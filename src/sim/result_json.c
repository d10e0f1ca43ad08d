/* result_json.c: a replay's result as JSON. */
#include "sim/result_json.h"

#include <inttypes.h>
#include <string.h>

#include "base/buf.h"
#include "base/escape.h"

void sim_oom_json(const sim_result *r, mr_buf *out)
{
	const sim_oom *o = &r->first_oom;
	if (!o->present) {
		mr_buf_puts(out, "null");
		return;
	}
	mr_buf_printf(out,
	              "{\"event_index\": %zu, \"requested_bytes\": %" PRIu64
	              ", \"alloc_bytes\": %" PRIu64 ", \"reserved_bytes\": %" PRIu64
	              ", \"allocated_bytes\": %" PRIu64 ", \"free_cached_bytes\": %" PRIu64
	              ", \"largest_free_block_bytes\": %" PRIu64 "}",
	              o->event_index, o->requested_bytes, o->alloc_bytes, o->reserved_bytes,
	              o->allocated_bytes, o->free_cached_bytes, o->largest_free_bytes);
}

void sim_divergence_json(const sim_result *r, mr_buf *out)
{
	const sim_divergence *d = &r->first_divergence;
	if (!d->present) {
		mr_buf_puts(out, "null");
		return;
	}
	mr_buf_printf(out, "{\"event_index\": %zu, \"what\": ", d->event_index);
	mr_json_str(out, d->what);
	mr_buf_puts(out, ", \"expected\": ");
	mr_json_str(out, d->expected);
	mr_buf_puts(out, ", \"got\": ");
	mr_json_str(out, d->got);
	mr_buf_puts(out, "}");
}

void sim_result_json(const sim_result *r, mr_buf *out)
{
	mr_buf_puts(out, "{\"alloc_conf\": ");
	mr_buf conf = {0};
	sim_config_format(&r->config, &conf);
	mr_json_str(out, conf.data ? conf.data : "");
	mr_buf_free(&conf);
	mr_buf_printf(out, ", \"device\": %d", (int)r->device);
	if (r->limit)
		mr_buf_printf(out, ", \"limit_bytes\": %" PRIu64, r->limit);
	else
		mr_buf_puts(out, ", \"limit_bytes\": null");
	mr_buf_printf(out,
	              ", \"events\": %zu, \"peak_reserved_bytes\": %" PRIu64
	              ", \"peak_allocated_bytes\": %" PRIu64 ", \"final_reserved_bytes\": %" PRIu64
	              ", \"final_allocated_bytes\": %" PRIu64 ", \"segments_allocated\": %" PRIu64
	              ", \"segments_released\": %" PRIu64 ", \"oom_count\": %" PRIu64 ", \"oom\": ",
	              r->events, r->peak_reserved, r->peak_allocated, r->final_reserved,
	              r->final_allocated, r->segments_allocated, r->segments_released,
	              r->oom_count);
	sim_oom_json(r, out);
	mr_buf_printf(out, ", \"matches_recording\": %s, \"first_divergence\": ",
	              r->matches_recording ? "true" : "false");
	sim_divergence_json(r, out);
	mr_buf_printf(
	    out,
	    ", \"truncated\": %s, \"approximate\": %s, \"initial_allocated_bytes\": %" PRIu64
	    ", \"initial_reserved_bytes\": %" PRIu64 ", \"estimated_blocks\": %" PRIu64
	    ", \"recorded_ooms\": %" PRIu64 ", \"recorded_ooms_allocated\": %" PRIu64 "}",
	    r->truncated ? "true" : "false", r->approximate ? "true" : "false",
	    r->initial_allocated, r->initial_reserved, r->estimated_blocks, r->recorded_ooms,
	    r->recorded_ooms_allocated);
}
