/* settings.h: the caching allocator's settings. Every recommendation of a setting is the
 * complete PYTORCH_CUDA_ALLOC_CONF to use: the recorded settings with the change applied and
 * the keys that hurt removed (max_split_size_mb keeps freed expandable blocks from serving
 * other sizes). replay.c replays each one before it is shown. Settings that cannot act
 * (garbage_collection_threshold without a memory fraction) are said so.
 *
 * Ownership: writes into the ctx's advice (rule_ctx.h). */
#ifndef MR_SETTINGS_H
#define MR_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

#include "advise/rule_ctx.h"

/* Free cached memory cut into pieces (free_bytes in all, the largest piece `largest`, the
 * largest hole inside a split segment `hole`; 0 when unknown): the settings that let freed
 * memory serve other sizes. */
void ad_rule_fragmentation(ad_ctx *c, int priority, uint64_t free_bytes, uint64_t largest,
                           uint64_t hole);

/* Settings that fight each other (expandable segments with max_split_size_mb, when the peak
 * shows the cost) or cannot act. */
void ad_rule_settings(ad_ctx *c);

/* "PYTORCH_CUDA_ALLOC_CONF=<recorded settings with `change` applied>" into out; change uses
 * the conf syntax and may put keys back with key:default. Returns 0, -1 when it does not
 * parse. */
int ad_complete_conf(const ad_ctx *c, const char *change, char *out, size_t outsz);

#endif
