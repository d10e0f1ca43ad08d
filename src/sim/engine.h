/* engine.h: the allocator model inside sim/ (not for other stages: they call replay.h).
 *
 * The model: requests rounded to 512 B or by roundup_power2_divisions; a small pool (<= 1 MiB,
 * 2 MiB segments) and a large one (20 MiB segments under 10 MiB, else 2 MiB rounding); best fit
 * by (stream, size, address); the splitting rules, max_split_size and max_non_split_rounding;
 * on a cudaMalloc that would pass the limit: release of oversize blocks, then of every free
 * whole segment, then one retry; garbage_collection_threshold (acts only with a limit, like a
 * memory fraction); expandable segments mapped in 2 MiB / large_segment_size pages and unmapped
 * on release; pending frees (free_requested .. free_completed); private pools (CUDA graphs),
 * which are never released.
 *
 * The engine keeps blocks in one array (indices, never pointers, so it can grow), free blocks
 * in per-pool skip lists ordered by (stream, size, address), and maps trace addresses to the
 * blocks that serve them. initial.c builds the state before a trace's first event; replay.c
 * feeds it the events.
 *
 * Ownership: an engine owns its arrays and maps; eng_free releases them. It writes its results
 * into a caller-owned sim_result. */
#ifndef MR_SIM_ENGINE_H
#define MR_SIM_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "base/addrmap.h"
#include "base/error.h"
#include "model/model.h"
#include "sim/config.h"
#include "sim/replay.h"

/* Virtual addresses reserved per expandable segment: PyTorch reserves 1.125 x the GPU's
 * memory, which a snapshot does not record; 1 TiB is more than any GPU has. */
#define EXPANDABLE_VA ((uint64_t)1 << 40)
/* Addresses of segments the recording did not have: far above any real one. */
#define SYNTHETIC_VA_BASE ((uint64_t)1 << 60)

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
	uint32_t bwd[SL_LEVELS];          /* ... and the block before it at each of its levels */
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
	const md_device *md;       /* the events replayed */
	const md_device *recorded; /* the device's whole recorded trace: the state before the first
	                              event is reconstructed from it and the snapshot */
	sim_config cfg;
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

/* Records the first point where the replay parts from the recording; stops the lockstep. */
void eng_diverge(engine *e, size_t event, const char *what, const char *expected, const char *got);
/* The pool of pool_id (small or large), created when new; NIL when memory runs out. */
uint32_t eng_pool_find(engine *e, const uint64_t pool_id[2], int small);
/* A new segment of the pool (an expandable one reserves address space of `page` pages). */
uint32_t eng_seg_new(engine *e, uint64_t addr, uint64_t size, uint32_t pool, int expandable,
                     uint64_t page);
/* A block of seg in `state`, not yet linked to its neighbours nor cached. */
uint32_t eng_block_make(engine *e, uint64_t addr, uint64_t size, uint64_t stream, uint32_t seg,
                        uint8_t state);
/* Links block i after block at in their segment. */
void eng_link_after(engine *e, uint32_t i, uint32_t at);
/* Puts a free block into its pool's free set. */
void eng_cache_block(engine *e, uint32_t i);
/* A block freed by the program while a stream event is outstanding. */
void eng_pending_add(engine *e, uint32_t i);
/* The outstanding event of a pending block completed: it is free. */
void eng_complete_pending(engine *e, uint32_t i);
/* empty_cache(): every free whole segment goes back to the device. */
void eng_release_cached_blocks(engine *e);
/* The allocator's malloc: rounds the request, finds a block (best fit, splitting), or
 * reserves a segment within the limit (releasing cached ones first); NIL when it would pass
 * the limit (*alloc_size_out: the cudaMalloc it needed). */
uint32_t eng_malloc(engine *e, uint64_t orig_size, uint64_t stream, const uint64_t pool_id[2],
                    uint64_t *alloc_size_out);
/* The largest free cached block of every pool. */
uint64_t eng_largest_free(const engine *e);
/* Releases everything the engine holds (out is the caller's). */
void eng_free(engine *e);
/* An engine for one replay of md (a device of s) into out: empty pools, nothing reserved.
 * Returns -1 when memory runs out; eng_free releases it either way. */
int eng_init(engine *e, const md_snapshot *s, const md_device *md, const sim_config *cfg,
             uint64_t limit, sim_result *out, mr_error *err);

/* The simulated block of a trace address (NIL when unknown, MAP_FAILED when its request failed
 * in the replay). Inline: the replay asks for every event. */
static inline uint32_t eng_map_get(const am_map *m, uint64_t addr)
{
	uint64_t v;
	return am_get(m, addr, &v) ? (uint32_t)v : NIL;
}

static inline void eng_map_del(am_map *m, uint64_t addr)
{
	uint64_t v;
	am_take(m, addr, &v);
}

/* The raw cudaStream_t of an event's stream index. */
static inline uint64_t eng_stream_raw(const md_snapshot *s, uint8_t idx)
{
	return idx < s->stream_count ? s->streams[idx] : idx;
}

#endif
