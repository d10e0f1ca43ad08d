/* model.h: one typed model of PyTorch CUDA memory evidence, for every format era.
 *
 * A snapshot fills it all; a memory_summary() table, an OOM message or a memory_stats() dump
 * fill the parts they know (see evidence.h). Strings and stacks are interned once and referred
 * to by index. Every era normalises into it: current snapshots (2.1+), 2.0 snapshots with
 * per-block `history`, 1.x bare segment lists, missing keys, both spellings of the pending-free
 * state. Unknown keys and actions are ignored.
 *
 * Ownership: an md_snapshot owns every array it points to; md_free releases them all. */
#ifndef MR_MODEL_H
#define MR_MODEL_H

#include <stddef.h>
#include <stdint.h>

/* Interned strings: id 0 is the empty string. */
typedef struct {
	char *data; /* all strings, each NUL-terminated */
	size_t len, cap;
	uint64_t *offsets; /* offsets[id] into data */
	uint32_t *lens;
	size_t count, ocap;
	uint32_t *hash_slots; /* open addressing: id + 1, 0 = empty */
	size_t hash_cap;
} md_strtab;

typedef struct {
	uint32_t name, filename; /* string ids */
	int32_t line;
} md_frame;

/* A stack is frames[first .. first+count), innermost frame first. Stack 0 is the empty stack. */
typedef struct {
	uint32_t first, count;
} md_stack;

enum { MD_NO_STACK = 0 };

typedef enum {
	MD_BLOCK_ACTIVE_ALLOCATED,
	MD_BLOCK_ACTIVE_PENDING_FREE,
	MD_BLOCK_INACTIVE,
} md_block_state;

typedef struct {
	uint64_t address, size;
	uint64_t requested_size; /* meaningful for active blocks only; stale or 0 when inactive */
	uint32_t stack;          /* stack when last handed out; MD_NO_STACK if none recorded */
	uint8_t state;           /* md_block_state */
	uint8_t requested_known; /* 0 in eras that did not record the requested size */
} md_block;

typedef enum { MD_POOL_LARGE, MD_POOL_SMALL } md_pool_kind;

typedef struct {
	int32_t device;
	uint64_t address, total_size;
	uint64_t allocated_size, active_size, requested_size; /* recomputed from blocks */
	uint64_t stream;                                      /* raw cudaStream_t value */
	uint64_t pool_id[2]; /* segment_pool_id; (0, 0) is the default pool */
	uint32_t stack;      /* stack at the cudaMalloc, often empty (see reference §1.3) */
	uint32_t first_block, block_count; /* into md_snapshot.blocks */
	uint8_t pool;                      /* md_pool_kind */
	uint8_t is_expandable;
} md_segment;

typedef enum {
	MD_ACT_ALLOC,
	MD_ACT_FREE_REQUESTED,
	MD_ACT_FREE_COMPLETED,
	MD_ACT_SEGMENT_ALLOC,
	MD_ACT_SEGMENT_FREE,
	MD_ACT_SEGMENT_MAP,
	MD_ACT_SEGMENT_UNMAP,
	MD_ACT_SNAPSHOT,
	MD_ACT_OOM,
	MD_ACT_UNKNOWN,
	MD_ACT_COUNT
} md_action;

enum { MD_TIME_NONE = INT64_MIN };

/* One trace entry, 24 bytes: millions of them are kept. Its time is kept apart (md_times). */
typedef struct {
	uint64_t addr; /* block or segment address; device_free for MD_ACT_OOM */
	uint64_t size; /* see reference §1.5: requested bytes for alloc, rounded for oom */
	uint32_t stack;
	uint16_t meta;  /* index into md_snapshot.metas (user_metadata, compile_context); valid */
	uint8_t stream; /* index into md_snapshot.streams */
	uint8_t action; /* md_action */
} md_event;

/* The times of the event store's events (time_us, MD_TIME_NONE when not recorded), 4 bytes
 * an event: its offset from the time of its chunk's first event, or MD_TIME_FAR when it is
 * none, earlier, or 2^32 us or more later; those are listed in `far`, in event order. */
enum { MD_TIME_CHUNK = 1024 };
#define MD_TIME_FAR UINT32_MAX
typedef struct {
	uint64_t event;
	int64_t time_us;
} md_far_time;

typedef struct {
	uint32_t *off;
	int64_t *base; /* per MD_TIME_CHUNK events */
	md_far_time *far;
	size_t count, off_cap, base_cap, far_count, far_cap;
	size_t off_room; /* bytes of off's room (mr_room_new; off_cap fixed), 0: malloc'ed */
} md_times;

typedef struct {
	uint32_t user_metadata, compile_context; /* string ids */
} md_meta;

typedef struct {
	int32_t id;
	md_event *events; /* oldest first */
	size_t event_count;
	int has_trace_list; /* the snapshot carried a trace list for this device (maybe empty) */
	md_times times; /* the store's times (arrays borrowed): entry first + i is events[i]'s */
	size_t first;
} md_device;

typedef struct {
	int32_t device;
	int64_t time_us;
	uint32_t name;  /* string id */
	uint8_t is_end; /* stage END (else START) */
} md_annotation;

/* A key/value pair as recorded, for display. */
typedef struct {
	uint32_t key, value; /* string ids; value is rendered as text */
} md_setting;

typedef struct {
	int present;             /* the snapshot carried allocator_settings */
	uint32_t conf;           /* PYTORCH_CUDA_ALLOC_CONF string id */
	uint64_t max_split_size; /* UINT64_MAX: unlimited */
	double gc_threshold;     /* 0: off */
	int expandable_segments;
	uint32_t roundup_divisions[16]; /* entry i: interval [2^i MiB, 2^(i+1) MiB) */
	md_setting *raw;
	size_t raw_count;
} md_settings;

typedef enum {
	MD_ERA_CURRENT,      /* 2.1+: blocks with address, requested_size, frames */
	MD_ERA_HISTORY,      /* 2.0: blocks with `history` */
	MD_ERA_SEGMENT_LIST, /* 1.x / memory_snapshot(): a bare list of segments */
} md_era;

typedef struct {
	md_era era;
	md_strtab strings;
	md_frame *frames;
	size_t frame_count, frame_cap;
	md_stack *stacks;
	size_t stack_count, stack_cap;
	uint32_t *stack_hash; /* open addressing: id + 1 */
	size_t stack_hash_cap;

	md_segment *segments; /* sorted by (device, address) */
	size_t segment_count;
	md_block *blocks;
	size_t block_count;

	md_device *devices; /* sorted by id; every device with segments or a trace */
	size_t device_count;
	md_event *event_store; /* storage for all devices' events (device slices point into it) */
	size_t event_store_count, event_store_cap;
	size_t event_store_room; /* bytes of its room (mr_room_new; cap fixed), 0: malloc'ed */
	md_times times;          /* the store's events' times */

	uint64_t streams[256]; /* raw stream values; events refer to them by index */
	size_t stream_count;
	md_meta *metas;
	size_t meta_count, meta_cap;

	md_settings settings;
	md_annotation *annotations;
	size_t annotation_count;
	int has_history;              /* any trace event or any block/segment stack was recorded */
	size_t inconsistent_segments; /* segments whose blocks do not tile them exactly */
	size_t unknown_states, unknown_actions, dropped_events;
} md_snapshot;

/* String table. md_str returns a NUL-terminated string; id must be < count. */
const char *md_str(const md_snapshot *s, uint32_t id);
uint32_t md_str_len(const md_snapshot *s, uint32_t id);
/* Interns bytes; returns the id, or UINT32_MAX on allocation failure. */
uint32_t md_intern(md_snapshot *s, const char *str, size_t len);
/* Interns a stack of frames; returns the id, or UINT32_MAX on allocation failure. */
uint32_t md_intern_stack(md_snapshot *s, const md_frame *frames, size_t count);

void md_init(md_snapshot *s); /* an empty, valid snapshot (nothing allocated) */
void md_free(md_snapshot *s);
/* Reserves room for up to max_events events and their times in an empty snapshot, where that
 * is worth it (mem.h, mr_room_new); otherwise they grow as they come. */
void md_reserve_events(md_snapshot *s, size_t max_events);
/* Frees the event store, leaving it empty (a fresh one may then be put in its place). */
void md_events_free(md_snapshot *s);

const char *md_action_name(md_action a);
const char *md_state_name(md_block_state st);

/* Appends the next event's time; -1 on allocation failure. */
int md_times_push(md_times *t, int64_t time_us);
void md_times_free(md_times *t);
int64_t md_times_far(const md_times *t, size_t event);

/* The time of event i of the device. */
static inline int64_t md_event_time(const md_device *md, size_t i)
{
	size_t k = md->first + i;
	uint32_t off = md->times.off[k];
	if (off != MD_TIME_FAR)
		return md->times.base[k / MD_TIME_CHUNK] + (int64_t)off;
	return md_times_far(&md->times, k);
}

/* Finds the device entry, or NULL. */
const md_device *md_find_device(const md_snapshot *s, int32_t id);

#endif
