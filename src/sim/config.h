/* config.h: the settings of PyTorch's CUDA caching allocator as the replay models them: parsed
 * from a PYTORCH_CUDA_ALLOC_CONF string, read from a snapshot's recorded allocator_settings,
 * written back as a string; and the allocator's rounding rules.
 *
 * Ownership: sim_config is a plain value. Nothing here prints; errors come back in an
 * mr_error. */
#ifndef MR_SIM_CONFIG_H
#define MR_SIM_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/error.h"
#include "model/model.h"

/* Constants of c10/core/AllocatorConfig.h. */
#define K_MIN_BLOCK ((uint64_t)512)
#define K_SMALL_SIZE ((uint64_t)1048576)
#define K_SMALL_BUFFER ((uint64_t)2097152)
#define K_LARGE_BUFFER ((uint64_t)20971520)
#define K_MIN_LARGE_ALLOC ((uint64_t)10485760)
#define K_ROUND_LARGE ((uint64_t)2097152)

typedef struct {
	uint64_t max_split_size;         /* UINT64_MAX: unlimited */
	uint64_t max_non_split_rounding; /* default 20 MiB */
	uint64_t large_segment_size;     /* default 20 MiB (large_segment_size_mb) */
	double gc_threshold;             /* 0: off; acts only with a limit */
	int expandable_segments;
	uint32_t roundup_divisions[16]; /* entry i: requests in [2^i MiB, 2^(i+1) MiB); 0 = off */
} sim_config;

/* PyTorch's defaults (nothing set). */
void sim_config_default(sim_config *cfg);

/* The settings a snapshot recorded (defaults where it recorded none): max_split_size,
 * garbage_collection_threshold, expandable_segments and roundup_power2_divisions from
 * allocator_settings, max_non_split_rounding_mb and large_segment_size_mb from the recorded
 * PYTORCH_CUDA_ALLOC_CONF string. */
void sim_config_from_settings(const md_snapshot *s, sim_config *cfg);

/* Parses a PYTORCH_CUDA_ALLOC_CONF string ("expandable_segments:True,max_split_size_mb:128,
 * roundup_power2_divisions:[256:1,512:2,>:4],garbage_collection_threshold:0.6,...") on top of
 * *base (out = base with the keys the string sets; an empty string or "recorded" changes
 * nothing; `key:default` puts a key back to PyTorch's default, as if it were not set). Unknown keys
 * and bad values fail with PyTorch's wording and MR_EINPUT. Keys that do not affect the device
 * allocator (pinned_*, release_lock_on_*, graph_capture_record_stream_reuse) are accepted and
 * ignored. base may be NULL (defaults). */
mr_status sim_parse_conf(const char *conf, const sim_config *base, sim_config *out, mr_error *err);

int sim_config_equal(const sim_config *a, const sim_config *b);

/* Writes the config as an alloc-conf string of the keys that differ from the defaults
 * ("" when none). */
void sim_config_format(const sim_config *cfg, mr_buf *out);

/* The caching allocator's rounding of a request (512 B, roundup_power2_divisions). */
uint64_t sim_round_size(const sim_config *cfg, uint64_t size);
/* The same from the divisions alone (entry i: [2^i MiB, 2^(i+1) MiB); NULL: none set). */
uint64_t sim_round_divisions(const uint32_t divisions[16], uint64_t size);
/* The cudaMalloc size for a rounded request: 2 MiB (<= 1 MiB), large_segment_size (< 10 MiB),
 * else rounded up to 2 MiB. */
uint64_t sim_allocation_size(const sim_config *cfg, uint64_t rounded);

#endif
