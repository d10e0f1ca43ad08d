/* sim.c: the caching-allocator replay (see sim.h and reference §3). */
#include "sim/sim.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "base/addrmap.h"
#include "base/buf.h"
#include "base/error.h"
#include "base/escape.h"
#include "base/mem.h"
#include "base/units.h"

/* ---- constants of c10/core/AllocatorConfig.h ---- */

#define K_MIN_BLOCK ((uint64_t)512)
#define K_SMALL_SIZE ((uint64_t)1048576)
#define K_SMALL_BUFFER ((uint64_t)2097152)
#define K_LARGE_BUFFER ((uint64_t)20971520)
#define K_MIN_LARGE_ALLOC ((uint64_t)10485760)
#define K_ROUND_LARGE ((uint64_t)2097152)
/* Virtual addresses reserved per expandable segment: PyTorch reserves 1.125 x the GPU's
 * memory, which a snapshot does not record; 1 TiB is more than any GPU has. */
#define EXPANDABLE_VA ((uint64_t)1 << 40)
/* Addresses of segments the recording did not have: far above any real one. */
#define SYNTHETIC_VA_BASE ((uint64_t)1 << 60)

/* ---- configuration ---- */

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
		if (strcmp(key, "max_split_size_mb") == 0) {
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

uint64_t sim_round_size(const sim_config *cfg, uint64_t size)
{
	md_settings rounding;
	memset(&rounding, 0, sizeof rounding);
	memcpy(rounding.roundup_divisions, cfg->roundup_divisions,
	       sizeof rounding.roundup_divisions);
	return an_round_size(&rounding, size);
}

uint64_t sim_allocation_size(const sim_config *cfg, uint64_t rounded)
{
	if (rounded <= K_SMALL_SIZE)
		return K_SMALL_BUFFER;
	if (rounded < K_MIN_LARGE_ALLOC)
		return cfg->large_segment_size;
	return (rounded + K_ROUND_LARGE - 1) / K_ROUND_LARGE * K_ROUND_LARGE;
}

/* ---- the engine's state ---- */

#define NIL UINT32_MAX
#define SL_LEVELS 12

enum { B_FREE, B_ALLOCATED, B_PENDING, B_UNMAPPED, B_DEAD };

typedef struct {
	uint64_t addr, size;
	uint64_t stream;     /* raw cudaStream_t: the order of the free sets */
	uint64_t trace_addr; /* address in the recording of the request it serves */
	int64_t gc_base;     /* pool search count when it was cached */
	uint32_t prev, next; /* neighbours in its segment */
	uint32_t seg, pool;
	uint32_t pending_pos;
	uint32_t fwd[SL_LEVELS];          /* skip-list links while in a set */
	uint8_t state, level, mapped_key; /* mapped_key: trace_addr is in the address map */
	uint8_t in_set;                   /* linked into a free/unmapped set */
} sim_block;

typedef struct {
	uint32_t head;  /* a sentinel block of SL_LEVELS levels */
	int by_address; /* key (stream, address) instead of (stream, size, address) */
	int level;
} sk_set;

typedef struct {
	uint64_t addr, size; /* for expandable segments: the reserved address range */
	uint64_t page;       /* expandable: page size */
	uint32_t pool;
	uint8_t expandable, live;
} sim_segment;

typedef struct {
	uint64_t pool_id[2];
	int small;
	int is_private;
	sk_set blocks, unmapped;
	int64_t search_count; /* get_free_blocks_call_count, for garbage collection */
} sim_pool;

/* trace address -> block index (or MAP_FAILED for a request that failed in the replay) */
#define MAP_FAILED (NIL - 1)

/* A live recorded segment: which pool its blocks belong to (private pools of CUDA graphs). */
typedef struct {
	uint64_t addr, size;
	uint64_t pool_id[2];
} rec_segment;

typedef struct {
	const md_snapshot *s;
	const md_device *md;
	sim_config cfg;
	md_settings rounding;
	uint64_t limit;
	sim_result *out;
	mr_error *err;
	int nomem;

	sim_block *blocks;
	size_t block_count, block_cap;
	uint32_t free_blocks; /* recycled indices, chained through .next */
	sim_segment *segs;
	size_t seg_count, seg_cap;
	sim_pool *pools;
	size_t pool_count, pool_cap;
	uint32_t *pending;
	size_t pending_count, pending_cap;
	am_map live;
	uint64_t rng;
	uint64_t synthetic_va;

	uint64_t allocated, reserved, active;
	size_t cur_event;

	/* validation against the recording */
	size_t *rec_seg; /* indices of the recorded segment events */
	size_t rec_seg_count, rec_cursor;
	int lockstep; /* decisions identical so far: use the recorded addresses */
	int track_pools;
	rec_segment *rec_live;
	size_t rec_live_count, rec_live_cap;
	size_t sizes_cap;
	size_t bound; /* recorded segment events before this index belong to the current step */
	am_map last_seg_alloc;     /* address -> number of its last recorded segment_alloc */
	uint32_t rec_cursor_alloc; /* number of the recorded segment_alloc being replayed */
} engine;

/* ---- blocks ---- */

static uint32_t block_new(engine *e)
{
	uint32_t i;
	if (e->free_blocks != NIL) {
		i = e->free_blocks;
		e->free_blocks = e->blocks[i].next;
	} else {
		if (e->block_count >= NIL - 2 ||
		    MR_GROW(e->blocks, e->block_cap, e->block_count + 1)) {
			e->nomem = 1;
			return NIL;
		}
		i = (uint32_t)e->block_count++;
	}
	sim_block *b = &e->blocks[i];
	memset(b, 0, sizeof *b);
	b->prev = b->next = b->seg = b->pool = b->pending_pos = NIL;
	return i;
}

static void block_release(engine *e, uint32_t i)
{
	e->blocks[i].state = B_DEAD;
	e->blocks[i].next = e->free_blocks;
	e->free_blocks = i;
}

/* ---- ordered sets: skip lists over block indices ---- */

typedef struct {
	uint64_t a, b, c;
} sk_key;

static sk_key key_of(const sk_set *set, const sim_block *b)
{
	sk_key k = {b->stream, set->by_address ? b->addr : b->size, set->by_address ? 0 : b->addr};
	return k;
}

static int key_less(sk_key x, sk_key y)
{
	if (x.a != y.a)
		return x.a < y.a;
	if (x.b != y.b)
		return x.b < y.b;
	return x.c < y.c;
}

static int sk_init(engine *e, sk_set *set, int by_address)
{
	set->head = block_new(e);
	if (set->head == NIL)
		return -1;
	sim_block *h = &e->blocks[set->head];
	for (int l = 0; l < SL_LEVELS; l++)
		h->fwd[l] = NIL;
	h->level = SL_LEVELS;
	set->by_address = by_address;
	set->level = 1;
	return 0;
}

/* Fills update[l] with the last node at level l whose key is below k. */
static void sk_search(const engine *e, const sk_set *set, sk_key k, uint32_t update[SL_LEVELS])
{
	uint32_t x = set->head;
	for (int l = set->level - 1; l >= 0; l--) {
		uint32_t nx;
		while ((nx = e->blocks[x].fwd[l]) != NIL &&
		       key_less(key_of(set, &e->blocks[nx]), k))
			x = nx;
		update[l] = x;
	}
	for (int l = set->level; l < SL_LEVELS; l++)
		update[l] = set->head;
}

static int random_level(engine *e)
{
	int level = 1;
	while (level < SL_LEVELS) {
		e->rng ^= e->rng << 13;
		e->rng ^= e->rng >> 7;
		e->rng ^= e->rng << 17;
		if (e->rng & 3) /* p = 1/4 */
			break;
		level++;
	}
	return level;
}

static void sk_erase(engine *e, sk_set *set, uint32_t i);

/* A block is in at most one set, once: a trace that contradicts itself (hostile, or spliced)
 * must not link a block twice, which would make a cycle and hang every later search. */
static void sk_insert(engine *e, sk_set *set, uint32_t i)
{
	uint32_t update[SL_LEVELS];
	if (e->blocks[i].in_set)
		return;
	sk_search(e, set, key_of(set, &e->blocks[i]), update);
	int level = random_level(e);
	if (level > set->level)
		set->level = level;
	sim_block *b = &e->blocks[i];
	b->level = (uint8_t)level;
	for (int l = 0; l < level; l++) {
		b->fwd[l] = e->blocks[update[l]].fwd[l];
		e->blocks[update[l]].fwd[l] = i;
	}
	b->in_set = 1;
}

static void sk_erase(engine *e, sk_set *set, uint32_t i)
{
	uint32_t update[SL_LEVELS];
	sim_block *b = &e->blocks[i];
	if (!b->in_set)
		return;
	sk_search(e, set, key_of(set, b), update);
	for (int l = 0; l < b->level; l++) {
		uint32_t p = update[l];
		/* The key may have changed while linked (a contradictory trace): find the
		 * predecessor by walking the level instead of trusting the search. */
		if (e->blocks[p].fwd[l] != i)
			for (p = set->head; p != NIL && e->blocks[p].fwd[l] != i;
			     p = e->blocks[p].fwd[l])
				;
		if (p != NIL)
			e->blocks[p].fwd[l] = b->fwd[l];
	}
	b->in_set = 0;
	while (set->level > 1 && e->blocks[set->head].fwd[set->level - 1] == NIL)
		set->level--;
}

/* First node with key >= k, or NIL. */
static uint32_t sk_lower_bound(const engine *e, const sk_set *set, sk_key k)
{
	uint32_t update[SL_LEVELS];
	sk_search(e, set, k, update);
	return e->blocks[update[0]].fwd[0];
}

/* Last node with key < k, or NIL. */
static uint32_t sk_before(const engine *e, const sk_set *set, sk_key k)
{
	uint32_t update[SL_LEVELS];
	sk_search(e, set, k, update);
	return update[0] == set->head ? NIL : update[0];
}

static uint32_t sk_first(const engine *e, const sk_set *set)
{
	return e->blocks[set->head].fwd[0];
}

/* ---- trace address map ---- */

/* The trace's address of a block -> the simulated block, or NIL. */
static uint32_t map_get(const am_map *m, uint64_t addr)
{
	uint64_t v;
	return am_get(m, addr, &v) ? (uint32_t)v : NIL;
}

static void map_del(am_map *m, uint64_t addr)
{
	uint64_t v;
	am_take(m, addr, &v);
}

/* ---- validation ---- */

static void diverge(engine *e, size_t event, const char *what, const char *expected,
                    const char *got)
{
	e->lockstep = 0;
	sim_divergence *d = &e->out->first_divergence;
	if (d->present)
		return;
	d->present = 1;
	d->event_index = event;
	snprintf(d->what, sizeof d->what, "%s", what);
	snprintf(d->expected, sizeof d->expected, "%s", expected);
	snprintf(d->got, sizeof d->got, "%s", got);
}

static const char *seg_action_name(int action)
{
	return md_action_name((md_action)action);
}

/* The next recorded segment event, if the replay still follows the recording and it comes
 * before the request being replayed. */
static const md_event *rec_next_segment(const engine *e)
{
	if (!e->lockstep || e->rec_cursor >= e->rec_seg_count)
		return NULL;
	size_t idx = e->rec_seg[e->rec_cursor];
	if (idx >= e->bound)
		return NULL;
	return &e->md->events[idx];
}

/* Every segment event of the replay is compared with the recording's next one. */
static void emit_segment(engine *e, int action, uint64_t addr, uint64_t size)
{
	if (!e->lockstep)
		return;
	const md_event *r = rec_next_segment(e);
	char want[96], got[96];
	snprintf(got, sizeof got, "%s of %" PRIu64 " bytes at 0x%" PRIx64, seg_action_name(action),
	         size, addr);
	if (!r) {
		diverge(e, e->cur_event, seg_action_name(action), "no segment event here", got);
		return;
	}
	if (r->action != action || r->size != size || r->addr != addr) {
		snprintf(want, sizeof want, "%s of %" PRIu64 " bytes at 0x%" PRIx64,
		         seg_action_name(r->action), r->size, r->addr);
		diverge(e, e->rec_seg[e->rec_cursor], seg_action_name(r->action), want, got);
		return;
	}
	e->rec_cursor++;
}

/* ---- levels ---- */

static void note_allocated(engine *e)
{
	if (e->allocated > e->out->peak_allocated) {
		e->out->peak_allocated = e->allocated;
		e->out->peak_allocated_event = e->cur_event;
	}
}

static int note_device_alloc(engine *e, uint64_t size)
{
	sim_result *r = e->out;
	e->reserved += size;
	if (e->reserved > r->peak_reserved) {
		r->peak_reserved = e->reserved;
		r->peak_reserved_event = e->cur_event;
	}
	if (MR_GROW(r->segment_sizes, e->sizes_cap, r->segment_size_count + 1)) {
		e->nomem = 1;
		return -1;
	}
	r->segment_sizes[r->segment_size_count++] = size;
	r->segments_allocated++;
	return 0;
}

static void note_device_free(engine *e, uint64_t size)
{
	e->reserved -= size;
	e->out->segments_released++;
}

/* ---- pools and segments ---- */

static uint32_t pool_find(engine *e, const uint64_t pool_id[2], int small)
{
	for (size_t i = 0; i < e->pool_count; i++)
		if (e->pools[i].pool_id[0] == pool_id[0] && e->pools[i].pool_id[1] == pool_id[1] &&
		    e->pools[i].small == small)
			return (uint32_t)i;
	if (MR_GROW(e->pools, e->pool_cap, e->pool_count + 1)) {
		e->nomem = 1;
		return NIL;
	}
	sim_pool *p = &e->pools[e->pool_count];
	memset(p, 0, sizeof *p);
	p->pool_id[0] = pool_id[0];
	p->pool_id[1] = pool_id[1];
	p->small = small;
	p->is_private = pool_id[0] || pool_id[1];
	if (sk_init(e, &p->blocks, 0) || sk_init(e, &p->unmapped, 1))
		return NIL;
	return (uint32_t)e->pool_count++;
}

static uint32_t seg_new(engine *e, uint64_t addr, uint64_t size, uint32_t pool, int expandable,
                        uint64_t page)
{
	if (MR_GROW(e->segs, e->seg_cap, e->seg_count + 1)) {
		e->nomem = 1;
		return NIL;
	}
	sim_segment *sg = &e->segs[e->seg_count];
	sg->addr = addr;
	sg->size = size;
	sg->page = page;
	sg->pool = pool;
	sg->expandable = (uint8_t)(expandable != 0);
	sg->live = 1;
	return (uint32_t)e->seg_count++;
}

static uint64_t synthetic_address(engine *e, uint64_t size)
{
	uint64_t a = e->synthetic_va;
	e->synthetic_va +=
	    (size + K_ROUND_LARGE - 1) / K_ROUND_LARGE * K_ROUND_LARGE + K_ROUND_LARGE;
	return a;
}

static int block_expandable(const engine *e, uint32_t i)
{
	return e->segs[e->blocks[i].seg].expandable;
}

static int block_split(const engine *e, uint32_t i)
{
	return e->blocks[i].prev != NIL || e->blocks[i].next != NIL;
}

/* A new block at [addr, addr + size) of segment seg; NIL when out of memory. */
static uint32_t block_make(engine *e, uint64_t addr, uint64_t size, uint64_t stream, uint32_t seg,
                           uint8_t state)
{
	uint32_t i = block_new(e);
	if (i == NIL)
		return NIL;
	sim_block *b = &e->blocks[i];
	b->addr = addr;
	b->size = size;
	b->stream = stream;
	b->seg = seg;
	b->pool = e->segs[seg].pool;
	b->state = state;
	return i;
}

/* Links block i just before block at (which is in the same segment). */
static void link_before(engine *e, uint32_t i, uint32_t at)
{
	sim_block *b = &e->blocks[i], *a = &e->blocks[at];
	b->prev = a->prev;
	b->next = at;
	if (a->prev != NIL)
		e->blocks[a->prev].next = i;
	a->prev = i;
}

static void link_after(engine *e, uint32_t i, uint32_t at)
{
	sim_block *b = &e->blocks[i], *a = &e->blocks[at];
	b->next = a->next;
	b->prev = at;
	if (a->next != NIL)
		e->blocks[a->next].prev = i;
	a->next = i;
}

static void cache_block(engine *e, uint32_t i)
{
	sim_pool *p = &e->pools[e->blocks[i].pool];
	e->blocks[i].state = B_FREE;
	e->blocks[i].gc_base = p->search_count;
	sk_insert(e, &p->blocks, i);
}

/* try_merge_blocks: joins src into dst when both are free (or both unmapped). */
static void try_merge(engine *e, uint32_t dst, uint32_t src)
{
	if (src == NIL)
		return;
	sim_block *d = &e->blocks[dst], *s = &e->blocks[src];
	int mapped = d->state != B_UNMAPPED;
	if (mapped ? s->state != B_FREE : s->state != B_UNMAPPED)
		return;
	sim_pool *p = &e->pools[s->pool];
	sk_erase(e, s->state == B_FREE ? &p->blocks : &p->unmapped, src);
	if (d->prev == src) {
		d->addr = s->addr;
		d->prev = s->prev;
		if (d->prev != NIL)
			e->blocks[d->prev].next = dst;
	} else {
		d->next = s->next;
		if (d->next != NIL)
			e->blocks[d->next].prev = dst;
	}
	d->size += s->size;
	block_release(e, src);
}

/* free_block: a block whose use is over goes back to its pool, merged with free neighbours. */
static void free_block(engine *e, uint32_t i)
{
	sim_block *b = &e->blocks[i];
	uint32_t prev = b->prev, next = b->next;
	e->active -= b->size;
	b->state = B_FREE;
	try_merge(e, i, prev);
	try_merge(e, i, next);
	cache_block(e, i);
}

static void pending_add(engine *e, uint32_t i)
{
	if (MR_GROW(e->pending, e->pending_cap, e->pending_count + 1)) {
		e->nomem = 1;
		return;
	}
	e->blocks[i].pending_pos = (uint32_t)e->pending_count;
	e->pending[e->pending_count++] = i;
}

static void pending_remove(engine *e, uint32_t i)
{
	uint32_t pos = e->blocks[i].pending_pos;
	uint32_t last = e->pending[--e->pending_count];
	e->pending[pos] = last;
	e->blocks[last].pending_pos = pos;
	e->blocks[i].pending_pos = NIL;
}

static void complete_pending(engine *e, uint32_t i)
{
	pending_remove(e, i);
	if (e->blocks[i].mapped_key)
		map_del(&e->live, e->blocks[i].trace_addr);
	e->blocks[i].mapped_key = 0;
	free_block(e, i);
}

/* ---- releasing memory ---- */

/* release_block: cudaFree of a free, unsplit, non-expandable segment. */
static void release_block(engine *e, uint32_t i)
{
	sim_block *b = &e->blocks[i];
	uint64_t addr = b->addr, size = b->size;
	sk_erase(e, &e->pools[b->pool].blocks, i);
	e->segs[b->seg].live = 0;
	block_release(e, i);
	note_device_free(e, size);
	emit_segment(e, MD_ACT_SEGMENT_FREE, addr, size);
}

/* unmap_block: unmaps the whole pages inside a free expandable block. */
static void unmap_block(engine *e, uint32_t i)
{
	sim_block *b = &e->blocks[i];
	const sim_segment *sg = &e->segs[b->seg];
	uint64_t page = sg->page, base = sg->addr;
	uint64_t off = b->addr - base, end = off + b->size;
	uint64_t first = (off + page - 1) / page * page, last = end / page * page;
	if (first >= last)
		return;
	sk_erase(e, &e->pools[b->pool].blocks, i);
	if (first > off) {
		uint32_t nb = block_make(e, b->addr, first - off, b->stream, b->seg, B_FREE);
		if (nb == NIL)
			return;
		link_before(e, nb, i);
		cache_block(e, nb);
	}
	b = &e->blocks[i];
	if (end > last) {
		uint32_t na = block_make(e, base + last, end - last, b->stream, b->seg, B_FREE);
		if (na == NIL)
			return;
		link_after(e, na, i);
		cache_block(e, na);
	}
	b = &e->blocks[i];
	b->addr = base + first;
	b->size = last - first;
	b->state = B_UNMAPPED;
	uint64_t addr = b->addr, size = b->size;
	uint32_t prev = b->prev, next = b->next;
	try_merge(e, i, prev);
	try_merge(e, i, next);
	sk_insert(e, &e->pools[e->blocks[i].pool].unmapped, i);
	note_device_free(e, size);
	emit_segment(e, MD_ACT_SEGMENT_UNMAP, addr, size);
}

static int releasable(const engine *e, uint32_t i)
{
	return !block_split(e, i) && !block_expandable(e, i);
}

/* release_blocks: frees every whole free segment of a pool, unmaps free expandable pages. */
static void release_blocks(engine *e, uint32_t pool, uint32_t **scratch, size_t *scratch_cap)
{
	size_t n = 0;
	for (uint32_t it = sk_first(e, &e->pools[pool].blocks); it != NIL;) {
		uint32_t nx = e->blocks[it].fwd[0];
		if (block_expandable(e, it)) {
			if (MR_GROW(*scratch, *scratch_cap, n + 1)) {
				e->nomem = 1;
				return;
			}
			(*scratch)[n++] = it;
		} else if (!block_split(e, it)) {
			release_block(e, it);
		}
		it = nx;
	}
	for (size_t k = 0; k < n; k++) {
		uint32_t i = (*scratch)[k];
		unmap_block(e, i);
		if (e->nomem)
			return;
		sim_block *b = &e->blocks[i];
		if (b->state == B_UNMAPPED && b->prev == NIL && b->next == NIL) {
			sk_erase(e, &e->pools[b->pool].unmapped, i);
			e->segs[b->seg].live = 0;
			block_release(e, i);
		}
	}
}

/* release_cached_blocks: waits for pending frees, then releases both default pools. Private
 * pools are kept: when their graphs die is not in the trace. */
static void release_cached_blocks(engine *e)
{
	while (e->pending_count)
		complete_pending(e, e->pending[e->pending_count - 1]);
	uint32_t *scratch = NULL;
	size_t cap = 0;
	release_blocks(e, 1, &scratch, &cap);
	release_blocks(e, 0, &scratch, &cap);
	free(scratch);
}

/* release_available_cached_blocks: with max_split_size set, frees oversize cached blocks. */
static int release_available(engine *e, uint32_t pool, uint64_t size, uint64_t stream)
{
	uint64_t max_split = e->cfg.max_split_size;
	if (max_split == UINT64_MAX)
		return 0;
	sk_set *set = &e->pools[pool].blocks;
	sk_key key = {stream, size < max_split ? max_split : size, 0};
	uint32_t it = sk_lower_bound(e, set, key);
	if (it != NIL && e->blocks[it].stream == stream) {
		if (!releasable(e, it))
			return 0;
		release_block(e, it);
		return 1;
	}
	uint64_t total = 0;
	uint32_t cur = sk_before(e, set, key);
	while (total < key.b && cur != NIL && e->blocks[cur].size >= max_split &&
	       e->blocks[cur].stream == stream && releasable(e, cur)) {
		uint32_t prev = sk_before(e, set, key_of(set, &e->blocks[cur]));
		total += e->blocks[cur].size;
		release_block(e, cur);
		cur = prev;
	}
	return total >= key.b;
}

/* garbage_collect_cached_blocks: frees old whole blocks of the default large pool until
 * reserved memory is back under threshold x limit. */
static void garbage_collect(engine *e)
{
	uint64_t threshold = (uint64_t)(e->cfg.gc_threshold * (double)e->limit);
	if (e->reserved <= threshold)
		return;
	uint64_t target = e->reserved - threshold, reclaimed = 0;
	sim_pool *p = &e->pools[1];
	uint64_t total_age = 0, count = 0;
	for (uint32_t it = sk_first(e, &p->blocks); it != NIL; it = e->blocks[it].fwd[0])
		if (releasable(e, it)) {
			total_age += (uint64_t)(p->search_count - e->blocks[it].gc_base);
			count++;
		}
	int freed = 1;
	while (reclaimed < target && freed && count > 0) {
		double age_threshold = (double)total_age / (double)count;
		freed = 0;
		for (uint32_t it = sk_first(e, &p->blocks); it != NIL;) {
			uint32_t nx = e->blocks[it].fwd[0];
			uint64_t age = (uint64_t)(p->search_count - e->blocks[it].gc_base);
			if (releasable(e, it) && (double)age >= age_threshold) {
				freed = 1;
				reclaimed += e->blocks[it].size;
				total_age -= age;
				count--;
				release_block(e, it);
			}
			it = nx;
		}
	}
}

/* ---- allocating ---- */

static uint64_t expandable_size(const engine *e, uint32_t i)
{
	const sim_block *b = &e->blocks[i];
	if (b->next != NIL && e->blocks[b->next].state == B_UNMAPPED)
		return b->size + e->blocks[b->next].size;
	return b->size;
}

/* get_free_block: best fit by (stream, size, address), with PyTorch's exclusions. */
static uint32_t get_free_block(engine *e, uint32_t pool, uint64_t size, uint64_t stream)
{
	sim_pool *p = &e->pools[pool];
	if (e->limit && e->cfg.gc_threshold > 0)
		p->search_count++;
	sk_key key = {stream, size, 0};
	uint32_t it = sk_lower_bound(e, &p->blocks, key);
	if (it == NIL || e->blocks[it].stream != stream)
		return NIL;
	if (block_expandable(e, it)) {
		if (e->cfg.expandable_segments) {
			/* best fit counts the unmapped room behind a block */
			uint32_t nx = e->blocks[it].fwd[0];
			while (block_expandable(e, it) && nx != NIL &&
			       e->blocks[nx].stream == stream &&
			       expandable_size(e, nx) < expandable_size(e, it)) {
				it = nx;
				nx = e->blocks[nx].fwd[0];
			}
		} else {
			do
				it = e->blocks[it].fwd[0];
			while (it != NIL && block_expandable(e, it) &&
			       e->blocks[it].stream == stream);
			if (it == NIL || e->blocks[it].stream != stream)
				return NIL;
		}
	}
	uint64_t max_split = e->cfg.max_split_size, bsize = e->blocks[it].size;
	if (size < max_split && bsize >= max_split)
		return NIL; /* small requests never take oversize blocks */
	if (size >= max_split && bsize >= size + e->cfg.max_non_split_rounding)
		return NIL; /* an oversize block may be only a little larger */
	sk_erase(e, &p->blocks, it);
	return it;
}

static int allocatable(const engine *e, uint32_t i)
{
	return i != NIL && (e->blocks[i].state == B_FREE || e->blocks[i].state == B_UNMAPPED);
}

/* Whether addr lies in the address range of a live expandable segment of the pool (the
 * model's ranges are larger than PyTorch's, whose size depends on the GPU). */
static int address_in_expandable(const engine *e, uint32_t pool, uint64_t addr)
{
	for (size_t k = 0; k < e->seg_count; k++) {
		const sim_segment *sg = &e->segs[k];
		if (sg->live && sg->expandable && sg->pool == pool && addr >= sg->addr &&
		    addr - sg->addr < sg->size)
			return 1;
	}
	return 0;
}

/* find_expandable_block: the lowest-address run of free and unmapped blocks with room for
 * size, or a new expandable segment. */
static uint32_t find_expandable_block(engine *e, uint32_t pool, uint64_t size, uint64_t stream)
{
	sk_key key = {stream, 0, 0};
	for (uint32_t it = sk_lower_bound(e, &e->pools[pool].unmapped, key);
	     it != NIL && e->blocks[it].stream == stream; it = e->blocks[it].fwd[0]) {
		uint32_t c = it;
		if (allocatable(e, e->blocks[c].prev))
			c = e->blocks[c].prev;
		uint64_t bytes = 0;
		for (uint32_t w = c; bytes < size && allocatable(e, w); w = e->blocks[w].next)
			bytes += e->blocks[w].size;
		if (bytes >= size)
			return c;
	}
	uint64_t page = e->pools[pool].small ? K_SMALL_BUFFER : e->cfg.large_segment_size;
	uint64_t va = (EXPANDABLE_VA + page - 1) / page * page;
	const md_event *r = rec_next_segment(e);
	uint64_t base =
	    r && r->action == MD_ACT_SEGMENT_MAP && !address_in_expandable(e, pool, r->addr)
	        ? r->addr
	        : synthetic_address(e, va);
	uint32_t seg = seg_new(e, base, va, pool, 1, page);
	if (seg == NIL)
		return NIL;
	uint32_t b = block_make(e, base, va, stream, seg, B_UNMAPPED);
	if (b == NIL)
		return NIL;
	sk_insert(e, &e->pools[pool].unmapped, b);
	return b;
}

/* map_block: maps whole pages at the start of an unmapped block. */
static void map_block(engine *e, uint32_t i, uint64_t size)
{
	sim_block *b = &e->blocks[i];
	uint64_t page = e->segs[b->seg].page;
	uint64_t mapped = (size + page - 1) / page * page;
	if (mapped > b->size)
		mapped = b->size;
	sk_erase(e, &e->pools[b->pool].unmapped, i);
	b->state = B_FREE;
	if (mapped < b->size) {
		uint32_t r = block_make(e, b->addr + mapped, b->size - mapped, b->stream, b->seg,
		                        B_UNMAPPED);
		if (r == NIL)
			return;
		link_after(e, r, i);
		sk_insert(e, &e->pools[e->blocks[r].pool].unmapped, r);
		e->blocks[i].size = mapped;
	}
	uint64_t addr = e->blocks[i].addr;
	uint32_t prev = e->blocks[i].prev, next = e->blocks[i].next;
	try_merge(e, i, prev);
	try_merge(e, i, next);
	cache_block(e, i);
	if (note_device_alloc(e, mapped))
		return;
	emit_segment(e, MD_ACT_SEGMENT_MAP, addr, mapped);
}

static uint32_t try_allocate_expandable(engine *e, uint32_t pool, uint64_t size, uint64_t stream)
{
	uint32_t c = find_expandable_block(e, pool, size, stream);
	if (c == NIL)
		return NIL;
	if (e->blocks[c].state == B_UNMAPPED)
		map_block(e, c, MR_MIN(e->blocks[c].size, size));
	while (!e->nomem && e->blocks[c].size < size) {
		uint32_t nc = e->blocks[c].next;
		if (nc == NIL || e->blocks[nc].state != B_UNMAPPED)
			return NIL; /* cannot happen: find_expandable_block checked the room */
		map_block(e, nc, MR_MIN(size - e->blocks[c].size, e->blocks[nc].size));
		c = nc;
	}
	if (e->nomem)
		return NIL;
	sk_erase(e, &e->pools[pool].blocks, c);
	return c;
}

/* alloc_block: a new segment (or mapped pages), unless it would pass the limit. */
static uint32_t alloc_block(engine *e, uint32_t pool, uint64_t size, uint64_t alloc_size,
                            uint64_t stream)
{
	if (e->limit && e->reserved + alloc_size > e->limit)
		return NIL;
	if (e->cfg.expandable_segments && !e->pools[pool].is_private)
		return try_allocate_expandable(e, pool, size, stream);
	const md_event *r = rec_next_segment(e);
	uint64_t addr = r && r->action == MD_ACT_SEGMENT_ALLOC && r->size == alloc_size
	                    ? r->addr
	                    : synthetic_address(e, alloc_size);
	uint32_t seg = seg_new(e, addr, alloc_size, pool, 0, 0);
	if (seg == NIL)
		return NIL;
	uint32_t b = block_make(e, addr, alloc_size, stream, seg, B_FREE);
	if (b == NIL || note_device_alloc(e, alloc_size))
		return NIL;
	emit_segment(e, MD_ACT_SEGMENT_ALLOC, addr, alloc_size);
	return b;
}

/* DeviceCachingAllocator::malloc. Returns the block, or NIL when the request fails (OOM, or
 * e->nomem). *alloc_size receives the cudaMalloc size the request needed. */
static uint32_t sim_malloc(engine *e, uint64_t orig_size, uint64_t stream,
                           const uint64_t pool_id[2], uint64_t *alloc_size_out)
{
	uint64_t size = sim_round_size(&e->cfg, orig_size);
	uint32_t pool = pool_find(e, pool_id, size <= K_SMALL_SIZE);
	if (pool == NIL)
		return NIL;
	uint64_t alloc_size = sim_allocation_size(&e->cfg, size);
	*alloc_size_out = alloc_size;
	uint32_t b = get_free_block(e, pool, size, stream);
	if (b == NIL) {
		if (e->limit && e->cfg.gc_threshold > 0)
			garbage_collect(e);
		b = alloc_block(e, pool, size, alloc_size, stream);
		if (b == NIL && !e->nomem && release_available(e, pool, size, stream))
			b = alloc_block(e, pool, size, alloc_size, stream);
		if (b == NIL && !e->nomem) {
			release_cached_blocks(e);
			if (!e->nomem)
				b = alloc_block(e, pool, size, alloc_size, stream);
		}
	}
	if (b == NIL || e->nomem)
		return NIL;
	sim_block *blk = &e->blocks[b];
	uint64_t remaining = blk->size - size;
	int split = e->pools[pool].small || e->cfg.expandable_segments
	                ? remaining >= K_MIN_BLOCK
	                : size < e->cfg.max_split_size && remaining > K_SMALL_SIZE;
	if (split) {
		uint32_t nb = block_make(e, blk->addr, size, blk->stream, blk->seg, B_ALLOCATED);
		if (nb == NIL)
			return NIL;
		link_before(e, nb, b);
		e->blocks[b].addr += size;
		e->blocks[b].size -= size;
		cache_block(e, b);
		b = nb;
	}
	blk = &e->blocks[b];
	blk->state = B_ALLOCATED;
	e->allocated += blk->size;
	e->active += blk->size;
	note_allocated(e);
	return b;
}

/* ---- the state before the first event (a trace that starts mid-run) ---- */

typedef struct {
	uint64_t addr, size, stream;
	uint64_t pool_id[2];
	uint8_t small, expandable;
} init_seg;

typedef struct {
	uint64_t addr, size, requested, stream;
	uint8_t state; /* B_ALLOCATED or B_PENDING */
	uint8_t known; /* size from the snapshot, not estimated */
} init_block;

typedef struct {
	init_seg *segs;
	size_t count, cap;
} seg_list;

static uint64_t stream_raw(const md_snapshot *s, uint8_t idx)
{
	return idx < s->stream_count ? s->streams[idx] : idx;
}

/* First entry with address >= addr. */
static size_t seg_lower(const seg_list *l, uint64_t addr)
{
	size_t lo = 0, hi = l->count;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (l->segs[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int seg_insert(seg_list *l, const init_seg *sg)
{
	if (MR_GROW(l->segs, l->cap, l->count + 1))
		return -1;
	size_t at = seg_lower(l, sg->addr);
	memmove(l->segs + at + 1, l->segs + at, (l->count - at) * sizeof *l->segs);
	l->segs[at] = *sg;
	l->count++;
	return 0;
}

static void seg_remove_at(seg_list *l, size_t at)
{
	memmove(l->segs + at, l->segs + at + 1, (l->count - at - 1) * sizeof *l->segs);
	l->count--;
}

/* Undoing a segment_map: the range was not mapped before it. */
static int range_subtract(seg_list *l, uint64_t a, uint64_t size)
{
	uint64_t b = a + size;
	for (size_t k = 0; k < l->count;) {
		init_seg *sg = &l->segs[k];
		uint64_t x = sg->addr, y = sg->addr + sg->size;
		if (!sg->expandable || y <= a || x >= b) {
			k++;
			continue;
		}
		if (a <= x && y <= b) {
			seg_remove_at(l, k);
			continue;
		}
		if (x < a && y > b) { /* a hole in the middle */
			init_seg tail = *sg;
			tail.addr = b;
			tail.size = y - b;
			sg->size = a - x;
			return seg_insert(l, &tail);
		}
		if (x < a)
			sg->size = a - x;
		else {
			sg->addr = b;
			sg->size = y - b;
		}
		k++;
	}
	return 0;
}

/* Undoing a segment_unmap: the range was mapped before it. */
static int range_add(seg_list *l, uint64_t a, uint64_t size, uint64_t stream)
{
	init_seg sg = {a, size, stream, {0, 0}, 0, 1};
	if (seg_insert(l, &sg))
		return -1;
	size_t at = seg_lower(l, a);
	if (at + 1 < l->count && l->segs[at + 1].expandable &&
	    l->segs[at + 1].addr == a + l->segs[at].size) {
		l->segs[at].size += l->segs[at + 1].size;
		seg_remove_at(l, at + 1);
	}
	if (at > 0 && l->segs[at - 1].expandable &&
	    l->segs[at - 1].addr + l->segs[at - 1].size == a) {
		l->segs[at - 1].size += l->segs[at].size;
		seg_remove_at(l, at);
	}
	return 0;
}

static int block_addr_cmp(const void *x, const void *y)
{
	const init_block *a = x, *b = y;
	return (a->addr > b->addr) - (a->addr < b->addr);
}

enum { SEEN_IN_WINDOW = 1, SEEN_PRE = 2, SEEN_ALLOC = 4 };

static int pre_add(init_block **blocks, size_t *count, size_t *cap, const init_block *b)
{
	if (MR_GROW(*blocks, *cap, *count + 1))
		return -1;
	(*blocks)[(*count)++] = *b;
	return 0;
}

/* Places the blocks of one starting segment and creates its simulated twin. */
static int instantiate_segment(engine *e, const init_seg *is, init_block *bl, size_t nb,
                               const sim_config *recorded)
{
	uint32_t pool = pool_find(e, is->pool_id, is->small);
	if (pool == NIL)
		return -1;
	uint32_t seg = seg_new(e, is->addr, is->size, pool, 0, 0);
	if (seg == NIL)
		return -1;
	if (is->expandable)
		e->out->approximate = 1; /* replayed as a fixed segment */
	e->reserved += is->size;
	uint64_t pos = is->addr, end = is->addr + is->size;
	uint32_t last = NIL;
	for (size_t k = 0; k <= nb; k++) {
		uint64_t start = k < nb ? bl[k].addr : end;
		if (k < nb && (start < pos || start >= end)) {
			e->out->approximate = 1; /* overlaps the previous block: dropped */
			continue;
		}
		if (start > pos) { /* free space up to the next live block */
			uint32_t f = block_make(e, pos, start - pos, is->stream, seg, B_FREE);
			if (f == NIL)
				return -1;
			if (last != NIL)
				link_after(e, f, last);
			cache_block(e, f);
			last = f;
			pos = start;
		}
		if (k == nb)
			break;
		uint64_t boundary = k + 1 < nb && bl[k + 1].addr < end ? bl[k + 1].addr : end;
		uint64_t room = boundary > start ? boundary - start : 0, size = bl[k].size;
		if (!bl[k].known) {
			/* freed inside the window: its size is estimated from its request */
			size = sim_round_size(recorded, bl[k].requested);
			uint64_t gap = room > size ? room - size : 0;
			if (size > room || (is->small ? gap < K_MIN_BLOCK : gap <= K_SMALL_SIZE))
				size = room;
			e->out->estimated_blocks++;
			e->out->approximate = 1;
		} else if (size > room) {
			size = room;
			e->out->approximate = 1;
		}
		if (!size)
			continue;
		uint32_t b = block_make(e, start, size, is->stream, seg, bl[k].state);
		if (b == NIL)
			return -1;
		if (last != NIL)
			link_after(e, b, last);
		last = b;
		pos = start + size;
		e->active += size;
		e->out->initial_blocks++;
		if (bl[k].state == B_ALLOCATED)
			e->allocated += size;
		else
			pending_add(e, b);
		e->blocks[b].trace_addr = start;
		e->blocks[b].mapped_key = 1;
		if (am_put(&e->live, start, b))
			return -1;
	}
	return e->nomem ? -1 : 0;
}

static mr_status build_initial_state(engine *e, mr_error *err)
{
	const md_snapshot *s = e->s;
	const md_event *ev = e->md->events;
	size_t n = e->md->event_count;
	seg_list segs = {0};
	init_block *pre = NULL;
	size_t pre_count = 0, pre_cap = 0;
	am_map seen = {0};
	mr_status st = MR_OK;
	sim_config recorded;
	sim_config_from_settings(s, &recorded);

	/* Segments at the first event: the snapshot's, with the window's segment events undone. */
	for (size_t i = 0; i < s->segment_count; i++) {
		const md_segment *sg = &s->segments[i];
		if (sg->device != e->md->id)
			continue;
		init_seg is = {sg->address,
		               sg->total_size,
		               sg->stream,
		               {sg->pool_id[0], sg->pool_id[1]},
		               (uint8_t)(sg->pool == MD_POOL_SMALL),
		               sg->is_expandable};
		if (seg_insert(&segs, &is))
			goto oom;
	}
	for (size_t i = n; i-- > 0;) {
		const md_event *x = &ev[i];
		if (x->action == MD_ACT_SEGMENT_ALLOC) {
			size_t at = seg_lower(&segs, x->addr);
			if (at < segs.count && segs.segs[at].addr == x->addr)
				seg_remove_at(&segs, at);
		} else if (x->action == MD_ACT_SEGMENT_FREE) {
			init_seg is = {x->addr,
			               x->size,
			               stream_raw(s, x->stream),
			               {0, 0},
			               (uint8_t)(x->size == K_SMALL_BUFFER),
			               0};
			if (seg_insert(&segs, &is))
				goto oom;
		} else if (x->action == MD_ACT_SEGMENT_MAP) {
			if (range_subtract(&segs, x->addr, x->size))
				goto oom;
		} else if (x->action == MD_ACT_SEGMENT_UNMAP) {
			if (range_add(&segs, x->addr, x->size, stream_raw(s, x->stream)))
				goto oom;
		}
	}

	/* Blocks live at the first event: freed in the window without being allocated there, or
	 * live in the snapshot without an allocation in the window. */
	for (size_t i = 0; i < n; i++) {
		const md_event *x = &ev[i];
		uint32_t flags = map_get(&seen, x->addr);
		flags = flags == NIL ? 0 : flags;
		init_block b = {x->addr, 0, x->size, stream_raw(s, x->stream), B_ALLOCATED, 0};
		if (x->action == MD_ACT_ALLOC) {
			flags |= SEEN_IN_WINDOW | SEEN_ALLOC;
		} else if (x->action == MD_ACT_FREE_REQUESTED) {
			if (!(flags & (SEEN_IN_WINDOW | SEEN_PRE))) {
				if (pre_add(&pre, &pre_count, &pre_cap, &b))
					goto oom;
				flags |= SEEN_PRE;
			}
		} else if (x->action == MD_ACT_FREE_COMPLETED) {
			if (!(flags & (SEEN_IN_WINDOW | SEEN_PRE))) {
				b.state = B_PENDING; /* its free was requested before the window */
				if (pre_add(&pre, &pre_count, &pre_cap, &b))
					goto oom;
			}
			flags &= ~(uint32_t)(SEEN_IN_WINDOW | SEEN_PRE);
		} else {
			continue;
		}
		if (am_put(&seen, x->addr, flags))
			goto oom;
	}
	for (size_t i = 0; i < s->segment_count; i++) {
		const md_segment *sg = &s->segments[i];
		if (sg->device != e->md->id)
			continue;
		for (size_t j = 0; j < sg->block_count; j++) {
			const md_block *mb = &s->blocks[sg->first_block + j];
			if (mb->state == MD_BLOCK_INACTIVE)
				continue;
			uint32_t flags = map_get(&seen, mb->address);
			if (flags != NIL && (flags & (SEEN_ALLOC | SEEN_PRE)))
				continue;
			init_block b = {mb->address,
			                mb->size,
			                mb->requested_size,
			                sg->stream,
			                mb->state == MD_BLOCK_ACTIVE_ALLOCATED ? B_ALLOCATED
			                                                       : B_PENDING,
			                1};
			if (pre_add(&pre, &pre_count, &pre_cap, &b))
				goto oom;
		}
	}
	if (pre_count)
		qsort(pre, pre_count, sizeof *pre, block_addr_cmp);

	/* Blocks into segments. */
	size_t k = 0, placed = 0;
	for (size_t i = 0; i < segs.count; i++) {
		const init_seg *is = &segs.segs[i];
		while (k < pre_count && pre[k].addr < is->addr)
			k++;
		size_t first = k;
		while (k < pre_count && pre[k].addr < is->addr + is->size)
			k++;
		placed += k - first;
		/* pre is NULL when no block was recorded: no arithmetic on it then */
		if (instantiate_segment(e, is, k > first ? pre + first : NULL, k - first,
		                        &recorded))
			goto oom;
		if (e->track_pools) {
			if (MR_GROW(e->rec_live, e->rec_live_cap, e->rec_live_count + 1))
				goto oom;
			rec_segment rs = {is->addr, is->size, {is->pool_id[0], is->pool_id[1]}};
			e->rec_live[e->rec_live_count++] = rs;
		}
	}
	if (placed < pre_count)
		e->out->approximate = 1; /* blocks outside every known segment */
	e->out->truncated = segs.count > 0 || pre_count > 0;
	e->out->initial_allocated = e->allocated;
	e->out->initial_reserved = e->reserved;
	e->out->peak_allocated = e->allocated;
	e->out->peak_reserved = e->reserved;
	goto done;
oom:
	st = mr_oom(err);
done:
	free(segs.segs);
	free(pre);
	am_free(&seen);
	return st;
}

/* ---- the replay ---- */

/* The pool a recorded request was served from: a private pool when its block lay in a
 * segment the snapshot reports in one. */
static void request_pool(const engine *e, uint64_t addr, uint64_t pool_id[2])
{
	pool_id[0] = pool_id[1] = 0;
	if (!e->track_pools || !e->rec_live_count)
		return;
	size_t lo = 0, hi = e->rec_live_count;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (e->rec_live[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return;
	const rec_segment *rs = &e->rec_live[lo - 1];
	if (addr - rs->addr < rs->size) {
		pool_id[0] = rs->pool_id[0];
		pool_id[1] = rs->pool_id[1];
	}
}

static int rec_live_update(engine *e, const md_event *x)
{
	size_t lo = 0, hi = e->rec_live_count;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (e->rec_live[mid].addr < x->addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (x->action == MD_ACT_SEGMENT_FREE) {
		if (lo < e->rec_live_count && e->rec_live[lo].addr == x->addr) {
			memmove(e->rec_live + lo, e->rec_live + lo + 1,
			        (e->rec_live_count - lo - 1) * sizeof *e->rec_live);
			e->rec_live_count--;
		}
		return 0;
	}
	if (MR_GROW(e->rec_live, e->rec_live_cap, e->rec_live_count + 1))
		return -1;
	rec_segment rs = {x->addr, x->size, {0, 0}};
	/* The snapshot knows the pool of the segments still there at its end: this one, when no
	 * later segment_alloc reuses its address. */
	uint32_t last = map_get(&e->last_seg_alloc, x->addr);
	for (size_t i = 0; last == e->rec_cursor_alloc && i < e->s->segment_count; i++) {
		const md_segment *sg = &e->s->segments[i];
		if (sg->device == e->md->id && sg->address == x->addr &&
		    sg->total_size == x->size) {
			rs.pool_id[0] = sg->pool_id[0];
			rs.pool_id[1] = sg->pool_id[1];
			break;
		}
	}
	memmove(e->rec_live + lo + 1, e->rec_live + lo,
	        (e->rec_live_count - lo) * sizeof *e->rec_live);
	e->rec_live[lo] = rs;
	e->rec_live_count++;
	return 0;
}

static uint64_t largest_free(const engine *e)
{
	uint64_t best = 0;
	for (size_t p = 0; p < e->pool_count; p++)
		for (uint32_t it = sk_first(e, &e->pools[p].blocks); it != NIL;
		     it = e->blocks[it].fwd[0])
			best = MR_MAX(best, e->blocks[it].size);
	return best;
}

/* A recorded `alloc` (or `oom`: the request that failed) through the model. */
static void on_request(engine *e, const md_event *x, size_t i, int recorded_oom)
{
	uint64_t pool_id[2], alloc_size = 0;
	char buf[96];
	request_pool(e, recorded_oom ? 0 : x->addr, pool_id);
	if (recorded_oom)
		pool_id[0] = pool_id[1] = 0;
	uint32_t b = sim_malloc(e, x->size, stream_raw(e->s, x->stream), pool_id, &alloc_size);
	if (e->nomem)
		return;
	sim_result *r = e->out;
	if (b == NIL) {
		r->oom_count++;
		if (!r->first_oom.present) {
			sim_oom *o = &r->first_oom;
			o->present = 1;
			o->event_index = i;
			o->requested_bytes = x->size;
			o->alloc_bytes = alloc_size;
			o->reserved_bytes = e->reserved;
			o->allocated_bytes = e->allocated;
			o->free_cached_bytes = e->reserved - e->active;
			o->largest_free_bytes = largest_free(e);
		}
		if (!recorded_oom) {
			snprintf(buf, sizeof buf, "OOM: %" PRIu64 " bytes would pass the limit",
			         alloc_size);
			if (e->lockstep)
				diverge(e, i, "oom", "the request succeeded", buf);
			if (am_put(&e->live, x->addr, MAP_FAILED))
				e->nomem = 1;
		}
		return;
	}
	if (recorded_oom) {
		/* The replay could serve what failed: the block is never freed. */
		r->recorded_ooms_allocated++;
		if (e->lockstep)
			diverge(e, i, "oom", "OOM", "the request succeeded");
		return;
	}
	sim_block *blk = &e->blocks[b];
	if (e->lockstep && blk->addr != x->addr) {
		char want[96];
		snprintf(want, sizeof want, "block at 0x%" PRIx64, x->addr);
		snprintf(buf, sizeof buf, "block at 0x%" PRIx64 " (%" PRIu64 " bytes)", blk->addr,
		         blk->size);
		diverge(e, i, "block address", want, buf);
	}
	blk->trace_addr = x->addr;
	blk->mapped_key = 1;
	if (am_put(&e->live, x->addr, b))
		e->nomem = 1;
}

static void on_free_requested(engine *e, const md_event *x)
{
	uint32_t b = map_get(&e->live, x->addr);
	if (b == NIL) {
		e->out->unknown_frees++;
		return;
	}
	if (b == MAP_FAILED || e->blocks[b].state != B_ALLOCATED)
		return;
	e->allocated -= e->blocks[b].size;
	e->blocks[b].state = B_PENDING;
	pending_add(e, b);
}

static void on_free_completed(engine *e, const md_event *x)
{
	uint32_t b = map_get(&e->live, x->addr);
	if (b == NIL)
		return; /* completed early by a release, or unknown (counted at its request) */
	if (b == MAP_FAILED) {
		map_del(&e->live, x->addr);
		return;
	}
	if (e->blocks[b].state == B_ALLOCATED) { /* no free_requested seen */
		e->allocated -= e->blocks[b].size;
		e->blocks[b].state = B_PENDING;
		pending_add(e, b);
		if (e->nomem)
			return;
	}
	if (e->blocks[b].state == B_PENDING)
		complete_pending(e, b);
}

/* Recorded segment events the replay did not produce before event i. */
static void check_missing(engine *e, size_t i)
{
	if (!e->lockstep || e->rec_cursor >= e->rec_seg_count || e->rec_seg[e->rec_cursor] >= i)
		return;
	const md_event *r = &e->md->events[e->rec_seg[e->rec_cursor]];
	char want[96];
	snprintf(want, sizeof want, "%s of %" PRIu64 " bytes at 0x%" PRIx64,
	         seg_action_name(r->action), r->size, r->addr);
	diverge(e, e->rec_seg[e->rec_cursor], seg_action_name(r->action), want,
	        "no segment event here");
}

static int is_release(int action)
{
	return action == MD_ACT_SEGMENT_FREE || action == MD_ACT_SEGMENT_UNMAP;
}

/* A group of recorded releases at i: caused by the request after it (the OOM path, garbage
 * collection, oversize release: then segments are created or an OOM follows) or by
 * empty_cache(). Returns 1 when the replay should release now; *end is the first event after
 * the group's segment events. */
static int release_is_external(const engine *e, size_t i, size_t *end)
{
	const md_event *ev = e->md->events;
	size_t n = e->md->event_count, j = i;
	int created = 0;
	for (; j < n; j++) {
		int a = ev[j].action;
		if (a == MD_ACT_SEGMENT_ALLOC || a == MD_ACT_SEGMENT_MAP)
			created = 1;
		else if (!is_release(a))
			break;
	}
	*end = j;
	if (j < n && ev[j].action == MD_ACT_OOM)
		created = 1;
	/* Without a limit the replay never needs to release: do it where the recording did. */
	return !created || !e->limit;
}

static uint64_t snapshot_total(const engine *e, int allocated_only)
{
	uint64_t total = 0;
	for (size_t i = 0; i < e->s->segment_count; i++) {
		const md_segment *sg = &e->s->segments[i];
		if (sg->device != e->md->id)
			continue;
		if (!allocated_only) {
			total += sg->total_size;
			continue;
		}
		for (size_t j = 0; j < sg->block_count; j++) {
			const md_block *mb = &e->s->blocks[sg->first_block + j];
			if (mb->state == MD_BLOCK_ACTIVE_ALLOCATED)
				total += mb->size;
		}
	}
	return total;
}

static void check_level(engine *e, size_t i, const char *what, uint64_t want, uint64_t got)
{
	if (!e->lockstep || want == got)
		return;
	char a[96], b[96];
	snprintf(a, sizeof a, "%" PRIu64 " bytes", want);
	snprintf(b, sizeof b, "%" PRIu64 " bytes", got);
	diverge(e, i, what, a, b);
}

static mr_status replay_events(engine *e, mr_error *err)
{
	const md_event *ev = e->md->events;
	size_t n = e->md->event_count;
	uint64_t rec_reserved = e->out->initial_reserved, rec_peak = rec_reserved;
	int validated_to_end = 1;
	for (size_t i = 0; i < n; i++) {
		const md_event *x = &ev[i];
		e->cur_event = i;
		e->bound = i;
		switch (x->action) {
		case MD_ACT_ALLOC:
			on_request(e, x, i, 0);
			check_missing(e, i);
			break;
		case MD_ACT_OOM:
			e->out->recorded_ooms++;
			if (!e->limit && e->lockstep) {
				/* The recording hit a limit the replay was not given: what follows
				 * cannot be compared. */
				e->lockstep = 0;
				validated_to_end = 0;
			}
			on_request(e, x, i, 1);
			check_missing(e, i);
			break;
		case MD_ACT_FREE_REQUESTED:
			on_free_requested(e, x);
			check_missing(e, i);
			break;
		case MD_ACT_FREE_COMPLETED:
			on_free_completed(e, x);
			check_missing(e, i);
			break;
		case MD_ACT_SNAPSHOT:
			check_level(e, i, "active bytes at snapshot", x->size, e->active);
			break;
		case MD_ACT_SEGMENT_ALLOC:
		case MD_ACT_SEGMENT_MAP:
			rec_reserved += x->size;
			rec_peak = MR_MAX(rec_peak, rec_reserved);
			if (e->track_pools && x->action == MD_ACT_SEGMENT_ALLOC) {
				if (rec_live_update(e, x))
					e->nomem = 1;
				e->rec_cursor_alloc++;
			}
			break;
		case MD_ACT_SEGMENT_FREE:
		case MD_ACT_SEGMENT_UNMAP: {
			rec_reserved = rec_reserved > x->size ? rec_reserved - x->size : 0;
			if (e->track_pools && x->action == MD_ACT_SEGMENT_FREE &&
			    rec_live_update(e, x))
				e->nomem = 1;
			size_t end;
			if ((i == 0 || !is_release(ev[i - 1].action)) &&
			    release_is_external(e, i, &end)) {
				e->bound = end;
				release_cached_blocks(e);
			}
			break;
		}
		default: break;
		}
		if (e->nomem)
			return mr_oom(err);
	}
	e->cur_event = n;
	e->bound = n;
	check_missing(e, n);
	if (validated_to_end) {
		check_level(e, n, "final reserved", snapshot_total(e, 0), e->reserved);
		check_level(e, n, "final allocated", snapshot_total(e, 1), e->allocated);
		check_level(e, n, "peak reserved", rec_peak, e->out->peak_reserved);
	}
	return MR_OK;
}

static void engine_free(engine *e)
{
	free(e->blocks);
	free(e->segs);
	free(e->pools);
	free(e->pending);
	free(e->rec_seg);
	free(e->rec_live);
	am_free(&e->live);
	am_free(&e->last_seg_alloc);
}

mr_status sim_replay(const md_snapshot *s, int32_t device, const sim_config *cfg, uint64_t limit,
                     sim_result *out, mr_error *err)
{
	memset(out, 0, sizeof *out);
	out->device = device;
	out->config = *cfg;
	out->limit = limit;
	const md_device *md = md_find_device(s, device);
	if (!md || !md->event_count)
		return mr_fail(err, MR_EINPUT,
		               "device %d has no allocation trace to replay (record one with "
		               "torch.cuda.memory._record_memory_history())",
		               (int)device);
	engine e;
	memset(&e, 0, sizeof e);
	e.s = s;
	e.md = md;
	e.cfg = *cfg;
	e.limit = limit;
	e.out = out;
	e.err = err;
	e.free_blocks = NIL;
	e.rng = 0x2545f4914f6cdd1dull;
	e.synthetic_va = SYNTHETIC_VA_BASE;
	e.lockstep = 1;
	mr_status st = MR_OK;
	size_t rec_seg_cap = 0;
	uint32_t seg_allocs = 0;
	static const uint64_t default_pool[2] = {0, 0};
	/* pool 0: the default small pool, pool 1: the default large one */
	if (pool_find(&e, default_pool, 1) != 0 || pool_find(&e, default_pool, 0) != 1)
		goto oom;
	for (size_t i = 0; i < s->segment_count; i++)
		if (s->segments[i].device == device &&
		    (s->segments[i].pool_id[0] || s->segments[i].pool_id[1]))
			e.track_pools = 1;
	for (size_t i = 0; i < md->event_count; i++) {
		int a = md->events[i].action;
		if (a != MD_ACT_SEGMENT_ALLOC && a != MD_ACT_SEGMENT_FREE &&
		    a != MD_ACT_SEGMENT_MAP && a != MD_ACT_SEGMENT_UNMAP)
			continue;
		if (MR_GROW(e.rec_seg, rec_seg_cap, e.rec_seg_count + 1))
			goto oom;
		e.rec_seg[e.rec_seg_count++] = i;
		if (a == MD_ACT_SEGMENT_ALLOC && e.track_pools &&
		    am_put(&e.last_seg_alloc, md->events[i].addr, seg_allocs++))
			goto oom;
	}
	if ((st = build_initial_state(&e, err)))
		goto done;
	if ((st = replay_events(&e, err)))
		goto done;
	out->events = md->event_count;
	out->final_allocated = e.allocated;
	out->final_reserved = e.reserved;
	out->final_active = e.active;
	out->matches_recording = !out->first_divergence.present;
	goto done;
oom:
	st = mr_oom(err);
done:
	engine_free(&e);
	return st;
}

void sim_result_free(sim_result *r)
{
	free(r->segment_sizes);
	r->segment_sizes = NULL;
	r->segment_size_count = 0;
}

/* ---- JSON ---- */

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
