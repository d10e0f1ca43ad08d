/* outside.h: memory held outside PyTorch's caching allocator when an allocation failed: by
 * other processes on the device, or by this process itself outside the allocator (CuPy, JAX,
 * TensorFlow, NCCL, cuDNN and cuBLAS workspaces, extensions, the CUDA context). No change
 * inside PyTorch makes such a run fit: the first thing to do is to free the device.
 *
 * Ownership: writes into the ctx's advice (rule_ctx.h). */
#ifndef MR_OUTSIDE_H
#define MR_OUTSIDE_H

#include "advise/rule_ctx.h"

typedef enum {
	AD_OUTSIDE_NO,      /* PyTorch's own memory decides (or no OOM moment to read) */
	AD_OUTSIDE_CAUSE,   /* memory outside PyTorch filled the device: a->oom.cause says whose */
	AD_OUTSIDE_UNCLEAR, /* the device was full, and nothing says who held the rest */
} ad_outside;

/* Fills a->oom's figures of who held the device (device_free, others, non_pytorch, processes,
 * limit) from the diagnosed device's oom event and the OOM message, and, when memory outside
 * PyTorch is the cause, its finding and the recommendation to free the device. */
ad_outside ad_rule_outside(ad_ctx *c);

/* After the cause's own findings: that the message lists this process as another (inside a
 * container), and, on a full device that other processes share while PyTorch holds more than
 * they do, a warning and the lower-ranked advice to run on a GPU of its own. */
void ad_outside_notes(ad_ctx *c);

#endif
