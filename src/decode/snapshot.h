/* snapshot.h: builds the model from a decoded snapshot pickle, whatever its era.
 *
 * Accepts what _dump_snapshot / pickle.dump(_snapshot()) write (2.0 to 2.11+), and the bare
 * segment list of memory_snapshot() / 1.x. A pickle that is not a memory snapshot is refused
 * with MR_EINPUT and "not a PyTorch memory snapshot: <why>". */
#ifndef MR_SNAPSHOT_H
#define MR_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "decode/pickle.h"
#include "model/model.h"

/* Decodes data[0..len) into *out (which the caller has not initialised; on failure it is left
 * freed). `progress` may be NULL. The caller frees *out with md_free. */
mr_status sn_load(const uint8_t *data, size_t len, md_snapshot *out, pk_progress_fn progress,
                  void *progress_ctx, mr_error *err);

#endif
