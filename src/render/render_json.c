/* render_json.c: the memreport/1 JSON document of ../shared/CONTRACT.md. */
#include "render/render_json.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "analyze/text_devices.h"
#include "base/buf.h"
#include "base/error.h"
#include "base/escape.h"
#include "base/version.h"
#include "render/redact.h"
#include "report/view.h"

static void json_u64(mr_buf *b, const char *key, uint64_t v, int comma)
{
	mr_buf_printf(b, "%s\"%s\": %" PRIu64, comma ? ", " : "", key, v);
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

static void device_json(mr_buf *b, const rp_report *run, const an_device *dv)
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
	mr_buf_puts(b, ", \"pools\": {\"large\": ");
	pool_json(b, &dv->pool[AN_POOL_LARGE]);
	mr_buf_puts(b, ", \"small\": ");
	pool_json(b, &dv->pool[AN_POOL_SMALL]);
	mr_buf_puts(b, ", \"private\": ");
	pool_json(b, &dv->pool[AN_POOL_PRIVATE]);
	mr_buf_puts(b, "}}");
}

/* A device described by a table or a memory_stats() dump: no layout, so no free-block numbers. */
static void numbers_json(mr_buf *b, const an_numbers *d)
{
	mr_buf_printf(b, "{\"device\": %d", d->device);
	json_u64(b, "reserved_bytes", d->reserved, 1);
	json_u64(b, "allocated_bytes", d->allocated, 1);
	json_u64(b, "active_bytes", d->active, 1);
	if (d->has_requested)
		json_u64(b, "requested_bytes", d->requested, 1);
	else
		mr_buf_puts(b, ", \"requested_bytes\": null");
	json_u64(b, "inactive_split_bytes", d->inactive_split, 1);
	json_u64(b, "inactive_split_blocks", d->inactive_split_blocks, 1);
	json_u64(b, "segments", d->segments, 1);
	/* reserved - allocated is all of the free cached memory; its layout is unknown */
	json_u64(b, "free_cached_bytes",
	         d->reserved > d->allocated ? d->reserved - d->allocated : 0, 1);
	mr_buf_puts(b, ", \"largest_free_block_bytes\": null, \"fragmentation\": null");
	mr_buf_puts(b, ", \"expandable_segments\": null");
	if (d->has_peaks) {
		json_u64(b, "peak_allocated_bytes", d->peak_allocated, 1);
		json_u64(b, "peak_reserved_bytes", d->peak_reserved, 1);
	} else {
		mr_buf_puts(b, ", \"peak_allocated_bytes\": null, \"peak_reserved_bytes\": null");
	}
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

static void u64_or_null(mr_buf *b, const char *key, int known, uint64_t v)
{
	if (known)
		json_u64(b, key, v, 1);
	else
		mr_buf_printf(b, ", \"%s\": null", key);
}

/* Who held the device at the OOM: what the trace's oom event and the message say. */
static void outside_json(mr_buf *b, const ad_oom *o)
{
	u64_or_null(b, "device_free_bytes", o->has_device_free, o->device_free);
	u64_or_null(b, "non_pytorch_bytes", o->has_non_pytorch, o->non_pytorch);
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

static void advice_json(mr_buf *b, const ad_advice *a, const rd_options *opt)
{
	mr_buf_puts(b, ",\n  \"verdict\": ");
	mr_json_str(b, a->verdict ? a->verdict : "");
	mr_buf_puts(b, ",\n  \"oom\": ");
	if (a->oom.present) {
		mr_buf_printf(b, "{\"device\": %d", a->oom.device);
		json_u64(b, "requested_bytes", a->oom.requested, 1);
		field_str(b, "cause", ad_cause_name(a->oom.cause), 1);
		json_u64(b, "free_cached_bytes", a->oom.free_cached, 1);
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
		json_u64(b, "reserved_bytes", a->oom.reserved, 1);
		json_u64(b, "allocated_bytes", a->oom.allocated, 1);
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
		device_json(b, run, view.devices[i]);
	}
	for (size_t i = 0; i < view.number_count; i++) {
		mr_buf_puts(b, i ? ",\n    " : "\n    ");
		numbers_json(b, &view.numbers[i]);
	}
	mr_buf_puts(b, view.device_count || view.number_count ? "\n  ],\n" : "],\n");
	mr_buf_puts(b, "  \"allocator_settings\": ");
	if (run->ev.has_snapshot)
		settings_json(b, &run->ev.snap);
	else
		mr_buf_puts(b, "null");
	run_json(b, run);
	capacity_json(b, run, opt);
	advice_json(b, &run->advice, opt);
	mr_buf_puts(b, "}\n");
	rp_view_free(&view);
	return b->failed ? mr_oom(err) : MR_OK;
}
