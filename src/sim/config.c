/* config.c: allocator settings: parsed, recorded, written; the rounding rules. */
#include "sim/config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/units.h"

void sim_config_default(sim_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->max_split_size = UINT64_MAX;
	cfg->max_non_split_rounding = K_LARGE_BUFFER;
	cfg->large_segment_size = K_LARGE_BUFFER;
}

int sim_config_equal(const sim_config *a, const sim_config *b)
{
	return a->max_split_size == b->max_split_size &&
	       a->max_non_split_rounding == b->max_non_split_rounding &&
	       a->large_segment_size == b->large_segment_size &&
	       a->gc_threshold == b->gc_threshold &&
	       !a->expandable_segments == !b->expandable_segments &&
	       memcmp(a->roundup_divisions, b->roundup_divisions, sizeof a->roundup_divisions) == 0;
}

/* The lexer of PyTorch's config parser: ',' ':' '[' ']' are tokens of their own, spaces are
 * dropped, everything else accumulates. */
typedef struct {
	char tok[256][48];
	size_t count;
} conf_tokens;

static mr_status conf_lex(const char *conf, conf_tokens *t, mr_error *err)
{
	char cur[48];
	size_t len = 0;
	t->count = 0;
	for (const char *p = conf;; p++) {
		char c = *p;
		int sep = c == ',' || c == ':' || c == '[' || c == ']' || c == '\0';
		if (sep && len) {
			if (t->count == 256)
				return mr_fail(err, MR_EINPUT, "allocator config '%s' is too long",
				               conf);
			memcpy(t->tok[t->count], cur, len);
			t->tok[t->count++][len] = '\0';
			len = 0;
		}
		if (c == '\0')
			break;
		if (sep) {
			if (t->count == 256)
				return mr_fail(err, MR_EINPUT, "allocator config '%s' is too long",
				               conf);
			t->tok[t->count][0] = c;
			t->tok[t->count++][1] = '\0';
		} else if (!isspace((unsigned char)c)) {
			if (len + 1 >= sizeof cur)
				return mr_fail(err, MR_EINPUT,
				               "allocator config: token too long in '%s'", conf);
			cur[len++] = c;
		}
	}
	return MR_OK;
}

static int parse_u64(const char *s, uint64_t *out)
{
	if (!isdigit((unsigned char)*s))
		return -1;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

static int is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

static int log2_u64(uint64_t v)
{
	return 63 - __builtin_clzll(v);
}

typedef struct {
	const conf_tokens *t;
	size_t i;
	mr_error *err;
} conf_parser;

static const char *conf_peek(const conf_parser *p)
{
	return p->i < p->t->count ? p->t->tok[p->i] : "";
}

static mr_status conf_expect(conf_parser *p, const char *tok, const char *key)
{
	if (strcmp(conf_peek(p), tok) != 0)
		return mr_fail(p->err, MR_EINPUT,
		               "Error parsing CUDA allocator config: expected '%s' after '%s'", tok,
		               key);
	p->i++;
	return MR_OK;
}

static mr_status conf_bool(conf_parser *p, const char *key, int *out)
{
	const char *v = conf_peek(p);
	if (strcmp(v, "True") == 0)
		*out = 1;
	else if (strcmp(v, "False") == 0)
		*out = 0;
	else
		return mr_fail(p->err, MR_EINPUT, "Expected a single True/False argument for %s",
		               key);
	p->i++;
	return MR_OK;
}

static mr_status conf_mib(conf_parser *p, const char *key, uint64_t min_mib, uint64_t *out)
{
	uint64_t v;
	if (parse_u64(conf_peek(p), &v))
		return mr_fail(p->err, MR_EINPUT, "Expected a number of MiB for %s, got '%s'", key,
		               conf_peek(p));
	if (v < min_mib)
		return mr_fail(p->err, MR_EINPUT,
		               "CachingAllocator option %s too small, must be >= %" PRIu64, key,
		               min_mib);
	p->i++;
	*out = v > UINT64_MAX / MR_MIB ? UINT64_MAX : v * MR_MIB;
	return MR_OK;
}

static mr_status conf_roundup(conf_parser *p, uint32_t div[16])
{
	uint64_t v;
	if (strcmp(conf_peek(p), "[") != 0) {
		if (parse_u64(conf_peek(p), &v) || (v && !is_pow2(v)) || v > (1u << 20))
			return mr_fail(p->err, MR_EINPUT,
			               "For roundups, the divisions has to be power of 2, got '%s'",
			               conf_peek(p));
		p->i++;
		for (int i = 0; i < 16; i++)
			div[i] = (uint32_t)v;
		return MR_OK;
	}
	p->i++;
	int first = 1, last = -1;
	for (;;) {
		const char *k = conf_peek(p);
		int is_rest = strcmp(k, ">") == 0;
		uint64_t key = 0;
		if (!is_rest && (parse_u64(k, &key) || !is_pow2(key)))
			return mr_fail(
			    p->err, MR_EINPUT,
			    "For roundups, the intervals have to be power of 2, got '%s'", k);
		p->i++;
		if (conf_expect(p, ":", "roundup_power2_divisions interval"))
			return MR_EINPUT;
		if (parse_u64(conf_peek(p), &v) || (v && !is_pow2(v)) || v > (1u << 20))
			return mr_fail(p->err, MR_EINPUT,
			               "For roundups, the divisions has to be power of 2, got '%s'",
			               conf_peek(p));
		p->i++;
		if (is_rest) {
			for (int i = last + 1; i < 16; i++)
				div[i] = (uint32_t)v;
		} else {
			int idx = log2_u64(key);
			idx = idx > 15 ? 15 : idx;
			if (first)
				for (int i = 0; i < idx; i++)
					div[i] = (uint32_t)v;
			div[idx] = (uint32_t)v;
			last = idx;
		}
		first = 0;
		if (strcmp(conf_peek(p), ",") == 0) {
			p->i++;
			continue;
		}
		return conf_expect(p, "]", "roundup_power2_divisions");
	}
}

/* Sets the field of a key that affects the replay back to its default; 0 for other keys. */
static int reset_key(sim_config *cfg, const char *key)
{
	sim_config d;
	sim_config_default(&d);
	if (strcmp(key, "max_split_size_mb") == 0)
		cfg->max_split_size = d.max_split_size;
	else if (strcmp(key, "max_non_split_rounding_mb") == 0)
		cfg->max_non_split_rounding = d.max_non_split_rounding;
	else if (strcmp(key, "large_segment_size_mb") == 0)
		cfg->large_segment_size = d.large_segment_size;
	else if (strcmp(key, "garbage_collection_threshold") == 0)
		cfg->gc_threshold = d.gc_threshold;
	else if (strcmp(key, "expandable_segments") == 0)
		cfg->expandable_segments = d.expandable_segments;
	else if (strcmp(key, "roundup_power2_divisions") == 0)
		memcpy(cfg->roundup_divisions, d.roundup_divisions, sizeof d.roundup_divisions);
	else
		return 0;
	return 1;
}

mr_status sim_parse_conf(const char *conf, const sim_config *base, sim_config *out, mr_error *err)
{
	sim_config cfg;
	if (base)
		cfg = *base;
	else
		sim_config_default(&cfg);
	conf_tokens *t = malloc(sizeof *t);
	if (!t)
		return mr_oom(err);
	mr_status st = MR_OK;
	const char *trimmed = conf ? conf : "";
	while (isspace((unsigned char)*trimmed))
		trimmed++;
	if (strcmp(trimmed, "recorded") == 0)
		trimmed = "";
	if ((st = conf_lex(trimmed, t, err)))
		goto done;
	conf_parser p = {t, 0, err};
	while (p.i < t->count) {
		char key[48];
		snprintf(key, sizeof key, "%s", conf_peek(&p));
		p.i++;
		if ((st = conf_expect(&p, ":", key)))
			goto done;
		int flag = 0;
		uint64_t v;
		if (strcmp(conf_peek(&p), "default") == 0 && reset_key(&cfg, key)) {
			p.i++; /* key:default: back to PyTorch's default, as if it were not set */
		} else if (strcmp(key, "max_split_size_mb") == 0) {
			st = conf_mib(&p, key, 20, &cfg.max_split_size);
		} else if (strcmp(key, "max_non_split_rounding_mb") == 0) {
			st = conf_mib(&p, key, 20, &cfg.max_non_split_rounding);
		} else if (strcmp(key, "large_segment_size_mb") == 0) {
			st = conf_mib(&p, key, 2, &cfg.large_segment_size);
			if (!st && cfg.large_segment_size % K_ROUND_LARGE)
				st = mr_fail(err, MR_EINPUT,
				             "large_segment_size_mb must be a multiple of 2");
		} else if (strcmp(key, "garbage_collection_threshold") == 0) {
			char *end;
			double d = strtod(conf_peek(&p), &end);
			if (end == conf_peek(&p) || *end || !(d > 0.0 && d < 1.0)) {
				st = mr_fail(
				    err, MR_EINPUT,
				    "garbage_collect_threshold is invalid, set it in (0.0, 1.0)");
			} else {
				cfg.gc_threshold = d;
				p.i++;
			}
		} else if (strcmp(key, "expandable_segments") == 0) {
			st = conf_bool(&p, key, &flag);
			if (!st)
				cfg.expandable_segments = flag;
		} else if (strcmp(key, "roundup_power2_divisions") == 0) {
			memset(cfg.roundup_divisions, 0, sizeof cfg.roundup_divisions);
			st = conf_roundup(&p, cfg.roundup_divisions);
		} else if (strcmp(key, "backend") == 0) {
			if (strcmp(conf_peek(&p), "native") == 0)
				p.i++;
			else if (strcmp(conf_peek(&p), "cudaMallocAsync") == 0)
				st = mr_fail(
				    err, MR_EINPUT,
				    "backend:cudaMallocAsync is CUDA's own allocator, not the "
				    "caching allocator: it cannot be replayed");
			else
				st = mr_fail(err, MR_EINPUT, "Unknown allocator backend '%s'",
				             conf_peek(&p));
		} else if (strcmp(key, "per_process_memory_fraction") == 0) {
			st = mr_fail(
			    err, MR_EINPUT,
			    "per_process_memory_fraction needs the GPU's total memory, which a "
			    "snapshot does not record: give --limit SIZE instead");
		} else if (strcmp(key, "release_lock_on_cudamalloc") == 0 ||
		           strcmp(key, "release_lock_on_hipmalloc") == 0 ||
		           strcmp(key, "pinned_use_cuda_host_register") == 0 ||
		           strcmp(key, "pinned_use_hip_host_register") == 0 ||
		           strcmp(key, "pinned_use_background_threads") == 0 ||
		           strcmp(key, "graph_capture_record_stream_reuse") == 0) {
			st = conf_bool(&p, key, &flag); /* no effect on the device allocator */
		} else if (strcmp(key, "pinned_num_register_threads") == 0 ||
		           strcmp(key, "pinned_reserve_segment_size_mb") == 0) {
			if (parse_u64(conf_peek(&p), &v))
				st = mr_fail(err, MR_EINPUT, "Expected a number for %s, got '%s'",
				             key, conf_peek(&p));
			else
				p.i++;
		} else {
			st = mr_fail(err, MR_EINPUT,
			             "Unrecognized key '%s' in CUDA allocator config.", key);
		}
		if (st)
			goto done;
		if (p.i < t->count && (st = conf_expect(&p, ",", key)))
			goto done;
	}
	*out = cfg;
done:
	free(t);
	return st;
}

void sim_config_from_settings(const md_snapshot *s, sim_config *cfg)
{
	sim_config_default(cfg);
	const md_settings *set = &s->settings;
	if (!set->present)
		return;
	cfg->max_split_size = set->max_split_size ? set->max_split_size : UINT64_MAX;
	cfg->gc_threshold = set->gc_threshold > 0 && set->gc_threshold < 1 ? set->gc_threshold : 0;
	cfg->expandable_segments = set->expandable_segments != 0;
	memcpy(cfg->roundup_divisions, set->roundup_divisions, sizeof cfg->roundup_divisions);
	/* allocator_settings has no entry for these two: read them from the recorded string,
	 * ignoring whatever else it holds (it was valid for the PyTorch that read it). */
	const char *conf = md_str(s, set->conf);
	const char *keys[] = {"max_non_split_rounding_mb", "large_segment_size_mb"};
	for (size_t k = 0; k < 2; k++) {
		const char *at = strstr(conf, keys[k]);
		if (!at)
			continue;
		at += strlen(keys[k]);
		while (*at == ' ' || *at == ':')
			at++;
		char *end;
		unsigned long long mib = strtoull(at, &end, 10);
		if (end == at || mib == 0 || mib > UINT64_MAX / MR_MIB)
			continue;
		if (k == 0 && mib >= 20)
			cfg->max_non_split_rounding = mib * MR_MIB;
		else if (k == 1 && mib % 2 == 0)
			cfg->large_segment_size = mib * MR_MIB;
	}
}

void sim_config_format(const sim_config *cfg, mr_buf *out)
{
	sim_config d;
	sim_config_default(&d);
	const char *sep = "";
	if (cfg->expandable_segments) {
		mr_buf_printf(out, "%sexpandable_segments:True", sep);
		sep = ",";
	}
	if (cfg->max_split_size != d.max_split_size) {
		mr_buf_printf(out, "%smax_split_size_mb:%" PRIu64, sep,
		              cfg->max_split_size / MR_MIB);
		sep = ",";
	}
	if (cfg->max_non_split_rounding != d.max_non_split_rounding) {
		mr_buf_printf(out, "%smax_non_split_rounding_mb:%" PRIu64, sep,
		              cfg->max_non_split_rounding / MR_MIB);
		sep = ",";
	}
	if (cfg->large_segment_size != d.large_segment_size) {
		mr_buf_printf(out, "%slarge_segment_size_mb:%" PRIu64, sep,
		              cfg->large_segment_size / MR_MIB);
		sep = ",";
	}
	if (cfg->gc_threshold > 0) {
		mr_buf_printf(out, "%sgarbage_collection_threshold:%g", sep, cfg->gc_threshold);
		sep = ",";
	}
	int any = 0, same = 1;
	for (int i = 0; i < 16; i++) {
		any |= cfg->roundup_divisions[i] != 0;
		same &= cfg->roundup_divisions[i] == cfg->roundup_divisions[0];
	}
	if (any && same) {
		mr_buf_printf(out, "%sroundup_power2_divisions:%" PRIu32, sep,
		              cfg->roundup_divisions[0]);
	} else if (any) {
		mr_buf_printf(out, "%sroundup_power2_divisions:[", sep);
		for (int i = 0; i < 16; i++)
			mr_buf_printf(out, "%s%d:%" PRIu32, i ? "," : "", 1 << i,
			              cfg->roundup_divisions[i]);
		mr_buf_putc(out, ']');
	}
}

uint64_t sim_round_divisions(const uint32_t divisions[16], uint64_t size)
{
	if (size < K_MIN_BLOCK)
		return K_MIN_BLOCK;
	uint32_t div = 0;
	if (divisions) {
		int log2 = 63 - __builtin_clzll(size);
		int idx = log2 - 20;
		idx = idx < 0 ? 0 : idx > 15 ? 15 : idx;
		div = divisions[idx];
	}
	if (div > 1 && size > K_MIN_BLOCK * div) {
		uint64_t floor = (uint64_t)1 << (63 - __builtin_clzll(size));
		if (floor == size)
			return size;
		int shift = __builtin_ctz(div);
		uint64_t step = floor >> shift;
		if (step == 0)
			return floor * 2;
		return (size + step - 1) / step * step;
	}
	return (size + K_MIN_BLOCK - 1) / K_MIN_BLOCK * K_MIN_BLOCK;
}

uint64_t sim_round_size(const sim_config *cfg, uint64_t size)
{
	return sim_round_divisions(cfg->roundup_divisions, size);
}

uint64_t sim_allocation_size(const sim_config *cfg, uint64_t rounded)
{
	if (rounded <= K_SMALL_SIZE)
		return K_SMALL_BUFFER;
	if (rounded < K_MIN_LARGE_ALLOC)
		return cfg->large_segment_size;
	return (rounded + K_ROUND_LARGE - 1) / K_ROUND_LARGE * K_ROUND_LARGE;
}
