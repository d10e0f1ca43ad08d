/* initial.h: the allocator's state before a trace's first event. A trace that starts mid-run
 * (the ring buffer wrapped) starts from the segments and blocks the snapshot implies were live
 * before the window: the snapshot's own, with the window's segment events undone, and the
 * blocks freed in the window that it never saw allocated. Sizes of blocks freed inside the
 * window are estimated from their requests; the result is then flagged `approximate`.
 *
 * Ownership: fills the caller's engine (engine.h); allocates only what the engine owns. */
#ifndef MR_SIM_INITIAL_H
#define MR_SIM_INITIAL_H

#include "base/error.h"
#include "sim/engine.h"

/* Builds e's starting state from its snapshot and trace, and records in e->out whether the
 * trace was truncated and what was reserved and allocated at its start. */
mr_status sim_initial_state(engine *e, mr_error *err);

#endif
