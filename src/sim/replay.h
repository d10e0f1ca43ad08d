/* replay.h: "what if": replays one device's recorded trace through a model of PyTorch's
 * native CUDA caching allocator (../shared/reference/pytorch-memory-formats.md §3, engine.h),
 * under the recorded allocator settings or other ones (config.h).
 *
 * Each recorded `alloc` (requested bytes, stream) goes through the model, which chooses its own
 * block; the trace's block address is then mapped to that block, so the matching
 * free_requested / free_completed free it. A recorded `oom` is replayed as the request that
 * failed. Recorded releases that no request caused (empty_cache()) are replayed as a release.
 * A trace that starts mid-run (the ring buffer wrapped) starts from the blocks and segments the
 * snapshot implies were live before the window; sizes of blocks freed inside the window are
 * then estimated and the result is flagged `approximate`.
 *
 * Validation: while the replay makes the same decisions as the recording it uses the recorded
 * segment addresses, so every simulated block address can be compared with the recorded one.
 * The first difference (a segment event of another size, a block at another address, an OOM
 * that did or did not happen, final or peak levels that differ) is reported in
 * first_divergence; matches_recording is 1 when there is none. Replaying the recorded settings
 * is the validation; with other settings the same fields say where they start to matter.
 *
 * Ownership: sim_divergence and sim_oom are plain values. sim_result owns segment_sizes;
 * sim_result_free releases it. Nothing here prints; errors come back in an mr_error. */
#ifndef MR_SIM_REPLAY_H
#define MR_SIM_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "model/model.h"
#include "sim/config.h"

typedef struct {
	int present;
	size_t event_index; /* trace event where the replay and the recording part */
	char what[48];      /* "segment_alloc", "block address", "oom", "peak_reserved", ... */
	char expected[96];  /* what the recording shows */
	char got[96];       /* what the replay did */
} sim_divergence;

typedef struct {
	int present;
	size_t event_index;       /* the trace event whose request failed */
	uint64_t requested_bytes; /* as requested (an `oom` event records it rounded) */
	uint64_t alloc_bytes;     /* the cudaMalloc that would have passed the limit */
	uint64_t reserved_bytes, allocated_bytes;
	uint64_t free_cached_bytes; /* reserved but not active, after the release and retry */
	uint64_t largest_free_bytes;
} sim_oom;

typedef struct {
	int32_t device;
	sim_config config;
	uint64_t limit; /* 0: none */
	size_t events;  /* trace events replayed */
	uint64_t peak_allocated, peak_reserved;
	size_t peak_allocated_event, peak_reserved_event;
	uint64_t final_allocated, final_reserved, final_active;
	uint64_t segments_allocated; /* device allocations: cudaMalloc calls and page mappings */
	uint64_t segments_released;  /* cudaFree calls and unmappings */
	uint64_t *segment_sizes;     /* size of each device allocation, in order (owned) */
	size_t segment_size_count;
	uint64_t oom_count;
	sim_oom first_oom;
	uint64_t recorded_ooms;           /* `oom` events in the trace */
	uint64_t recorded_ooms_allocated; /* of those, requests the replay could serve */
	int matches_recording;
	sim_divergence first_divergence;
	/* A trace that starts mid-run. */
	int truncated;   /* the allocator was not empty at the first event */
	int approximate; /* some of that starting state was estimated */
	uint64_t initial_allocated, initial_reserved, initial_blocks, estimated_blocks;
	uint64_t unknown_frees; /* frees of blocks neither the window nor the snapshot knew */
} sim_result;

/* Replays device `device` of s under cfg. limit: the bytes the allocator may reserve, as with
 * torch.cuda.set_per_process_memory_fraction (0: no limit). Fails (MR_EINPUT) when the device
 * has no trace. *out is overwritten; free it with sim_result_free even after a failure. */
mr_status sim_replay(const md_snapshot *s, int32_t device, const sim_config *cfg, uint64_t limit,
                     sim_result *out, mr_error *err);
/* The same over a trace of one of s's devices given apart: md->id names the device, and its
 * events may be a changed copy of the recording's, or its first part (capacity planning replays
 * the trace with some requests scaled): matches_recording then says that the replay followed
 * the recorded events as far as they go, without the snapshot's final state to compare. */
mr_status sim_replay_trace(const md_snapshot *s, const md_device *md, const sim_config *cfg,
                           uint64_t limit, sim_result *out, mr_error *err);
void sim_result_free(sim_result *r);

#endif
