/* render_json.c: the memreport/1 JSON document of ../shared/CONTRACT.md. */
#include "render/render_json.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "analyze/text_devices.h"
#include "decode/oom_message.h"
#include "base/buf.h"
#include "base/error.h"
#include "base/escape.h"
#include "base/mem.h"
#include "base/version.h"
#include "render/redact.h"
#include "report/view.h"

enum { JSON_MAX_SITES = 50 }; /* sites listed per moment */

static void json_u64(mr_buf *b, const char *key, uint64_t v, int comma)
{
	mr_buf_printf(b, "%s\"%s\": %" PRIu64, comma ? ", " : "", key, v);
}

/* v, or null when the evidence does not give it (never 0 for unknown). */
static void json_known(mr_buf *b, const char *key, uint64_t v, int known)
{
	if (known)
		json_u64(b, key, v, 1);
	else
		mr_buf_printf(b, ", \"%s\": null", key);
}

/* ---- backends: the contract's word (cuda, hip, xpu, mps; other backends' own word) ---- */

/* The word of the evidence ("CUDA", "HIP", "MPS", ...) in lower case; "" when none. */
static void backend_word(const char *w, char out[16])
{
	size_t k = 0;
	for (; w[k] && k < 15; k++)
		out[k] = (char)(w[k] >= 'A' && w[k] <= 'Z' ? w[k] - 'A' + 'a' : w[k]);
	out[k] = '\0';
}

/* The last OOM message of the device (a message without a device counts as device 0) that
 * names its backend, or NULL. */
static const ev_oom *device_message(const rp_report *run, int device)
{
	const ev_oom *found = NULL;
	for (size_t i = 0; i < run->ev.text.oom_count; i++) {
		const ev_oom *o = &run->ev.text.ooms[i];
		if ((o->device < 0 ? 0 : o->device) == device && o->backend[0])
			found = o;
	}
	return found;
}

/* A device's backend: what its OOM message says (ROCm's tables and snapshots say CUDA, its
 * messages HIP), else its last table's title word, else cuda for a snapshot's device. */
static void backend_json(mr_buf *b, const rp_report *run, int device, int from_snapshot)
{
	char w[16] = "";
	const ev_oom *o = device_message(run, device);
	if (o)
		backend_word(o->backend, w);
	for (size_t i = 0; !w[0] && i < run->ev.text.summary_count; i++) {
		const ev_summary *sm = &run->ev.text.summaries[i];
		if ((sm->device < 0 ? 0 : sm->device) == device && sm->backend[0])
			backend_word(sm->backend, w);
	}
	if (!w[0] && from_snapshot)
		snprintf(w, sizeof w, "cuda");
	mr_buf_puts(b, ", \"backend\": ");
	mr_json_str(b, w[0] ? w : NULL);
}

/* The OOM's backend: the analysed message's word; a snapshot's OOM, or a message in one of
 * the CUDA caching allocator's shapes without a word, is cuda. */
static void oom_backend_json(mr_buf *b, const rp_report *run)
{
	const ev_text *t = &run->ev.text;
	const ev_oom *msg = t->oom_count ? &t->ooms[t->oom_count - 1] : NULL;
	char w[16] = "";
	if (msg && msg->backend[0])
		backend_word(msg->backend, w);
	else if (run->ev.has_snapshot || (msg && msg->era != EV_OOM_ERA_GENERIC))
		snprintf(w, sizeof w, "cuda");
	mr_buf_puts(b, ", \"backend\": ");
	mr_json_str(b, w[0] ? w : NULL);
}

static void pool_json(mr_buf *b, const an_pool *p)
{
	mr_buf_puts(b, "{");
	json_u64(b, "reserved_bytes", p->reserved, 0);
	json_u64(b, "allocated_bytes", p->allocated, 1);
	json_u64(b, "active_bytes", p->active, 1);
	json_u64(b, "requested_bytes", p->requested, 1);
	json_u64(b, "inactive_split_bytes", p->inactive_split, 1);
	json_u64(b, "inactive_split_blocks", p->inactive_split_blocks, 1);
	json_u64(b, "segments", p->segments, 1);
	json_u64(b, "free_cached_bytes", p->free_cached, 1);
	json_u64(b, "largest_free_block_bytes", p->largest_free, 1);
	json_u64(b, "pending_free_bytes", p->pending_free, 1);
	mr_buf_puts(b, "}");
}

static void frame_json(mr_buf *b, const md_snapshot *s, const md_frame *f, const rd_options *opt)
{
	char pbuf[4096];
	if (!f) {
		mr_buf_puts(b, "null");
		return;
	}
	mr_buf_puts(b, "{\"name\": ");
	mr_json_str(b, md_str(s, f->name));
	mr_buf_puts(b, ", \"filename\": ");
	mr_json_str(b, rd_path(opt, md_str(s, f->filename), pbuf, sizeof pbuf));
	mr_buf_printf(b, ", \"line\": %d}", (int)f->line);
}

/* The sites of a moment (at most JSON_MAX_SITES), or null without that moment. */
static void sites_json(mr_buf *b, const md_snapshot *s, const an_moments *m, size_t moment,
                       const rd_options *opt)
{
	if (!m || moment == AN_NO_MOMENT) {
		mr_buf_puts(b, "null");
		return;
	}
	const an_moment *mo = &m->moments[moment];
	mr_buf_puts(b, "[");
	for (size_t i = 0; i < mo->site_count && i < JSON_MAX_SITES; i++) {
		const an_usite *site = &mo->sites[i];
		mr_buf_printf(b,
		              "%s{\"bytes\": %" PRIu64 ", \"requested_bytes\": %" PRIu64
		              ", \"blocks\": %" PRIu64 ", \"user_frame\": ",
		              i ? ", " : "", site->bytes, site->requested, site->blocks);
		frame_json(b, s, site->user, opt);
		mr_buf_puts(b, ", \"library_frame\": ");
		frame_json(b, s, site->lib, opt);
		mr_buf_printf(b, ", \"autograd\": %s}", site->autograd ? "true" : "false");
	}
	mr_buf_puts(b, "]");
}

/* The memory_stats() words at a moment, or null without it. */
static void moment_json(mr_buf *b, const char *key, const an_moments *m, size_t moment)
{
	mr_buf_printf(b, ", \"%s\": ", key);
	if (!m || moment == AN_NO_MOMENT) {
		mr_buf_puts(b, "null");
		return;
	}
	const an_moment *mo = &m->moments[moment];
	const an_pool *p = &mo->totals;
	mr_buf_printf(b, "{\"event\": %zu", mo->event);
	json_u64(b, "reserved_bytes", p->reserved, 1);
	json_u64(b, "allocated_bytes", p->allocated, 1);
	json_u64(b, "active_bytes", p->active, 1);
	json_u64(b, "free_cached_bytes", p->free_cached, 1);
	json_u64(b, "largest_free_block_bytes", p->largest_free, 1);
	json_u64(b, "segments", p->segments, 1);
	mr_buf_printf(b, ", \"fragmentation\": %.4f, \"from_snapshot\": %s}", an_fragmentation(p),
	              mo->from_snapshot ? "true" : "false");
}

/* What the trace says about the device beyond the contract's keys: the peaks' events, the
 * overhead at the peak, the iteration starts, the state and the sites at each moment. */
static void trace_json(mr_buf *b, const rp_report *run, const an_device *dv, const rd_options *opt)
{
	const an_moments *m = rp_moments(run, dv);
	if (dv->has_trace) {
		mr_buf_printf(b, ", \"peak_allocated_event\": %zu, \"peak_reserved_event\": %zu",
		              dv->peak_allocated_event, dv->peak_reserved_event);
		mr_buf_printf(b, ", \"overhead_at_peak\": %.4f", an_overhead_at_peak(dv));
		mr_buf_puts(b, ", \"iteration_starts\": [");
		for (size_t i = 0; i < dv->run.start_count; i++)
			mr_buf_printf(b, "%s%zu", i ? ", " : "", dv->run.starts[i]);
		mr_buf_puts(b, "]");
	} else {
		mr_buf_puts(b, ", \"peak_allocated_event\": null, \"peak_reserved_event\": null, "
		               "\"overhead_at_peak\": null, \"iteration_starts\": null");
	}
	moment_json(b, "at_peak", m, m ? m->peak : AN_NO_MOMENT);
	moment_json(b, "at_oom", m, m ? m->oom : AN_NO_MOMENT);
	mr_buf_puts(b, ", \"sites\": {\"at_peak\": ");
	sites_json(b, &run->ev.snap, m, m ? m->peak : AN_NO_MOMENT, opt);
	mr_buf_puts(b, ", \"at_oom\": ");
	sites_json(b, &run->ev.snap, m, m ? m->oom : AN_NO_MOMENT, opt);
	mr_buf_puts(b, ", \"at_snapshot\": ");
	sites_json(b, &run->ev.snap, m, m ? m->snapshot : AN_NO_MOMENT, opt);
	mr_buf_puts(b, "}");
}

static void device_json(mr_buf *b, const rp_report *run, const an_device *dv, const rd_options *opt)
{
	const an_pool *all = &dv->pool[AN_POOL_ALL];
	mr_buf_printf(b, "{\"device\": %d", dv->device);
	json_u64(b, "reserved_bytes", all->reserved, 1);
	json_u64(b, "allocated_bytes", all->allocated, 1);
	json_u64(b, "active_bytes", all->active, 1);
	json_u64(b, "requested_bytes", all->requested, 1);
	json_u64(b, "inactive_split_bytes", all->inactive_split, 1);
	json_u64(b, "inactive_split_blocks", all->inactive_split_blocks, 1);
	json_u64(b, "segments", all->segments, 1);
	json_u64(b, "free_cached_bytes", all->free_cached, 1);
	json_u64(b, "largest_free_block_bytes", all->largest_free, 1);
	mr_buf_printf(b, ", \"fragmentation\": %.4f", dv->fragmentation);
	mr_buf_printf(b, ", \"expandable_segments\": %s", dv->expandable ? "true" : "false");
	backend_json(b, run, dv->device, 1);
	if (dv->has_trace) {
		json_u64(b, "peak_allocated_bytes", dv->peak_allocated, 1);
		json_u64(b, "peak_reserved_bytes", dv->peak_reserved, 1);
		mr_buf_printf(b, ", \"peaks_exact\": %s", dv->peak_exact ? "true" : "false");
	} else {
		mr_buf_puts(b, ", \"peak_allocated_bytes\": null, \"peak_reserved_bytes\": null");
	}
	const md_device *md = md_find_device(&run->ev.snap, dv->device);
	if (md && md->has_trace_list)
		json_u64(b, "trace_events", dv->trace_events, 1);
	else
		mr_buf_puts(b, ", \"trace_events\": null");
	if (dv->has_trace)
		mr_buf_printf(b, ", \"trace_truncated\": %s", dv->truncated ? "true" : "false");
	else
		mr_buf_puts(b, ", \"trace_truncated\": null");
	trace_json(b, run, dv, opt);
	mr_buf_puts(b, ", \"pools\": {\"large\": ");
	pool_json(b, &dv->pool[AN_POOL_LARGE]);
	mr_buf_puts(b, ", \"small\": ");
	pool_json(b, &dv->pool[AN_POOL_SMALL]);
	mr_buf_puts(b, ", \"private\": ");
	pool_json(b, &dv->pool[AN_POOL_PRIVATE]);
	mr_buf_puts(b, "}}");
}

/* A device described by a table or a memory_stats() dump: no layout, so no free-block numbers;
 * a value the table or dump does not give is null. */
static void numbers_json(mr_buf *b, const rp_report *run, const an_numbers *d)
{
	unsigned k = d->known;
	mr_buf_printf(b, "{\"device\": %d", d->device);
	json_known(b, "reserved_bytes", d->reserved, k & AN_KNOWN_RESERVED);
	json_known(b, "allocated_bytes", d->allocated, k & AN_KNOWN_ALLOCATED);
	json_known(b, "active_bytes", d->active, k & AN_KNOWN_ACTIVE);
	json_known(b, "requested_bytes", d->requested, k & AN_KNOWN_REQUESTED);
	json_known(b, "inactive_split_bytes", d->inactive_split, k & AN_KNOWN_INACTIVE_SPLIT);
	json_known(b, "inactive_split_blocks", d->inactive_split_blocks,
	           k & AN_KNOWN_INACTIVE_SPLIT_BLOCKS);
	json_known(b, "segments", d->segments, k & AN_KNOWN_SEGMENTS);
	/* reserved - allocated is all of the free cached memory; its layout is unknown */
	json_known(b, "free_cached_bytes",
	           d->reserved > d->allocated ? d->reserved - d->allocated : 0,
	           (k & AN_KNOWN_RESERVED) && (k & AN_KNOWN_ALLOCATED));
	mr_buf_puts(b, ", \"largest_free_block_bytes\": null, \"fragmentation\": null");
	mr_buf_puts(b, ", \"expandable_segments\": null");
	backend_json(b, run, d->device, 0);
	json_known(b, "peak_allocated_bytes", d->peak_allocated, k & AN_KNOWN_PEAK_ALLOCATED);
	json_known(b, "peak_reserved_bytes", d->peak_reserved, k & AN_KNOWN_PEAK_RESERVED);
	mr_buf_puts(b, ", \"trace_events\": null, \"trace_truncated\": null");
	mr_buf_printf(b, ", \"source\": \"%s\"", ld_kind_name(d->source));
	/* table cells are truncated to their unit: the true value is in [v, v + precision) */
	json_u64(b, "precision_bytes", d->precision, 1);
	mr_buf_printf(b, ", \"lower_bound\": %s}", d->precision > 1 ? "true" : "false");
}

static void settings_json(mr_buf *b, const md_snapshot *s)
{
	const md_settings *cfg = &s->settings;
	if (!cfg->present) {
		mr_buf_puts(b, "null");
		return;
	}
	mr_buf_puts(b, "{");
	mr_json_str(b, "PYTORCH_CUDA_ALLOC_CONF");
	mr_buf_puts(b, ": ");
	mr_json_str(b, md_str(s, cfg->conf));
	if (cfg->max_split_size == UINT64_MAX || cfg->max_split_size == (uint64_t)-1)
		mr_buf_puts(b, ", \"max_split_size\": -1");
	else
		json_u64(b, "max_split_size", cfg->max_split_size, 1);
	mr_buf_printf(b, ", \"garbage_collection_threshold\": %.6g", cfg->gc_threshold);
	mr_buf_printf(b, ", \"expandable_segments\": %s",
	              cfg->expandable_segments ? "true" : "false");
	mr_buf_puts(b, ", \"roundup_power2_divisions\": {");
	for (int i = 0; i < 16; i++)
		mr_buf_printf(b, "%s\"%u\": %u", i ? ", " : "", 1u << i, cfg->roundup_divisions[i]);
	mr_buf_puts(b, "}, \"recorded\": {");
	for (size_t i = 0; i < cfg->raw_count; i++) {
		mr_buf_puts(b, i ? ", " : "");
		mr_json_str(b, md_str(s, cfg->raw[i].key));
		mr_buf_puts(b, ": ");
		mr_json_str(b, md_str(s, cfg->raw[i].value));
	}
	mr_buf_puts(b, "}}");
}

static void field_str(mr_buf *b, const char *key, const char *value, int comma)
{
	mr_buf_printf(b, "%s\"%s\": ", comma ? ", " : "", key);
	mr_json_str(b, value);
}

/* Prose of the diagnosis, with the paths it quotes redacted when asked. */
static void prose_field(mr_buf *b, const char *key, const char *text, const ad_paths *paths,
                        const rd_options *opt)
{
	mr_buf tmp = {0};
	rd_prose(&tmp, opt, text, paths);
	if (tmp.failed)
		b->failed = 1;
	field_str(b, key, tmp.data ? tmp.data : "", 1);
	mr_buf_free(&tmp);
}

/* Who held the device at the OOM: what the trace's oom event and the message say. */
static void outside_json(mr_buf *b, const ad_oom *o)
{
	json_known(b, "device_free_bytes", o->device_free, o->has_device_free);
	json_known(b, "non_pytorch_bytes", o->non_pytorch, o->has_non_pytorch);
	mr_buf_puts(b, ", \"other_processes\": ");
	if (!o->has_others) {
		mr_buf_puts(b, "null");
		return;
	}
	mr_buf_puts(b, "[");
	for (size_t i = 0; i < o->process_count; i++)
		mr_buf_printf(b, "%s{\"pid\": %d, \"bytes\": %" PRIu64 "}", i ? ", " : "",
		              o->processes[i].pid, o->processes[i].bytes);
	mr_buf_puts(b, "]");
}

/* What ran, on the diagnosed device. */
static void run_json(mr_buf *b, const rp_report *run)
{
	const an_structure *st = NULL;
	for (size_t i = 0; i < run->an.device_count; i++)
		if (run->an.devices[i].device == run->advice.device)
			st = &run->an.devices[i].run;
	mr_buf_puts(b, ",\n  \"run\": {\"kind\": ");
	mr_json_str(b, an_run_kind_name(st ? st->kind : AN_RUN_UNKNOWN));
	if (st && st->start_count)
		json_u64(b, "iterations", st->start_count, 1);
	else
		mr_buf_puts(b, ", \"iterations\": null");
	mr_buf_puts(b, ", \"techniques\": [");
	for (unsigned i = 0, n = 0; st && i < AN_TECH_COUNT; i++)
		if (st->techniques & (1u << i)) {
			mr_buf_puts(b, n++ ? ", " : "");
			mr_json_str(b, an_technique_name(i));
		}
	mr_buf_puts(b, "]");
	if (st && st->growth_found)
		json_u64(b, "growth_per_iteration_bytes", st->growth_per_iteration, 1);
	else
		mr_buf_puts(b, ", \"growth_per_iteration_bytes\": null");
	if (st && st->growth_found && st->growth_stepped) {
		json_u64(b, "growth_step_bytes", st->growth_step_bytes, 1);
		json_u64(b, "growth_every_iterations", st->growth_step_every, 1);
	} else {
		mr_buf_puts(b, ", \"growth_step_bytes\": null, \"growth_every_iterations\": null");
	}
	mr_buf_puts(b, ", \"summary\": ");
	mr_json_str(b, run->advice.what_ran ? run->advice.what_ran : "");
	mr_buf_puts(b, "}");
}

/* The microbatch that fits the budget (advise/plan.h); null without a budget. */
static void capacity_json(mr_buf *b, const rp_report *run, const rd_options *opt)
{
	const ad_capacity *cp = &run->advice.capacity;
	mr_buf_puts(b, ",\n  \"capacity\": ");
	if (!cp->budget) {
		mr_buf_puts(b, "null");
		return;
	}
	mr_buf_puts(b, "{");
	json_u64(b, "budget_bytes", cp->budget, 0);
	field_str(b, "budget_from", cp->budget_given ? "--budget" : "evidence", 1);
	field_str(b, "method", ad_plan_method_name(cp->method), 1);
	field_str(b, "summary", run->advice.capacity_line ? run->advice.capacity_line : "", 1);
	field_str(b, "reason", cp->why, 1);
	if (cp->method == AD_PLAN_NONE) {
		mr_buf_puts(b, "}");
		return;
	}
	json_u64(b, "fixed_bytes", cp->fixed_bytes, 1);
	json_u64(b, "scaling_bytes", cp->scaling_bytes, 1);
	/* a run that died is given its bound, never a factor it could reach */
	if (cp->method == AD_PLAN_SCALED_REPLAY && cp->max_factor > 0) {
		mr_buf_printf(b, ", \"max_microbatch_factor\": %.3f", cp->max_factor);
		json_u64(b, "predicted_peak_reserved_bytes", cp->predicted_peak_reserved, 1);
	} else {
		mr_buf_puts(b, ", \"max_microbatch_factor\": null, "
		               "\"predicted_peak_reserved_bytes\": null");
	}
	mr_buf_printf(b, ", \"at_search_cap\": %s, \"needs_cache_flushes\": %s",
	              cp->at_cap ? "true" : "false", cp->with_flushes ? "true" : "false");
	if (cp->method == AD_PLAN_UPPER_BOUND) {
		mr_buf_printf(b, ", \"upper_bound_factor\": %.3f", cp->max_factor);
		field_str(b, "died_in", cp->died_in, 1);
		mr_buf_printf(b, ", \"step_reached\": %.3f", cp->step_reached);
	}
	json_u64(b, "events_replayed", cp->events_replayed, 1);
	mr_buf_puts(b, ", \"deciding\": [");
	for (size_t i = 0; i < cp->deciding_count; i++) {
		const md_frame *f = an_user_frame(&run->ev.snap, cp->deciding_stack[i]);
		char pbuf[4096], where[4200] = "autograd (backward)";
		if (f)
			snprintf(
			    where, sizeof where, "%s (%s:%d)", md_str(&run->ev.snap, f->name),
			    rd_path(opt, md_str(&run->ev.snap, f->filename), pbuf, sizeof pbuf),
			    f->line);
		mr_buf_printf(b, "%s{\"bytes\": %" PRIu64 ", \"blocks\": %" PRIu64, i ? ", " : "",
		              cp->deciding_bytes[i], cp->deciding_blocks[i]);
		field_str(b, "site", where, 1);
		mr_buf_puts(b, "}");
	}
	mr_buf_puts(b, "], \"curve\": [");
	for (size_t i = 0; i < cp->curve_count; i++)
		mr_buf_printf(
		    b, "%s{\"factor\": %.4f, \"peak_reserved_bytes\": %" PRIu64 ", \"oom\": %s}",
		    i ? ", " : "", cp->curve_factor[i], cp->curve_peak_reserved[i],
		    cp->curve_oom[i] ? "true" : "false");
	mr_buf_puts(b, "]}");
}

static void advice_json(mr_buf *b, const rp_report *run, const rd_options *opt)
{
	const ad_advice *a = &run->advice;
	unsigned unknown = a->oom.unknown;
	mr_buf_puts(b, ",\n  \"verdict\": ");
	mr_json_str(b, a->verdict ? a->verdict : "");
	if (a->device >= 0)
		mr_buf_printf(b, ",\n  \"verdict_moment\": {\"device\": %d, \"moment\": \"%s\"}",
		              a->device, ad_moment_name(a->verdict_moment));
	else
		mr_buf_puts(b, ",\n  \"verdict_moment\": null");
	mr_buf_puts(b, ",\n  \"oom\": ");
	if (a->oom.present) {
		mr_buf_printf(b, "{\"device\": %d", a->oom.device);
		oom_backend_json(b, run);
		json_known(b, "requested_bytes", a->oom.requested,
		           !(unknown & AD_OOM_NO_REQUESTED));
		field_str(b, "cause", ad_cause_name(a->oom.cause), 1);
		json_known(b, "free_cached_bytes", a->oom.free_cached,
		           !(unknown & AD_OOM_NO_FREE_CACHED));
		if (a->oom.largest_unknown) {
			mr_buf_puts(
			    b,
			    ", \"largest_free_block_bytes\": null, \"free_cached_blocks\": null");
		} else {
			json_u64(b, "largest_free_block_bytes", a->oom.largest_free, 1);
			json_u64(b, "free_cached_blocks", a->oom.free_pieces, 1);
		}
		if (a->oom.limit)
			json_u64(b, "limit_bytes", a->oom.limit, 1);
		else
			mr_buf_puts(b, ", \"limit_bytes\": null");
		json_known(b, "reserved_bytes", a->oom.reserved, !(unknown & AD_OOM_NO_RESERVED));
		json_known(b, "allocated_bytes", a->oom.allocated,
		           !(unknown & AD_OOM_NO_ALLOCATED));
		outside_json(b, &a->oom);
		mr_buf_puts(b, "}");
	} else {
		mr_buf_puts(b, "null");
	}
	mr_buf_puts(b, ",\n  \"memory_by_category\": ");
	if (a->categories.present) {
		mr_buf_puts(b, "{");
		for (int i = 0; i < AD_CAT_COUNT; i++)
			json_u64(b, ad_category_name(i), a->categories.bytes[i], i > 0);
		field_str(b, "moment", a->categories.moment, 1);
		if (a->categories.peak_present) {
			mr_buf_puts(b, ", \"at_peak\": {");
			for (int i = 0; i < AD_CAT_COUNT; i++)
				json_u64(b, ad_category_name(i), a->categories.peak[i], i > 0);
			mr_buf_puts(b, "}");
		}
		mr_buf_puts(b, "}");
	} else {
		mr_buf_puts(b, "null");
	}
	mr_buf_puts(b, ",\n  \"findings\": [");
	for (size_t i = 0; i < a->finding_count; i++) {
		const ad_finding *f = &a->findings[i];
		mr_buf_puts(b, i ? ",\n    {" : "\n    {");
		field_str(b, "id", f->id, 0);
		field_str(b, "severity", ad_severity_name(f->severity), 1);
		prose_field(b, "message", f->message, &f->paths, opt);
		mr_buf_puts(b, "}");
	}
	mr_buf_puts(b, a->finding_count ? "\n  ],\n  \"recommendations\": ["
	                                : "],\n  \"recommendations\": [");
	for (size_t i = 0; i < a->rec_count; i++) {
		const ad_recommendation *r = &a->recs[i];
		mr_buf_puts(b, i ? ",\n    {" : "\n    {");
		field_str(b, "id", r->id, 0);
		mr_buf_printf(b, ", \"rank\": %d", r->rank);
		field_str(b, "title", r->title, 1);
		prose_field(b, "reason", r->reason, &r->reason_paths, opt);
		field_str(b, "change", r->change, 1);
		mr_buf_puts(b, "}");
	}
	mr_buf_puts(b, a->rec_count ? "\n  ]\n" : "]\n");
}

mr_status rd_render_json(const rp_report *run, const rd_options *opt, mr_buf *out, mr_error *err)
{
	mr_buf *b = out;
	char pbuf[4096];
	rp_view view;
	mr_status st = rp_view_init(&view, run, opt->device, err);
	if (st)
		return st;
	mr_buf_puts(b, "{\n  \"schema\": \"memreport/1\",\n  \"memreport\": \"" MEMREPORT_VERSION
	               "\",\n  \"inputs\": [");
	for (size_t i = 0; i < run->ev.input_count; i++) {
		mr_buf_puts(b, i ? ", {\"path\": " : "{\"path\": ");
		mr_json_str(b, rd_path(opt, run->ev.inputs[i].path, pbuf, sizeof pbuf));
		mr_buf_puts(b, ", \"kind\": ");
		mr_json_str(b, ld_kind_name(run->ev.inputs[i].kind));
		mr_buf_puts(b, "}");
	}
	mr_buf_puts(b, "],\n  \"devices\": [");
	for (size_t i = 0; i < view.device_count; i++) {
		mr_buf_puts(b, i ? ",\n    " : "\n    ");
		device_json(b, run, view.devices[i], opt);
	}
	for (size_t i = 0; i < view.number_count; i++) {
		mr_buf_puts(b, i ? ",\n    " : "\n    ");
		numbers_json(b, run, &view.numbers[i]);
	}
	mr_buf_puts(b, view.device_count || view.number_count ? "\n  ],\n" : "],\n");
	mr_buf_puts(b, "  \"allocator_settings\": ");
	if (run->ev.has_snapshot)
		settings_json(b, &run->ev.snap);
	else
		mr_buf_puts(b, "null");
	run_json(b, run);
	capacity_json(b, run, opt);
	advice_json(b, run, opt);
	mr_buf_puts(b, "}\n");
	rp_view_free(&view);
	return b->failed ? mr_oom(err) : MR_OK;
}
