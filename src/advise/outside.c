/* outside.c: who held the device when an allocation failed. */
#include "advise/outside.h"

#include <string.h>

#include "base/units.h"

/* The figures of the message and of the snapshot's oom event, merged: the snapshot's layout is
 * exact, the message knows the device and the other processes. */
static void holders(const ad_ctx *c, ad_holders *h)
{
	const an_device *dv = c->dv;
	memset(h, 0, sizeof *h);
	if (c->msg)
		ad_message_holders(c->msg, h);
	if (dv && dv->oom.present) {
		h->has_reserved = 1;
		h->reserved = dv->pool[AN_POOL_ALL].reserved;
		/* the oom event records cudaMemGetInfo's free bytes: a segment that did not fit in
		 * them means the device was full, whatever a memory fraction said */
		h->device_full = dv->oom.device_free < dv->oom.alloc_size;
		if (h->device_full)
			h->fraction_hit = 0;
		const ev_oom *m = c->msg;
		if (m && (m->has_this_process || h->self_listed >= 0)) {
			uint64_t mine = m->has_this_process
			                    ? m->this_process_in_use
			                    : m->other_processes[h->self_listed].bytes;
			h->has_non_pytorch = 1;
			h->non_pytorch = mine > h->reserved ? mine - h->reserved : 0;
		}
	}
}

static void fill_oom(ad_ctx *c, const ad_holders *h)
{
	ad_oom *o = &c->a->oom;
	const ev_oom *m = c->msg;
	o->device_full = h->device_full;
	if (c->dv && c->dv->oom.present) {
		o->has_device_free = 1;
		o->device_free = c->dv->oom.device_free;
	} else if (m && m->has_device_free) {
		o->has_device_free = 1;
		o->device_free = m->device_free;
	}
	o->has_others = h->has_others;
	o->others = h->others;
	o->has_non_pytorch = h->has_non_pytorch;
	o->non_pytorch = h->non_pytorch;
	for (size_t i = 0; m && i < m->other_process_count && o->process_count < 8; i++)
		if ((int)i != h->self_listed)
			o->processes[o->process_count++] = m->other_processes[i];
	if (m && h->self_listed >= 0) {
		o->has_self_listed = 1;
		o->self_listed = m->other_processes[h->self_listed];
	}
	/* what this process could have had: the memory fraction, else what PyTorch held plus
	 * what was still free on the device */
	if (m && m->has_allowed && (!m->has_total_capacity || m->allowed <= m->total_capacity) &&
	    !h->device_full)
		o->limit = m->allowed;
	else if (h->device_full && h->has_reserved && o->has_device_free)
		o->limit = h->reserved + o->device_free;
	else if (m)
		o->limit = ev_oom_limit(m);
}

static void advise_free_device(ad_ctx *c, ad_cause cause)
{
	const ad_oom *o = &c->a->oom;
	char b1[32], b2[32], b3[32];
	ad_text t = {0};
	if (cause == AD_CAUSE_OTHER_PROCESSES) {
		ad_text_printf(&t, "Other processes hold %s of the device", ad_sz(b1, o->others));
		for (size_t i = 0; i < o->process_count; i++)
			ad_text_printf(&t, "%sprocess %d: %s", i ? ", " : " (", o->processes[i].pid,
			               ad_sz(b2, o->processes[i].bytes));
		ad_text_printf(&t,
		               "%s while PyTorch held %s: no setting or batch size inside this "
		               "process makes room they hold. Run on a free GPU, or stop or shrink "
		               "the other job.",
		               o->process_count ? ")" : "", ad_sz(b3, o->reserved));
		ad_suggest_text(c, "free_device_memory", AD_PRIO_FIRST,
		                "Free the GPU: other processes hold most of it",
		                "nvidia-smi --query-compute-apps=pid,used_memory --format=csv", &t);
		return;
	}
	ad_text_printf(&t,
	               "This process holds %s outside PyTorch's caching allocator, against %s "
	               "that PyTorch holds: another allocator in the process (CuPy, JAX, "
	               "TensorFlow, Numba), NCCL buffers, cuDNN/cuBLAS workspaces or an "
	               "extension's cudaMalloc. PyTorch cannot reuse it: release or cap that "
	               "memory, or let the other library allocate through PyTorch.",
	               ad_sz(b1, o->non_pytorch), ad_sz(b2, o->reserved));
	ad_suggest_text(c, "free_device_memory", AD_PRIO_FIRST,
	                "Free the GPU memory held outside PyTorch in this process",
	                "cupy.get_default_memory_pool().free_all_blocks()  # CuPy; also "
	                ".set_limit(size=...); JAX: XLA_PYTHON_CLIENT_PREALLOCATE=false",
	                &t);
}

/* The device was full and other processes hold a real part of it, yet less than PyTorch does:
 * the cause is this run's own memory, but on a GPU of its own the request would have fit. */
static void shared_device(ad_ctx *c, const ad_holders *h)
{
	ad_oom *o = &c->a->oom;
	if (h->device_full && h->has_others && h->others >= MR_GIB && h->others >= o->requested &&
	    o->process_count) {
		o->shared_others = h->others;
		o->shared_held = h->reserved;
	}
}

void ad_outside_notes(ad_ctx *c)
{
	const ad_oom *o = &c->a->oom;
	char b1[32], b2[32], b3[32];
	if (o->shared_others) {
		ad_note(
		    c, "shared_device", AD_WARNING,
		    "The GPU is shared: other processes held %s of it at the OOM, PyTorch here %s. "
		    "Without them the %s request would have fit; with them, what fits this run "
		    "depends on what they hold.",
		    ad_sz(b1, o->shared_others), ad_sz(b2, o->shared_held),
		    ad_sz(b3, o->requested));
		ad_suggest(
		    c, "free_device_memory", AD_PRIO_SETTINGS,
		    "Run on a GPU of its own, or stop the other job",
		    "nvidia-smi --query-compute-apps=pid,used_memory --format=csv",
		    "Other processes hold %s of this GPU. The run's own memory is the cause (the "
		    "changes above make it fit beside them), but alone on the GPU the failing "
		    "request would have fit.",
		    ad_sz(b1, o->shared_others));
	}
	if (o->has_self_listed && c->msg)
		ad_note(
		    c, "oom_message_self_listed", AD_INFO,
		    "The message's process %d (%s in use) is this process: PyTorch held %s here, "
		    "and that with the processes listed would be more than the %s the device had "
		    "in use. Inside a container NVML names a process by the host's PID, so "
		    "PyTorch printed its own process as another.",
		    o->self_listed.pid, ad_sz(b1, o->self_listed.bytes),
		    ad_sz(b2, o->self_listed_held),
		    ad_sz(b3, c->msg->total_capacity - c->msg->device_free));
}

ad_outside ad_rule_outside(ad_ctx *c)
{
	ad_holders h;
	char b1[32], b2[32], b3[32], b4[32], b5[32];
	holders(c, &h);
	fill_oom(c, &h);
	ad_oom *o = &c->a->oom;
	if (o->has_self_listed)
		o->self_listed_held = h.reserved;
	ad_cause cause = ad_outside_cause(&h);
	if (cause != AD_CAUSE_UNKNOWN) {
		o->cause = cause;
		ad_note(c,
		        cause == AD_CAUSE_OTHER_PROCESSES ? "oom_other_processes"
		                                          : "oom_non_pytorch",
		        AD_CRITICAL,
		        "Out of memory because the device itself was full: %s free for a %s "
		        "request, while PyTorch held only %s; %s holds %s.",
		        o->has_device_free ? ad_sz(b1, o->device_free) : "nothing",
		        ad_sz(b2, o->requested), ad_sz(b3, h.reserved),
		        cause == AD_CAUSE_OTHER_PROCESSES ? "memory of other processes"
		                                          : "this process, outside PyTorch,",
		        cause == AD_CAUSE_OTHER_PROCESSES ? ad_sz(b4, o->others)
		                                          : ad_sz(b4, o->non_pytorch));
		advise_free_device(c, cause);
		return AD_OUTSIDE_CAUSE;
	}
	/* The device had room for the trace's peak reserved; at the OOM, what PyTorch held
	 * plus what was free is less by more than the request: memory outside PyTorch grew
	 * since, whoever holds it. */
	const an_device *dv = c->dv;
	uint64_t then = dv ? dv->peak_reserved : 0, now = h.reserved + o->device_free;
	if (h.device_full && !c->msg && dv && then > now && then - now >= dv->oom.alloc_size &&
	    then - now >= 64 * MR_MIB) {
		o->outside_grew = then - now;
		ad_note(c, "outside_grew", AD_CRITICAL,
		        "The device was full at the OOM (%s free) while PyTorch held %s, yet "
		        "earlier in the trace this process had %s reserved: at least %s of the "
		        "device that was there for it then is held outside PyTorch now, by another "
		        "process or a library in this one. With it back, the %s request fits.",
		        ad_sz(b1, o->device_free), ad_sz(b2, h.reserved), ad_sz(b3, then),
		        ad_sz(b4, o->outside_grew), ad_sz(b5, o->requested));
		ad_suggest(c, "free_device_memory", AD_PRIO_FIRST,
		           "Find what took the GPU's memory during the run",
		           "nvidia-smi --query-compute-apps=pid,used_memory --format=csv",
		           "At least %s of the device that this run had used is held outside "
		           "PyTorch at the OOM: another process started on the same GPU, or a "
		           "library of this process allocated it. Freeing it (or a GPU of its own "
		           "for this run) makes room without changing the run; the OOM message "
		           "lists the processes (give the log as a second input).",
		           ad_sz(b1, o->outside_grew));
		return AD_OUTSIDE_UNCLEAR;
	}
	if (h.device_full && !c->msg && dv) {
		ad_note(
		    c, "device_full", AD_WARNING,
		    "The device itself was full at the OOM (%s free) while PyTorch held %s. "
		    "Either this run's tensors fill the card, or memory outside PyTorch (another "
		    "process, a library in this process) holds the rest; the OOM message says "
		    "which (\"Process N has ...\", \"this process has ...\"): give the log as a "
		    "second input.",
		    ad_sz(b1, o->device_free), ad_sz(b2, h.reserved));
		return AD_OUTSIDE_UNCLEAR;
	}
	shared_device(c, &h);
	return AD_OUTSIDE_NO;
}
