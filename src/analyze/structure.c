/* structure.c: kind of run, iterations, techniques and growth, read from one device's trace. */
#include "analyze/structure.h"

#include <stdlib.h>
#include <string.h>

#include "analyze/casts.h"
#include "base/addrmap.h"
#include "base/mem.h"
#include "base/units.h"

const char *an_run_kind_name(an_run_kind k)
{
	switch (k) {
	case AN_RUN_TRAINING: return "training";
	case AN_RUN_EVALUATION: return "evaluation";
	case AN_RUN_INFERENCE: return "inference";
	default: return "unknown";
	}
}

int an_first_forward_cut(const an_structure *r)
{
	return r && r->forward_spans == 1 && r->forwards_cut && !r->backward_phases &&
	       r->start_count <= 1;
}

const char *an_technique_name(unsigned bit_index)
{
	static const char *const names[AN_TECH_COUNT] = {
	    "fsdp",        "ddp",      "activation_checkpointing", "torch_compile",
	    "cuda_graphs", "autocast", "fsdp_mixed_precision"};
	return bit_index < AN_TECH_COUNT ? names[bit_index] : "";
}

/* Thresholds, with why. */
#define GROWTH_MIN_BYTES MR_MIB /* less per iteration is noise (caches, workspaces) */
enum {
	MAX_LOOPS = 64,    /* distinct loops tracked; real runs show a handful */
	CHECKED_LOOPS = 8, /* the most frequent ones are tested as iteration loops */
};
/* A forward keeps its graph when most of what it allocated is still alive when it returns
 * (saved for backward); under no_grad it frees its layers' tensors as it goes. Measured on the
 * corpus: 0.46-0.99 with a graph, 0.00-0.17 without. */
#define KEPT_GRAPH 0.35
#define KEPT_NO_GRAPH 0.25
/* A forward span of fewer allocations is a piece of a forward (code outside modules, such as
 * a functional attention, cuts the model's forward into pieces): what it made is live at its
 * end because the next piece reads it, which says nothing of a graph; that it freed what it
 * made still says there is none. */
#define SPAN_MIN_ALLOCS 8
/* The same over finished layers only, for a forward that died part-way: 0.46-1.00 with a
 * graph (Hugging Face models free their float32 norm and rotary temporaries), 0.35-0.38 where
 * much of the model saves nothing for backward (a frozen base under LoRA adapters; explicit
 * attention's float32 temporaries), 0.00-0.05 without. */
#define SURVIVAL_GRAPH 0.3
#define SURVIVAL_NO_GRAPH 0.2

typedef struct {
	const md_snapshot *s;
	const md_device *md;
	const an_stack_info *info;
	const uint8_t *kinds; /* per frame: AN_FK_* (an_frame_kinds) */
	int trace_has_python;
} sctx;

/* What the allocator hands out for a request: 512-byte multiples. (The exact sizes are the
 * replay's; for comparing levels and shares the rounding is enough.) */
static uint64_t block_size(uint64_t requested)
{
	return requested < 512 ? 512 : (requested + 511) / 512 * 512;
}

/* ---- frame chains ---- */

/* A chain walks a stack's Python frames from the outermost inwards, down to frames[lo]. */
typedef struct {
	const sctx *c;
	const md_stack *st;
	uint32_t k, lo; /* next frame is frames[k - 1], while k > lo */
} chain;

static chain loop_chain(const sctx *c, uint32_t stack)
{
	const md_stack *st = &c->s->stacks[stack];
	return (chain){c, st, st->count, c->info[stack].loop_lo};
}

/* The frames below the outermost model call (the model's own code), outermost first. */
static chain model_chain(const sctx *c, uint32_t stack)
{
	const md_stack *st = &c->s->stacks[stack];
	uint32_t lo = c->info[stack].loop_lo;
	return (chain){c, st, lo ? lo - 1 : 0, 0};
}

static const md_frame *chain_next(chain *ch)
{
	while (ch->k > ch->lo) {
		ch->k--;
		uint32_t idx = ch->st->first + ch->k;
		if ((ch->c->kinds[idx] & (AN_FK_SHOWN | AN_FK_PYTHON)) ==
		    (AN_FK_SHOWN | AN_FK_PYTHON))
			return &ch->c->s->frames[idx];
	}
	return NULL;
}

static int same_function(const md_frame *a, const md_frame *b)
{
	return a->filename == b->filename && a->name == b->name;
}

static int same_frame(const md_frame *a, const md_frame *b)
{
	return same_function(a, b) && a->line == b->line;
}

/* Walks two chains to their first difference. Returns the level (0 = outermost) where they
 * differ in the same function with the line going back (a loop's back-edge, or a second call
 * of the same function), or -1. */
static int back_edge(chain a, chain b)
{
	for (int level = 0;; level++) {
		const md_frame *fa = chain_next(&a), *fb = chain_next(&b);
		if (!fa || !fb)
			return -1;
		if (same_frame(fa, fb))
			continue;
		return same_function(fa, fb) && fb->line < fa->line ? level : -1;
	}
}

/* FNV-1a over the chain's first `level` frames and the function at `level`. */
static uint64_t loop_key(chain ch, int level)
{
	uint64_t h = 1469598103934665603ull;
	for (int i = 0; i <= level; i++) {
		const md_frame *f = chain_next(&ch);
		if (!f)
			break;
		uint64_t parts[3] = {f->filename, f->name,
		                     i < level ? (uint64_t)(uint32_t)f->line : 0};
		for (int j = 0; j < 3; j++) {
			h ^= parts[j];
			h *= 1099511628211ull;
		}
	}
	return h;
}

/* ---- loops above the model call ---- */

typedef struct {
	uint64_t key;
	uint32_t stack; /* the stack after the first back-edge: its chain holds the loop */
	int level;
	size_t *edges; /* event index of each back-edge's target */
	size_t edge_count, edge_cap;
	size_t first_member; /* first alloc event in the loop's body */
	size_t iterations;
	int qualifies;
	uint8_t *member; /* per stack: 0 unknown, 1 in the body, 2 not */
} loop_cand;

static int in_body(const sctx *c, loop_cand *l, uint32_t stack)
{
	if (!l->member[stack]) {
		chain a = loop_chain(c, l->stack), b = loop_chain(c, stack);
		int ok = 1;
		for (int i = 0; i <= l->level && ok; i++) {
			const md_frame *fa = chain_next(&a), *fb = chain_next(&b);
			ok =
			    fa && fb && (i < l->level ? same_frame(fa, fb) : same_function(fa, fb));
		}
		l->member[stack] = ok ? 1 : 2;
	}
	return l->member[stack] == 1;
}

static mr_status find_loops(const sctx *c, loop_cand *loops, size_t *nloops, mr_error *err)
{
	const md_event *ev = c->md->events;
	uint32_t prev = UINT32_MAX;
	size_t n = 0;
	for (size_t i = 0; i < c->md->event_count; i++) {
		if (ev[i].action != MD_ACT_ALLOC || ev[i].stack >= c->s->stack_count ||
		    !c->info[ev[i].stack].loop_depth)
			continue;
		uint32_t cur = ev[i].stack;
		int level = prev == UINT32_MAX || prev == cur
		                ? -1
		                : back_edge(loop_chain(c, prev), loop_chain(c, cur));
		prev = cur;
		if (level < 0)
			continue;
		uint64_t key = loop_key(loop_chain(c, cur), level);
		size_t j = 0;
		while (j < n && loops[j].key != key)
			j++;
		if (j == n) {
			if (n == MAX_LOOPS)
				continue;
			memset(&loops[n], 0, sizeof loops[n]);
			loops[n].key = key;
			loops[n].stack = cur;
			loops[n].level = level;
			n++;
		}
		if (MR_GROW(loops[j].edges, loops[j].edge_cap, loops[j].edge_count + 1))
			return mr_oom(err);
		loops[j].edges[loops[j].edge_count++] = i;
	}
	*nloops = n;
	return MR_OK;
}

static int edges_desc(const void *a, const void *b)
{
	const loop_cand *x = a, *y = b;
	return (x->edge_count < y->edge_count) - (x->edge_count > y->edge_count);
}

/* The frame of the function that holds the loop, or NULL. */
static const md_frame *loop_function(const sctx *c, const loop_cand *l)
{
	const md_frame *fn = NULL;
	chain ch = loop_chain(c, l->stack);
	for (int i = 0; i <= l->level; i++)
		fn = chain_next(&ch);
	return fn;
}

/* generate()'s decoding loop, which calls the model once a token. */
static int generation_loop(const sctx *c, const loop_cand *l)
{
	const md_frame *fn = loop_function(c, l);
	return fn && an_path_has(md_str(c->s, fn->filename), "transformers/generation/");
}

/* A loop is an iteration loop when its function is not torch's own (the optimizer's loop over
 * its parameters, module._apply's) and most of its iterations call the model from its body. */
static mr_status qualify(const sctx *c, loop_cand *l, mr_error *err)
{
	const md_event *ev = c->md->events;
	const md_frame *fn = loop_function(c, l);
	if (!fn || an_torch_internal(md_str(c->s, fn->filename)))
		return MR_OK;
	l->member = mr_alloc_array(c->s->stack_count, 1);
	if (!l->member)
		return mr_oom(err);
	l->first_member = SIZE_MAX;
	size_t edge = 0, with_model = 0, iter_has_model = 0;
	for (size_t i = 0; i < c->md->event_count; i++) {
		while (edge < l->edge_count && l->edges[edge] <= i) {
			with_model += iter_has_model;
			iter_has_model = 0;
			edge++;
		}
		uint32_t st = ev[i].stack;
		if (ev[i].action != MD_ACT_ALLOC || st >= c->s->stack_count ||
		    !c->info[st].loop_depth || !in_body(c, l, st))
			continue;
		if (l->first_member == SIZE_MAX)
			l->first_member = i;
		if (c->info[st].flags & AN_SF_MODULE_CALL)
			iter_has_model = 1;
	}
	with_model += iter_has_model;
	l->iterations = l->edge_count + 1;
	l->qualifies = l->first_member != SIZE_MAX && with_model * 2 >= l->iterations;
	return MR_OK;
}

/* ---- phases: forwards, backwards, the optimizer ---- */

/* An allocation of the forward span being read. */
typedef struct {
	uint64_t addr, size;
	int freed;
} span_alloc;

typedef struct {
	size_t opt_allocs;
	size_t *fwd_starts;  /* the first forward, and each forward after a backward or a step */
	am_map span_firsts;  /* the first allocation's stack of each forward span read */
	int forward_repeats; /* a span began with a stack an earlier one began with: the same
	                        forward called again, not the next module of one step */
	size_t fwd_start_count, fwd_start_cap;
	uint64_t kept_alloc, kept_live;       /* over finished forwards */
	uint64_t first_alloc, first_live;     /* the first finished forward's share of them */
	size_t finished;                      /* finished forwards counted in kept_* */
	uint64_t survive_early, survive_live; /* over finished layers */
	size_t spans_graph, spans_no_graph;   /* finished forwards keeping / freeing their graph */
	double last_kept;                     /* what the last finished forward kept */
	double last_survival; /* what its finished layers kept; -1: too little to tell */
	size_t last_step;     /* the last backward or optimizer allocation's event; SIZE_MAX none */
	size_t ckpt_reach;    /* of the finished checkpointed forwards: the most allocations one
	                         made before checkpointing began, + 1; 0: none finished */
	uint32_t ckpt_stack;  /* the last of them's first allocation */
	am_map ckpt_ops;      /* the operations (note_ckpt_op) seen allocating under checkpoint */
	int last_unckpt;      /* the last finished forward called the same forward past ckpt_reach
	                         with nothing checkpointed */
	size_t span_at_oom;   /* the start of the last forward span begun by the last OOM */
	size_t *tail_starts;  /* a loop's iteration starts after last_step (its first excepted) */
	size_t tail_count;
} phases;

enum { PH_NONE, PH_FORWARD, PH_BACKWARD, PH_OPTIMIZER, PH_OTHER };

/* The forward span being read: its allocations (only this span's are kept, so memory follows
 * the largest forward, not the trace), the address of each that is still live, and the last
 * two layer boundaries (positions in allocs). */
typedef struct {
	span_alloc *allocs;
	size_t count, cap;
	am_map where; /* live address -> index into allocs */
	size_t marks[2];
	size_t mark_count;
	uint32_t prev_stack;
	uint32_t first_stack; /* the span's first allocation */
	size_t ckpt_at;       /* allocations before its first under torch.utils.checkpoint;
	                         SIZE_MAX: none */
	size_t unckpt_ops;    /* its allocations outside checkpoint by an operation that ran
	                         inside it elsewhere (phases.ckpt_ops) */
	int generates;        /* inside generate(), which runs under no_grad by construction: its
	                         forwards say nothing of whether the run's own forwards record a
	                         graph */
} span_state;

/* What the span allocated and still holds (sums[0], sums[1]), and the same over its finished
 * layers, all but the last two boundaries' worth (sums[2], sums[3]). */
static void span_sums(const span_state *sp, uint64_t sums[4])
{
	size_t cut = sp->mark_count >= 2 ? sp->marks[(sp->mark_count - 2) % 2] : 0;
	memset(sums, 0, 4 * sizeof *sums);
	for (size_t r = 0; r < sp->count; r++) {
		uint64_t size = sp->allocs[r].size, kept = sp->allocs[r].freed ? 0 : size;
		sums[0] += size;
		sums[1] += kept;
		if (r < cut) {
			sums[2] += size;
			sums[3] += kept;
		}
	}
}

enum { OP_FRAMES = 4, CKPT_MIN_OPS = 8 };

/* The innermost `frames` frames of a stack, as a map key (never 0 nor the map's reserved top
 * value). */
static uint64_t frames_key(const sctx *c, uint32_t stack, size_t frames)
{
	if (stack >= c->s->stack_count || !c->s->stacks[stack].count)
		return 0;
	const md_stack *st = &c->s->stacks[stack];
	uint64_t h = 0x9e3779b97f4a7c15ull;
	for (size_t k = 0; k < frames && k < st->count; k++) {
		const md_frame *f = &c->s->frames[st->first + k];
		uint64_t v[3] = {f->name, f->filename, (uint32_t)f->line};
		for (int j = 0; j < 3; j++) {
			h ^= v[j] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
			h *= 0xff51afd7ed558ccdull;
		}
	}
	return (h >> 2) | 1;
}

/* frames_key over at most `frames` innermost frames and, when to_user, none past the first of
 * the user's own code (a Python file outside libraries): the operation, wherever the user's
 * function that runs it was called from. */
static uint64_t op_key(const sctx *c, uint32_t stack, size_t frames, int to_user)
{
	if (stack >= c->s->stack_count || !c->kinds || !to_user)
		return frames_key(c, stack, frames);
	const md_stack *st = &c->s->stacks[stack];
	size_t n = 0;
	while (n < frames && n < st->count) {
		uint8_t k = c->kinds[st->first + n++];
		if ((k & AN_FK_PYTHON) && !(k & AN_FK_LIBRARY))
			break;
	}
	return frames_key(c, stack, n);
}

/* Notes an allocation's operation: under checkpoint (a checkpointed forward, or its recompute
 * in a backward), into ckpt_ops; in the forward span outside it, counted when the same
 * operation ran inside elsewhere. Returns 0, -1 when memory runs out. */
static int note_ckpt_op(const sctx *c, phases *ph, span_state *sp, const md_event *e, int fwd)
{
	if (e->stack >= c->s->stack_count)
		return 0;
	/* the operation: its innermost frames, the calling module's line among them, so a
	 * layer's op inside a checkpointed block and the same module called elsewhere differ */
	uint64_t key = frames_key(c, e->stack, OP_FRAMES), seen;
	if (!key)
		return 0;
	if (c->info[e->stack].flags & AN_SF_CHECKPOINT)
		return am_put(&ph->ckpt_ops, key, 1) ? -1 : 0;
	if (fwd && ph->ckpt_ops.count && am_get(&ph->ckpt_ops, key, &seen))
		sp->unckpt_ops++;
	return 0;
}

/* Whether a forward span called the forward that earlier ran checkpointed (the same first
 * stack), went past where checkpointing began there, and checkpointed nothing: checkpointing
 * enabled, but not running (a Hugging Face model left in eval(): its layers checkpoint only
 * while training). */
static int ckpt_skipped(const span_state *sp, const phases *ph)
{
	return ph->ckpt_reach && sp->ckpt_at == SIZE_MAX && sp->count >= ph->ckpt_reach &&
	       sp->first_stack == ph->ckpt_stack;
}

/* Adds up what the span kept, as a whole (when it finished) and over its finished layers, and
 * empties it for the next span. */
static void close_span(span_state *sp, int finished, phases *ph)
{
	uint64_t sums[4];
	span_sums(sp, sums);
	uint64_t alloc = sums[0], live = sums[1], early = sums[2], early_live = sums[3];
	if (finished && !sp->generates) {
		ph->last_unckpt = ckpt_skipped(sp, ph);
		if (sp->ckpt_at != SIZE_MAX) {
			ph->ckpt_reach = MR_MAX(ph->ckpt_reach, sp->ckpt_at + 1);
			ph->ckpt_stack = sp->first_stack;
		}
	}
	int told = sp->count >= SPAN_MIN_ALLOCS || (double)live < (double)alloc * KEPT_NO_GRAPH;
	if (finished && alloc >= MR_MIB && told && !sp->generates) {
		if (!ph->finished++) {
			ph->first_alloc = alloc;
			ph->first_live = live;
		}
		ph->kept_alloc += alloc;
		ph->kept_live += live;
		ph->last_kept = (double)live / (double)alloc;
		ph->spans_graph += ph->last_kept >= KEPT_GRAPH;
		ph->spans_no_graph += ph->last_kept < KEPT_NO_GRAPH;
	}
	ph->last_survival = -1;
	if (sp->mark_count >= 2 && early >= MR_MIB && !sp->generates) {
		ph->survive_early += early;
		ph->survive_live += early_live;
		ph->last_survival = (double)early_live / (double)early;
	}
	am_free(&sp->where);
	sp->count = 0;
	sp->mark_count = 0;
	sp->prev_stack = UINT32_MAX;
	sp->ckpt_at = SIZE_MAX;
	sp->unckpt_ops = 0;
}

/* Records a forward allocation, and a layer boundary where the model's own code calls a
 * function again. Returns 0, -1 when memory runs out. */
static int span_add(const sctx *c, span_state *sp, const md_event *e)
{
	if (MR_GROW(sp->allocs, sp->cap, sp->count + 1) || am_put(&sp->where, e->addr, sp->count))
		return -1;
	sp->allocs[sp->count] = (span_alloc){e->addr, block_size(e->size), 0};
	if (sp->prev_stack != UINT32_MAX && sp->prev_stack != e->stack &&
	    back_edge(model_chain(c, sp->prev_stack), model_chain(c, e->stack)) >= 0)
		sp->marks[sp->mark_count++ % 2] = sp->count;
	sp->prev_stack = e->stack;
	if (sp->ckpt_at == SIZE_MAX && e->stack < c->s->stack_count &&
	    (c->info[e->stack].flags & AN_SF_CHECKPOINT))
		sp->ckpt_at = sp->count;
	sp->count++;
	return 0;
}

static int phase_of(const sctx *c, uint32_t stack)
{
	if (stack >= c->s->stack_count)
		return PH_OTHER;
	uint32_t f = c->info[stack].flags;
	if ((!(f & AN_SF_PYTHON) && c->trace_has_python) ||
	    (f & (AN_SF_BACKWARD | AN_SF_ENGINE_THREAD)))
		return PH_BACKWARD;
	if (f & AN_SF_MODULE_CALL)
		return PH_FORWARD;
	if (f & AN_SF_OPTIMIZER)
		return PH_OPTIMIZER;
	return f & AN_SF_PYTHON ? PH_OTHER : PH_NONE;
}

/* The backward passes since the last optimizer step (or zero_grad), and the forward the last one
 * followed. Microbatches repeat one forward from one line of the loop; the losses of one step
 * (a critic's real, fake and gradient-penalty passes, a second backward through the same graph)
 * are not microbatches. */
typedef struct {
	size_t count;    /* backward passes since the last step */
	uint32_t fwd;    /* the first allocation's stack of the forward the last one followed */
	size_t fwd_span; /* that forward's number (forward_spans then) */
} since_step_t;

/* Counts backward passes and optimizer steps at each change of phase; fwd is the first stack of
 * the forward read last. */
static void count_phase(an_structure *out, phases *ph, int phase, int p, since_step_t *ss,
                        uint32_t fwd)
{
	if (p == PH_BACKWARD && phase != PH_BACKWARD) {
		out->backward_phases++;
		if (ss->count && out->forward_spans != ss->fwd_span && fwd == ss->fwd)
			out->accumulating = 1;
		ss->count++;
		ss->fwd = fwd;
		ss->fwd_span = out->forward_spans;
	}
	if (p == PH_OPTIMIZER) {
		ph->opt_allocs++;
		out->optimizer_phases += phase != PH_OPTIMIZER;
		ss->count = 0;
	}
}

/* Whether two stacks end in the same innermost frames (the same op of the same layer), whatever
 * called them: the model's first allocation again, from another line of the loop. */
static int same_innermost(const sctx *c, uint32_t a, uint32_t b)
{
	enum { INNER = 4 };
	if (a >= c->s->stack_count || b >= c->s->stack_count)
		return 0;
	const md_stack *x = &c->s->stacks[a], *y = &c->s->stacks[b];
	if (!x->count || !y->count)
		return 0;
	for (size_t k = 0; k < INNER && k < x->count && k < y->count; k++) {
		const md_frame *f = &c->s->frames[x->first + k], *g = &c->s->frames[y->first + k];
		if (f->name != g->name || f->filename != g->filename || f->line != g->line)
			return 0;
	}
	return 1;
}

/* A forward cut short by a handled OOM: what it allocated that was still live then, and whether
 * the model was called again from its first allocation (a retry). */
typedef struct {
	am_map held; /* address -> bytes, of the failed forward's live allocations */
	size_t oom_event;
	uint32_t first_stack; /* the failed forward's first allocation */
	int armed, retried;
} failed_fwd;

static int hold_failed(failed_fwd *ff, const span_state *sp, size_t i)
{
	am_free(&ff->held);
	ff->armed = 1;
	ff->retried = 0;
	ff->oom_event = i;
	ff->first_stack = sp->first_stack;
	for (size_t r = 0; r < sp->count; r++)
		if (!sp->allocs[r].freed &&
		    am_put(&ff->held, sp->allocs[r].addr, sp->allocs[r].size))
			return -1;
	return 0;
}

/* Whether the forward the last OOM cut short was saving its finished layers' tensors for a
 * backward (survival over them), when it had finished enough of them to tell. */
static void oom_forward_survival(const span_state *sp, an_structure *out)
{
	uint64_t sums[4];
	span_sums(sp, sums);
	/* checkpointed blocks free their layers' tensors too, and recompute them in backward:
	 * a forward that checkpointed nothing is judged as any other */
	if (sums[2] < MR_MIB || ((out->techniques & AN_TECH_CHECKPOINT) && sp->ckpt_at != SIZE_MAX))
		return;
	double survival = (double)sums[3] / (double)sums[2];
	out->oom_forward_graph = survival >= SURVIVAL_GRAPH     ? 1
	                         : survival < SURVIVAL_NO_GRAPH ? -1
	                                                        : 0;
}

/* The last forward that kept its finished layers' tensors for a backward that has not run
 * yet: its allocations that are still live. */
typedef struct {
	am_map held; /* address -> bytes */
	uint32_t stack;
	int armed;
} graph_hold;

/* The last forward that saved nothing for a backward (an evaluation under no_grad) in a run of
 * such forwards that came after two graph-keeping forwards or more in a row: an occasional
 * pass, not one every step needs (a teacher's, a reference model's). What it allocated that is
 * still live is its outputs, which something outside it holds. */
typedef struct {
	am_map held; /* address -> bytes */
	uint32_t stack;
	size_t graph_run;    /* graph-keeping forwards since the last no-graph one */
	int occasional;      /* the current run of no-graph forwards is such a pass */
	int armed, followed; /* followed: a graph-keeping forward ran after it */
} nograd_hold;

static int hold_span(am_map *m, const span_state *sp)
{
	am_free(m);
	for (size_t r = 0; r < sp->count; r++)
		if (!sp->allocs[r].freed && am_put(m, sp->allocs[r].addr, sp->allocs[r].size))
			return -1;
	return 0;
}

/* Ends the span; one whose finished layers kept their tensors becomes the held graph, one
 * that kept none after a run of graph-keeping ones the held no-graph pass. */
static int end_span(span_state *sp, int finished, phases *ph, graph_hold *gh, nograd_hold *nh)
{
	uint64_t sums[4];
	span_sums(sp, sums);
	int told = sp->mark_count >= 2 && sums[2] >= MR_MIB && !sp->generates;
	double survival = told ? (double)sums[3] / (double)sums[2] : -1;
	if (told && survival < SURVIVAL_NO_GRAPH) {
		nh->occasional = nh->graph_run >= 2 || (!nh->graph_run && nh->occasional);
		nh->graph_run = 0;
		nh->armed = nh->occasional;
		nh->followed = 0;
		nh->stack = sp->first_stack;
		if (!nh->armed)
			am_free(&nh->held);
		else if (hold_span(&nh->held, sp))
			return -1;
	} else if (told && survival >= SURVIVAL_GRAPH) {
		nh->graph_run++;
		nh->followed |= nh->armed;
		gh->armed = 1;
		gh->stack = sp->first_stack;
		if (hold_span(&gh->held, sp))
			return -1;
	}
	close_span(sp, finished, ph);
	return 0;
}

/* At the last OOM: a forward that saved nothing for a backward (the one it cut short, or the
 * one that finished before the OOM with no backward since: its loss or metric failed) while
 * the held graph's backward had not run: what of that graph is still live. */
static void graph_at_oom(const phases *ph, int in_forward, int since_forward, const graph_hold *gh,
                         an_structure *out)
{
	/* checkpointed blocks free their layers' tensors too (oom_forward_survival) */
	if (!in_forward && !since_forward && ph->last_survival >= 0 &&
	    ph->last_survival < SURVIVAL_NO_GRAPH && !(out->techniques & AN_TECH_CHECKPOINT))
		out->oom_forward_graph = -1;
	if (out->oom_forward_graph >= 0 || !gh->armed)
		return;
	for (size_t k = 0; k < gh->held.cap; k++)
		if (gh->held.slots[k].key)
			out->graph_held_at_oom += gh->held.slots[k].val;
	out->graph_held_stack = gh->stack;
}

/* At the last OOM: what of the held no-graph pass is still live, when a graph-keeping forward
 * ran after it. */
static void nograd_at_oom(const nograd_hold *nh, an_structure *out)
{
	if (!nh->armed || !nh->followed)
		return;
	for (size_t k = 0; k < nh->held.cap; k++)
		if (nh->held.slots[k].key)
			out->nograd_held_at_oom += nh->held.slots[k].val;
	out->nograd_held_stack = nh->stack;
}

static size_t last_oom_event(const md_device *md)
{
	for (size_t i = md->event_count; i-- > 0;)
		if (md->events[i].action == MD_ACT_OOM)
			return i;
	return SIZE_MAX;
}

/* One pass: backward phases, forward spans and how much of what they allocate they keep. */
static mr_status read_phases(const sctx *c, an_structure *out, phases *ph, mr_error *err)
{
	const md_event *ev = c->md->events;
	span_state sp = {.prev_stack = UINT32_MAX, .ckpt_at = SIZE_MAX};
	failed_fwd ff = {0};
	graph_hold gh = {0};
	nograd_hold nh = {0};
	int phase = PH_NONE, since_forward = 1; /* a backward or step since the last forward */
	since_step_t since_step = {0, UINT32_MAX, 0};
	size_t last_oom = last_oom_event(c->md);
	mr_status st = MR_OK;
	uint64_t idx, bytes;
	ph->last_survival = -1;
	for (size_t i = 0; i < c->md->event_count; i++) {
		const md_event *e = &ev[i];
		if (e->action == MD_ACT_FREE_REQUESTED) {
			if (am_take(&sp.where, e->addr, &idx))
				sp.allocs[idx].freed = 1;
			if (ff.armed)
				am_take(&ff.held, e->addr, &bytes);
			if (gh.armed)
				am_take(&gh.held, e->addr, &bytes);
			if (nh.armed)
				am_take(&nh.held, e->addr, &bytes);
			/* zero_grad() freeing gradients ends a step, even one whose optimizer
			 * allocates nothing (SGD once its momentum exists): the next backward is
			 * not accumulating into them */
			if (e->stack < c->s->stack_count &&
			    (c->info[e->stack].flags & AN_SF_ZERO_GRAD))
				since_step.count = 0;
			continue;
		}
		if (i == last_oom)
			nograd_at_oom(&nh, out);
		if (i == last_oom && ff.armed) {
			if (ff.retried)
				for (size_t k = 0; k < ff.held.cap; k++)
					if (ff.held.slots[k].key)
						out->held_from_failed += ff.held.slots[k].val;
			out->handled_oom_event = ff.oom_event;
			ff.armed = 0;
		}
		if (e->action == MD_ACT_OOM && phase == PH_FORWARD) {
			/* the forward died here: it did not finish, whatever runs next */
			out->forwards_cut++;
			if (i == last_oom) {
				oom_forward_survival(&sp, out);
				/* of a window with no checkpointed forward of this call: its
				 * layers' operations, checkpointed in an earlier backward's
				 * recompute, ran outside checkpoint, saving their tensors */
				out->checkpoint_skipped =
				    ckpt_skipped(&sp, ph) ||
				    (sp.ckpt_at == SIZE_MAX && sp.unckpt_ops >= CKPT_MIN_OPS &&
				     out->oom_forward_graph == 1);
				graph_at_oom(ph, 1, since_forward, &gh, out);
			}
			if (i < last_oom && hold_failed(&ff, &sp, i))
				goto oom;
			close_span(&sp, 0, ph);
			phase = PH_NONE;
			continue;
		}
		if (i == last_oom) {
			graph_at_oom(ph, 0, since_forward, &gh, out);
			out->checkpoint_skipped = ph->last_unckpt;
		}
		int p = e->action == MD_ACT_ALLOC ? phase_of(c, e->stack) : PH_NONE;
		if (p == PH_NONE)
			continue;
		count_phase(out, ph, phase, p, &since_step, sp.first_stack);
		if (p == PH_BACKWARD || p == PH_OPTIMIZER) {
			gh.armed = 0; /* its backward ran, or a step after one */
			ph->last_step = i;
		}
		if (phase == PH_FORWARD && p != PH_FORWARD && end_span(&sp, 1, ph, &gh, &nh))
			goto oom;
		if (p == PH_FORWARD && phase != PH_FORWARD) {
			out->maybe_accumulating |= since_step.count && !out->optimizer_phases;
			out->forward_spans++;
			sp.first_stack = e->stack;
			uint64_t seen;
			if (am_get(&ph->span_firsts, e->stack, &seen))
				ph->forward_repeats = 1;
			else if (am_put(&ph->span_firsts, e->stack, 1))
				goto oom;
			sp.generates = (c->info[e->stack].flags & AN_SF_GENERATE) != 0;
			ph->span_at_oom = i <= last_oom ? i : ph->span_at_oom;
			ff.retried |= ff.armed && same_innermost(c, e->stack, ff.first_stack);
			if (since_forward &&
			    MR_GROW(ph->fwd_starts, ph->fwd_start_cap, ph->fwd_start_count + 1))
				goto oom;
			if (since_forward)
				ph->fwd_starts[ph->fwd_start_count++] = i;
			since_forward = 0;
		}
		since_forward |= p == PH_BACKWARD || p == PH_OPTIMIZER;
		phase = p;
		if (p == PH_FORWARD && span_add(c, &sp, e))
			goto oom;
		if ((out->flags_seen & AN_SF_CHECKPOINT) &&
		    note_ckpt_op(c, ph, &sp, e, p == PH_FORWARD))
			goto oom;
	}
	if (phase == PH_FORWARD)
		close_span(&sp, 0, ph);
	/* a framework's evaluation or prediction loop runs its steps under no_grad, whatever the
	 * forward's survival shows (or could not: an OOM in its loss) */
	if (last_oom != SIZE_MAX && ev[last_oom].stack < c->s->stack_count &&
	    (c->info[ev[last_oom].stack].flags & AN_SF_NO_GRAD_LOOP))
		out->oom_forward_graph = -1;
	goto done;
oom:
	st = mr_oom(err);
done:
	free(sp.allocs);
	am_free(&sp.where);
	am_free(&ff.held);
	am_free(&gh.held);
	am_free(&nh.held);
	return st;
}

/* ---- the input of the forward that failed, against the earlier ones ---- */

/* INPUT_INNER innermost frames (frames_key): the same operation of the same layer, whichever
 * loop called the model. */
enum { INPUT_INNER = 8, INPUT_MIN_SITES = 4 };

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Puts key's request into m unless m holds a larger one. Returns 0, -1 when memory runs out. */
static int put_largest(am_map *m, uint64_t key, uint64_t size)
{
	uint64_t have = 0;
	return (!am_get(m, key, &have) || have < size) && am_put(m, key, size) ? -1 : 0;
}

/* Each forward operation's largest request (1 MiB or more) from event `from` to the OOM's own
 * (maps[1]), and before `from` (maps[0]); trained: before it, only in the forward span each
 * backward followed (an evaluation's forwards between steps left out). user: operations keyed up
 * to the user's own first frame. Returns 0, -1 when memory runs out. */
static int input_maps(const sctx *c, size_t from, size_t oom, int user, int trained, am_map *maps)
{
	am_map span = {0}; /* the current forward span's, while trained */
	int phase = PH_NONE, st = 0;
	for (size_t i = 0; i <= oom && !st; i++) {
		const md_event *e = &c->md->events[i];
		if (e->action != MD_ACT_ALLOC && i != oom)
			continue;
		int p = phase_of(c, e->stack);
		if (trained && i < from && p != PH_NONE) {
			if (p == PH_FORWARD && phase != PH_FORWARD)
				am_free(&span);
			if (p == PH_BACKWARD && span.count) {
				for (size_t k = 0; k < span.cap && !st; k++)
					if (span.slots[k].key)
						st = put_largest(&maps[0], span.slots[k].key - 1,
						                 span.slots[k].val);
				am_free(&span);
			}
			phase = p;
		}
		uint64_t key;
		if (e->size < MR_MIB || p != PH_FORWARD ||
		    !(key = op_key(c, e->stack, INPUT_INNER, user)))
			continue;
		st = put_largest(i >= from ? &maps[1] : trained ? &span : &maps[0], key, e->size);
	}
	am_free(&span);
	return st;
}

/* The median ratio of maps[1]'s requests over maps[0]'s for the operations both hold, into out
 * (with the failing operation's own), when INPUT_MIN_SITES of them, or two or more that all
 * asked for more, tell it. Returns 0, -1 when memory runs out. */
static int input_ratio(const sctx *c, size_t oom, int user, am_map *maps, an_structure *out)
{
	double *ratios = mr_alloc_array(maps[1].count ? maps[1].count : 1, sizeof *ratios);
	size_t n = 0;
	if (!ratios)
		return -1;
	for (size_t k = 0; k < maps[1].cap; k++) {
		uint64_t before;
		if (maps[1].slots[k].key && am_get(&maps[0], maps[1].slots[k].key - 1, &before))
			ratios[n++] = (double)maps[1].slots[k].val / (double)before;
	}
	if (n)
		qsort(ratios, n, sizeof *ratios, dbl_cmp);
	/* fewer operations (a forward that died at its first layers) tell it only together */
	if (n >= INPUT_MIN_SITES || (n >= 2 && ratios[0] > 1)) {
		uint64_t key = op_key(c, c->md->events[oom].stack, INPUT_INNER, user), before, now;
		if (key && phase_of(c, c->md->events[oom].stack) == PH_FORWARD &&
		    am_get(&maps[0], key, &before) && before && am_get(&maps[1], key, &now))
			out->oom_request_ratio = (double)now / (double)before;
		out->oom_input_ratio =
		    n % 2 ? ratios[n / 2] : (ratios[n / 2 - 1] + ratios[n / 2]) / 2;
		out->oom_input_sites = n;
	}
	free(ratios);
	return 0;
}

/* How much larger the input of the forward the last OOM ended was than the earlier forwards'
 * (input_ratio). Needs a forward before it (one after a backward or step; without a backward,
 * the last forward span). Without a backward, an operation is the same wherever the user's code
 * called it from; with one, a window from the last step to the OOM may hold an evaluation's
 * forwards and a training one's, from different lines: only the same call's operations compare,
 * and when those are too few, the operations keyed to the user's frame in the forwards that
 * trained (an evaluation after training, from its own line, against the training forwards). */
static mr_status read_input_ratio(const sctx *c, const phases *ph, an_structure *out, mr_error *err)
{
	size_t oom = last_oom_event(c->md), from = SIZE_MAX;
	for (size_t k = ph->fwd_start_count; oom != SIZE_MAX && k-- > 1;)
		if (ph->fwd_starts[k] <= oom) {
			from = ph->fwd_starts[k];
			break;
		}
	if (from == SIZE_MAX && !out->backward_phases && oom != SIZE_MAX)
		from = ph->span_at_oom;
	if (from == SIZE_MAX)
		return MR_OK;
	int user = !out->backward_phases;
	am_map maps[2] = {{0}, {0}}; /* before the failing forward, in it */
	int st = input_maps(c, from, oom, user, 0, maps) || input_ratio(c, oom, user, maps, out);
	if (!st && !out->oom_input_sites && out->backward_phases) {
		am_free(&maps[0]);
		am_free(&maps[1]);
		st = input_maps(c, from, oom, 1, 1, maps) || input_ratio(c, oom, 1, maps, out);
		out->oom_input_other_call = out->oom_input_sites != 0;
	}
	am_free(&maps[0]);
	am_free(&maps[1]);
	return st ? mr_oom(err) : MR_OK;
}

/* ---- iteration boundaries from annotations ---- */

/* The START of the record_function annotation that repeats most often on this device (an
 * optimizer step, usually), at least 4 times, mapped to the first event at or after it. An
 * annotation that mostly starts inside an open occurrence of a repeated annotation (its own
 * name or another: FSDP's per-module forward, whose root call holds every wrapped layer's) is a
 * call nested in a call, not a step: it is not taken, whatever its count; nor is one that
 * starts more often than the trace's forwards. */
static mr_status annotation_starts(const sctx *c, an_structure *out, mr_error *err)
{
	const md_snapshot *s = c->s;
	const md_device *md = c->md;
	uint32_t best = 0;
	size_t best_count = 0;
	if (md->event_count == 0 || md_event_time(md, 0) == MD_TIME_NONE)
		return MR_OK;
	/* names are string ids: count them in one pass over a small table */
	uint32_t names[64];
	size_t counts[64], nested[64] = {0}, depth[64] = {0}, nn = 0;
	for (size_t i = 0; i < s->annotation_count; i++) {
		const md_annotation *a = &s->annotations[i];
		if (a->is_end || a->device != md->id || a->time_us == MD_TIME_NONE)
			continue;
		size_t j = 0;
		while (j < nn && names[j] != a->name)
			j++;
		if (j == nn) {
			if (nn == 64)
				continue;
			names[nn] = a->name;
			counts[nn++] = 0;
		}
		counts[j]++;
	}
	/* second pass, in trace order: which STARTs fall inside an open repeated annotation */
	for (size_t i = 0; i < s->annotation_count; i++) {
		const md_annotation *a = &s->annotations[i];
		if (a->device != md->id || a->time_us == MD_TIME_NONE)
			continue;
		size_t j = 0;
		while (j < nn && names[j] != a->name)
			j++;
		if (j == nn)
			continue;
		if (a->is_end) {
			if (depth[j])
				depth[j]--;
			continue;
		}
		for (size_t k = 0; k < nn; k++)
			if (depth[k] && counts[k] >= 2) {
				nested[j]++;
				break;
			}
		depth[j]++;
	}
	for (size_t j = 0; j < nn; j++)
		if (counts[j] > best_count && nested[j] * 2 < counts[j]) {
			best = names[j];
			best_count = counts[j];
		}
	/* an iteration holds a forward at least: an annotation that starts more often than the
	 * trace's forwards (one more for a step begun before the first) is per module or per
	 * collective (FSDP2's input cast, a barrier), not per step */
	if (best_count < 4 || (out->forward_spans && best_count > out->forward_spans + 1))
		return MR_OK;
	out->starts = mr_alloc_array(best_count, sizeof *out->starts);
	if (!out->starts)
		return mr_oom(err);
	size_t e = 0;
	for (size_t i = 0; i < s->annotation_count; i++) {
		const md_annotation *a = &s->annotations[i];
		if (a->is_end || a->name != best || a->device != md->id)
			continue;
		while (e < md->event_count && md_event_time(md, e) < a->time_us)
			e++;
		if (e < md->event_count &&
		    (out->start_count == 0 || out->starts[out->start_count - 1] < e))
			out->starts[out->start_count++] = e;
	}
	out->iter_source = out->start_count ? AN_ITER_ANNOTATION : AN_ITER_NONE;
	return MR_OK;
}

/* ---- choosing the iterations ---- */

static mr_status take_loop(const sctx *c, an_structure *out, const loop_cand *l, mr_error *err)
{
	out->starts = mr_alloc_array(l->edge_count + 1, sizeof *out->starts);
	if (!out->starts)
		return mr_oom(err);
	out->starts[out->start_count++] = l->first_member;
	for (size_t i = 0; i < l->edge_count; i++)
		if (l->edges[i] > out->starts[out->start_count - 1])
			out->starts[out->start_count++] = l->edges[i];
	out->iter_source = AN_ITER_LOOP;
	out->loop_stack = l->stack;
	out->loop_level = (uint32_t)l->level;
	out->loop_decodes = generation_loop(c, l);
	return MR_OK;
}

/* How many of a loop's back-edges come after event `after` (SIZE_MAX: none). */
static size_t tail_edges(const loop_cand *l, size_t after)
{
	size_t n = 0;
	for (size_t i = 0; after != SIZE_MAX && i < l->edge_count; i++)
		n += l->edges[i] > after;
	return n;
}

/* The outermost iteration loop with at least three iterations (an epoch loop around a step
 * loop, a step loop around gradient accumulation), else the one with most. With backward
 * passes in the trace, an iteration holds at least one: a loop with more iterations than
 * backward passes is not the training loop. */
static mr_status choose_iterations(const sctx *c, an_structure *out, phases *ph, mr_error *err)
{
	loop_cand loops[MAX_LOOPS];
	size_t n = 0;
	mr_status st = find_loops(c, loops, &n, err);
	qsort(loops, n, sizeof *loops, edges_desc);
	const loop_cand *best = NULL, *tail = NULL;
	size_t tail_after = 0;
	for (size_t i = 0; i < n && i < CHECKED_LOOPS && !st; i++) {
		loop_cand *l = &loops[i];
		if ((st = qualify(c, l, err)) || !l->qualifies)
			continue;
		/* a loop's iterations after the training's last backward and step: an evaluation
		 * over its batches (its own loop, or one of the same function and level) */
		size_t after = tail_edges(l, ph->last_step);
		if (out->backward_phases && after >= 4 && after > tail_after &&
		    !generation_loop(c, l)) {
			tail = l;
			tail_after = after;
		}
		if (out->backward_phases && l->iterations > out->backward_phases + 1)
			continue;
		/* in training, generate()'s tokens are not its steps (a PPO step generates first);
		 * in inference they are what the run iterates over */
		if (out->kind == AN_RUN_TRAINING && generation_loop(c, l))
			continue;
		int big = l->iterations >= 3, best_big = best && best->iterations >= 3;
		if (!best || big > best_big ||
		    (big == best_big &&
		     (l->level < best->level ||
		      (l->level == best->level && l->iterations > best->iterations))))
			best = l;
	}
	if (!st && tail && tail != best) {
		ph->tail_starts = mr_alloc_array(tail_after, sizeof *ph->tail_starts);
		if (!ph->tail_starts)
			st = mr_oom(err);
		for (size_t i = 0; !st && i < tail->edge_count; i++)
			if (tail->edges[i] > ph->last_step &&
			    (!ph->tail_count ||
			     tail->edges[i] > ph->tail_starts[ph->tail_count - 1]))
				ph->tail_starts[ph->tail_count++] = tail->edges[i];
	}
	if (!st && best)
		st = take_loop(c, out, best, err);
	else if (!st && ph->fwd_start_count >= 2 && out->backward_phases) {
		out->starts = ph->fwd_starts;
		out->start_count = ph->fwd_start_count;
		ph->fwd_starts = NULL;
		out->iter_source = AN_ITER_BACKWARD;
	} else if (!st) {
		st = annotation_starts(c, out, err);
	}
	for (size_t i = 0; i < n; i++) {
		free(loops[i].edges);
		free(loops[i].member);
	}
	return st;
}

/* ---- growth ---- */

static int i64_cmp(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static int site_cmp(const void *a, const void *b)
{
	const an_growth_site *x = a, *y = b;
	if (x->total_bytes != y->total_bytes)
		return x->total_bytes < y->total_bytes ? 1 : -1;
	return (x->stack > y->stack) - (x->stack < y->stack);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* One forward walk over a device's trace for the readers of its iterations (read_carried,
 * read_growth, read_peak_rise). Ownership: walk_free releases it. */
typedef struct {
	am_map live;    /* address -> event index of its allocation, for those live at the end */
	int64_t *level; /* block bytes allocated at each iteration's start (start_count) */
	int64_t *peak;  /* the requested bytes' highest level in each whole iteration (the last runs
	                   to the trace's end), relative to the trace's start: offsets cancel */
} live_walk;

static void walk_free(live_walk *w)
{
	am_free(&w->live);
	free(w->level);
	free(w->peak);
}

static int is_activation(const sctx *c, uint32_t stack)
{
	return stack < c->s->stack_count &&
	       an_stack_category(c->info, stack, AN_CAT_GRADIENTS) == AN_CAT_ACTIVATIONS;
}

static mr_status walk_live(const sctx *c, an_structure *out, uint64_t initial, live_walk *w,
                           mr_error *err)
{
	const md_event *ev = c->md->events;
	size_t m = out->start_count, k = 0, first = m ? out->starts[0] : 0;
	/* activations allocated since the first iteration's start and live now: at a later
	 * iteration's start, what earlier iterations' forwards left alive (held_activations) */
	uint64_t alloc = initial, at, acts = 0;
	int64_t now = 0;
	memset(w, 0, sizeof *w);
	w->level = mr_alloc_array(m, sizeof *w->level);
	w->peak = mr_alloc_array(m, sizeof *w->peak);
	if (!w->level || !w->peak)
		return mr_oom(err);
	for (size_t i = 0; i < c->md->event_count; i++) {
		for (; k < m && out->starts[k] == i; k++) {
			w->level[k] = (int64_t)alloc;
			w->peak[k] = now;
			if (k && acts > out->held_activations) {
				out->held_activations = acts;
				out->held_iteration = k;
			}
		}
		const md_event *e = &ev[i];
		if (e->action == MD_ACT_ALLOC) {
			alloc += block_size(e->size);
			now += (int64_t)e->size;
			if (am_put(&w->live, e->addr, i))
				return mr_oom(err);
			if (i >= first && is_activation(c, e->stack))
				acts += block_size(e->size);
		} else if (e->action == MD_ACT_FREE_REQUESTED) {
			uint64_t b = block_size(e->size);
			alloc = alloc > b ? alloc - b : 0;
			now -= (int64_t)e->size;
			if (am_take(&w->live, e->addr, &at) && at >= first && at < i &&
			    is_activation(c, ev[at].stack))
				acts = acts > b ? acts - b : 0;
		}
		if (k)
			w->peak[k - 1] = MR_MAX(w->peak[k - 1], now);
	}
	for (; k < m; k++)
		w->level[k] = (int64_t)alloc;
	return MR_OK;
}

/* an_structure.peak_rise, from the peaks of the whole iterations. */
static mr_status read_peak_rise(const live_walk *w, an_structure *out, mr_error *err)
{
	size_t n = out->start_count - 1, up = 0;
	uint64_t *rise = mr_alloc_array(n, sizeof *rise);
	if (!rise)
		return mr_oom(err);
	for (size_t k = 1; k < n; k++) {
		up += w->peak[k] > w->peak[k - 1];
		rise[k - 1] =
		    w->peak[k] > w->peak[k - 1] ? (uint64_t)(w->peak[k] - w->peak[k - 1]) : 0;
	}
	if (n - 1 >= 3 && up * 4 >= (n - 1) * 3) {
		qsort(rise, n - 1, sizeof *rise, cmp_u64);
		out->peak_rise = rise[(n - 1) / 2];
	}
	free(rise);
	return MR_OK;
}

/* Growth in steps (an_structure.growth_stepped) over the increments inc[0..n): at least
 * min_rises rises of GROWTH_MIN_BYTES or more, the largest at most twice the smallest (one kind
 * of thing added each time); no increment between them falling by half the smallest rise or
 * more, and the increments' sum short of the rises' by less than that: what each rise added is
 * still alive. Fills out's step fields and growth_per_iteration (the average) and returns the
 * number of rises when so, 0 else. */
static size_t read_steps(const int64_t *inc, size_t n, size_t min_rises, an_structure *out)
{
	size_t rises = 0, first = 0, last = 0;
	int64_t smallest = INT64_MAX, largest = 0, sum_rises = 0, sum = 0, lowest = 0;
	for (size_t i = 0; i < n; i++) {
		sum += inc[i];
		lowest = MR_MIN(lowest, inc[i]);
		if (inc[i] < (int64_t)GROWTH_MIN_BYTES)
			continue;
		first = rises++ ? first : i;
		last = i;
		sum_rises += inc[i];
		smallest = MR_MIN(smallest, inc[i]);
		largest = MR_MAX(largest, inc[i]);
	}
	if (rises < MR_MAX(min_rises, 2) || largest > 2 * smallest || -lowest * 2 >= smallest ||
	    (sum_rises - sum) * 2 >= smallest)
		return 0;
	out->growth_step_bytes = (uint64_t)(sum_rises / (int64_t)rises);
	out->growth_step_every = (last - first + (rises - 1) / 2) / (rises - 1);
	out->growth_per_iteration = (uint64_t)(sum / (int64_t)n);
	return rises;
}

/* Of a truncated trace: what each growth site's stack holds at the snapshot in blocks the
 * window never allocated (made before it, still live). */
static void growth_before_window(const sctx *c, const live_walk *w, an_structure *out)
{
	uint64_t idx;
	for (size_t i = 0; i < c->s->segment_count; i++) {
		const md_segment *seg = &c->s->segments[i];
		for (size_t j = 0; seg->device == c->md->id && j < seg->block_count; j++) {
			const md_block *b = &c->s->blocks[seg->first_block + j];
			if (b->state == MD_BLOCK_INACTIVE || b->stack == MD_NO_STACK ||
			    am_get(&w->live, b->address, &idx))
				continue;
			for (size_t k = 0; k < out->growth_site_count; k++)
				if (out->growth_sites[k].stack == b->stack) {
					out->growth_sites[k].before_window += b->size;
					break;
				}
		}
	}
}

/* an_structure.growth_sites: what is still alive from iterations 1 .. m-2 (whole iterations
 * after the first), by stack. Returns 0, -1 when memory runs out. */
static int collect_growth_sites(const sctx *c, const live_walk *w, an_structure *out)
{
	const md_event *ev = c->md->events;
	size_t m = out->start_count, from = out->starts[1], to = out->starts[m - 1], nsites = 0;
	uint64_t *site_bytes = mr_alloc_array(c->s->stack_count, sizeof *site_bytes);
	uint64_t *site_blocks = mr_alloc_array(c->s->stack_count, sizeof *site_blocks);
	int rc = -1;
	if (!site_bytes || !site_blocks)
		goto done;
	for (size_t i = 0; i < w->live.cap; i++) {
		if (!w->live.slots[i].key)
			continue;
		size_t ai = (size_t)w->live.slots[i].val;
		if (ai < from || ai >= to)
			continue;
		uint32_t stk = ev[ai].stack < c->s->stack_count ? ev[ai].stack : 0;
		nsites += site_bytes[stk] == 0;
		site_bytes[stk] += block_size(ev[ai].size);
		site_blocks[stk]++;
	}
	out->growth_sites = mr_alloc_array(nsites ? nsites : 1, sizeof *out->growth_sites);
	if (!out->growth_sites)
		goto done;
	for (uint32_t j = 0; j < c->s->stack_count; j++) {
		if (!site_bytes[j])
			continue;
		an_growth_site *gs = &out->growth_sites[out->growth_site_count++];
		gs->stack = j;
		gs->total_bytes = site_bytes[j];
		gs->blocks = site_blocks[j];
		gs->bytes_per_iteration = site_bytes[j] / (m - 2);
	}
	rc = 0;
done:
	free(site_bytes);
	free(site_blocks);
	return rc;
}

/* Whether the stacks that rose in a truncated trace's window (its growth sites of a step's
 * size) held at least one more step's worth before it: two steps seen, and an earlier one. */
static int steps_before_window(const an_structure *out)
{
	uint64_t before = 0;
	for (size_t k = 0; k < out->growth_site_count; k++)
		if (out->growth_sites[k].total_bytes * 2 >= out->growth_step_bytes)
			before += out->growth_sites[k].before_window;
	return out->growth_step_bytes && before >= out->growth_step_bytes;
}

/* Live allocated bytes at the start of every iteration (the walk's levels); and which
 * allocations after the first iteration are still alive at its end, by stack. */
static mr_status read_growth(const sctx *c, const live_walk *w, an_structure *out, int truncated,
                             mr_error *err)
{
	const int64_t *level = w->level;
	size_t m = out->start_count;
	int64_t *inc = mr_alloc_array(m, sizeof *inc);
	mr_status st = MR_OK;
	if (!inc)
		goto oom;
	/* increments between the starts of iterations 1, 2, ...: the first is warm-up (the
	 * optimizer's state, workspaces, caches appear there) */
	size_t n = 0, positive = 0;
	/* a later start back at or below the first counted one's level, after memory had risen
	 * above it (a flat stretch before growth that comes in steps gives nothing back) */
	int returned = 0;
	int64_t highest = m > 1 ? level[1] : 0;
	for (size_t j = 1; j + 1 < m; j++) {
		inc[n] = level[j + 1] - level[j];
		positive += inc[n] >= (int64_t)GROWTH_MIN_BYTES;
		returned |= j + 1 < m - 1 && level[j + 1] <= level[1] &&
		            highest >= level[1] + (int64_t)GROWTH_MIN_BYTES;
		highest = MR_MAX(highest, level[j + 1]);
		n++;
	}
	out->growth_increments = n;
	out->growth_positive = positive;
	out->growth_checked = n >= 2;
	if (!out->growth_checked)
		goto done;
	an_structure steps = {0};
	/* a window of a truncated trace may hold only the last two of a leak's steps */
	size_t rises = read_steps(inc, n, truncated ? 2 : 3, &steps);
	int stepped = rises != 0;
	size_t flat = 0;
	int64_t flat_sum = 0, rose = 0;
	while (flat < n && inc[n - 1 - flat] < (int64_t)GROWTH_MIN_BYTES &&
	       flat_sum + inc[n - 1 - flat] < (int64_t)GROWTH_MIN_BYTES)
		flat_sum += inc[n - 1 - flat++];
	for (size_t i = 0; i + flat < n; i++)
		rose += inc[i];
	qsort(inc, n, sizeof *inc, i64_cmp);
	int64_t median = inc[n / 2];
	out->growth_found = median >= (int64_t)GROWTH_MIN_BYTES && positive * 4 >= n * 3;
	/* growth at most iterations is growth per iteration; rarer rises are steps */
	stepped = stepped && !out->growth_found;
	int pending = stepped && rises < 3; /* until steps_before_window says so */
	if (stepped) {
		out->growth_found = 1;
		out->growth_stepped = 1;
		out->growth_step_bytes = steps.growth_step_bytes;
		out->growth_step_every = steps.growth_step_every;
		out->growth_per_iteration = steps.growth_per_iteration;
	}
	/* a leak keeps what it adds: live memory back where the first counted iteration began,
	 * at a later iteration's start, gave back what the iterations before it added (an outer
	 * step freeing what its inner passes built up, as higher-order gradients or retained
	 * graphs do): no leak, whatever the median says */
	if (out->growth_found && returned) {
		out->growth_found = 0;
		out->growth_released = !pending;
	}
	/* a leak keeps adding until the end: rises that stopped long before it filled a bound */
	size_t every = stepped ? out->growth_step_every : 1;
	if (out->growth_found && flat >= 4 && flat >= 4 * every && rose > 0) {
		out->growth_found = 0;
		out->growth_bounded = pending ? 0 : flat;
		out->growth_bounded_bytes = pending ? 0 : (uint64_t)rose;
	}
	if (!stepped)
		out->growth_per_iteration = median > 0 ? (uint64_t)median : 0;
	if (!out->growth_found)
		goto unstep;
	if (collect_growth_sites(c, w, out))
		goto oom;
	if (truncated)
		growth_before_window(c, w, out);
	qsort(out->growth_sites, out->growth_site_count, sizeof *out->growth_sites, site_cmp);
	if (!pending || steps_before_window(out))
		goto done;
	free(out->growth_sites);
	out->growth_sites = NULL;
	out->growth_site_count = 0;
unstep:
	if (pending) {
		out->growth_found = out->growth_stepped = 0;
		out->growth_step_bytes = 0;
		out->growth_step_every = 0;
		out->growth_per_iteration = median > 0 ? (uint64_t)median : 0;
	}
	goto done;
oom:
	st = mr_oom(err);
done:
	free(inc);
	return st;
}

/* Of a truncated trace whose window holds one whole iteration (from its second start to its
 * third; the first start is where the window cuts into the loop, or the run's warm-up when the
 * window holds the loop's beginning): one rise alone is no growth, as any iteration's may be a
 * one-off. It is when what that iteration left alive at the snapshot makes up half the rise or
 * more, and the lines that left it (each with an eighth of the rise or more) hold two rises'
 * worth or more made before the window and alive: the same lines kept as much at earlier
 * iterations (a chat session's KV caches, outputs appended to a list). A tensor replaced by a
 * larger one each time keeps only its newest copy, and one kept until the next iteration
 * replaces it holds nothing from before the window: neither passes. */
static mr_status read_growth_short(const sctx *c, const live_walk *w, an_structure *out,
                                   mr_error *err)
{
	int64_t rise = w->level[2] - w->level[1];
	uint64_t kept = 0, before = 0;
	if (rise < (int64_t)GROWTH_MIN_BYTES)
		return MR_OK;
	if (collect_growth_sites(c, w, out))
		return mr_oom(err);
	growth_before_window(c, w, out);
	for (size_t k = 0; k < out->growth_site_count; k++) {
		kept += out->growth_sites[k].total_bytes;
		if (out->growth_sites[k].total_bytes * 8 >= (uint64_t)rise)
			before += out->growth_sites[k].before_window;
	}
	if (kept * 2 >= (uint64_t)rise && before >= 2 * (uint64_t)rise) {
		out->growth_checked = out->growth_found = 1;
		out->growth_increments = out->growth_positive = 1;
		out->growth_per_iteration = (uint64_t)rise;
		qsort(out->growth_sites, out->growth_site_count, sizeof *out->growth_sites,
		      site_cmp);
		return MR_OK;
	}
	free(out->growth_sites);
	out->growth_sites = NULL;
	out->growth_site_count = 0;
	return MR_OK;
}

/* Growth over the loop after the last backward and step (phases.tail_starts), where the
 * training iterations show none: an evaluation keeping every batch's outputs. */
static mr_status read_tail_growth(const sctx *c, phases *ph, an_structure *out, uint64_t initial,
                                  mr_error *err)
{
	an_structure t = {0};
	live_walk w = {{0}, NULL, NULL};
	t.starts = ph->tail_starts;
	t.start_count = ph->tail_count;
	mr_status st = walk_live(c, &t, initial, &w, err);
	if (!st)
		st = read_growth(c, &w, &t, initial != 0, err);
	if (!st && t.growth_found) {
		out->growth_found = 1;
		out->growth_in_tail = 1;
		out->growth_tail_batches = t.start_count + 1; /* the first has no back-edge */
		out->growth_checked = t.growth_checked;
		out->growth_per_iteration = t.growth_per_iteration;
		out->growth_increments = t.growth_increments;
		out->growth_positive = t.growth_positive;
		out->growth_stepped = t.growth_stepped;
		out->growth_step_bytes = t.growth_step_bytes;
		out->growth_step_every = t.growth_step_every;
		free(out->growth_sites);
		out->growth_sites = t.growth_sites;
		out->growth_site_count = t.growth_site_count;
		t.growth_sites = NULL;
	}
	free(t.growth_sites);
	walk_free(&w);
	return st;
}

/* Of a truncated trace: what the stacks that made activations in the window after a step
 * (made[], nonzero: read_carried) hold at the snapshot in blocks made before the window: every
 * backward since freed what its forward saved, so these outlived at least one, as the window's own
 * carried ones did. The stack holding the most of them, when the window carried none, into *best.
 */
static uint64_t carried_before_window(const sctx *c, const live_walk *w, const uint8_t *made,
                                      uint64_t *by_stack, uint32_t *best)
{
	uint64_t idx, bytes = 0, most = 0;
	int window_carried = *best != UINT32_MAX;
	for (size_t i = 0; i < c->s->segment_count; i++) {
		const md_segment *seg = &c->s->segments[i];
		for (size_t j = 0; seg->device == c->md->id && j < seg->block_count; j++) {
			const md_block *b = &c->s->blocks[seg->first_block + j];
			if (b->state == MD_BLOCK_INACTIVE || b->stack >= c->s->stack_count ||
			    !made[b->stack] || am_get(&w->live, b->address, &idx))
				continue;
			bytes += b->size;
			by_stack[b->stack] += b->size;
			if (!window_carried && by_stack[b->stack] > most) {
				most = by_stack[b->stack];
				*best = b->stack;
			}
		}
	}
	return bytes;
}

/* Activations allocated between the first iteration's start and the last one's that are still
 * live at the trace's end, and the stack that holds the most of them; of a truncated trace
 * (truncated), with what the stacks that made activations in those iterations (and in the last
 * one, after a step) kept from before the window. */
static mr_status read_carried(const sctx *c, const live_walk *w, an_structure *out, int truncated,
                              mr_error *err)
{
	const md_event *ev = c->md->events;
	size_t from = out->starts[0], to = out->starts[out->start_count - 1];
	size_t nstk = c->s->stack_count ? c->s->stack_count : 1;
	uint64_t *by_stack = mr_alloc_array(nstk, sizeof *by_stack);
	uint8_t *made = truncated ? mr_alloc_array(nstk, 1) : NULL;
	uint64_t best = 0;
	uint32_t best_stack = UINT32_MAX;
	mr_status st = MR_OK;
	if (!by_stack || (truncated && !made)) {
		st = mr_oom(err);
		goto done;
	}
	for (size_t i = 0; i < w->live.cap; i++) {
		size_t ai = (size_t)w->live.slots[i].val;
		uint32_t stk =
		    w->live.slots[i].key && ai >= from && ai < to ? ev[ai].stack : UINT32_MAX;
		if (stk >= c->s->stack_count ||
		    an_stack_category(c->info, stk, AN_CAT_GRADIENTS) != AN_CAT_ACTIVATIONS)
			continue;
		by_stack[stk] += block_size(ev[ai].size);
		out->carried_activations += block_size(ev[ai].size);
		if (by_stack[stk] > best) {
			best = by_stack[stk];
			best_stack = stk;
		}
	}
	/* after a backward or an optimizer step, the last iteration's forward makes its
	 * activations on the lines that the step's graph had: older blocks there outlived it */
	size_t made_to = to;
	for (size_t i = 0; made && i < to && made_to == to; i++) {
		int ph = ev[i].action == MD_ACT_ALLOC ? phase_of(c, ev[i].stack) : PH_NONE;
		made_to = ph == PH_BACKWARD || ph == PH_OPTIMIZER ? c->md->event_count : to;
	}
	for (size_t i = from; made && i < made_to; i++)
		if (ev[i].action == MD_ACT_ALLOC && ev[i].stack < c->s->stack_count &&
		    an_stack_category(c->info, ev[i].stack, AN_CAT_GRADIENTS) == AN_CAT_ACTIVATIONS)
			made[ev[i].stack] = 1;
	if (made) {
		out->carried_before_window =
		    carried_before_window(c, w, made, by_stack, &best_stack);
		out->carried_activations += out->carried_before_window;
	}
	out->carried_stack = best_stack == UINT32_MAX ? 0 : best_stack;
done:
	free(by_stack);
	free(made);
	return st;
}

/* ---- segments given back to CUDA ---- */

static int is_release(int action)
{
	return action == MD_ACT_SEGMENT_FREE || action == MD_ACT_SEGMENT_UNMAP;
}

static int is_reserve(int action)
{
	return action == MD_ACT_SEGMENT_ALLOC || action == MD_ACT_SEGMENT_MAP;
}

static int64_t reserve_change(const md_event *e)
{
	return is_reserve(e->action)   ? (int64_t)e->size
	       : is_release(e->action) ? -(int64_t)e->size
	                               : 0;
}

/* The ends of the groups of consecutive segment releases (the event after each, maybe n) and
 * the most reserved at or after each end (relative to the trace's start; the level after an
 * event, and at the end), read backwards from the end: memory per group, not per event.
 * Returns the group count, SIZE_MAX on OOM; *ends and *highest are the caller's to free. */
static size_t release_ends(const md_event *ev, size_t n, size_t **ends, int64_t **highest)
{
	size_t k = 0, cap = 0;
	int64_t level = 0;
	*ends = NULL;
	*highest = NULL;
	for (size_t i = 0; i < n;) {
		level += reserve_change(&ev[i]);
		if (!is_release(ev[i].action)) {
			i++;
			continue;
		}
		size_t j = i + 1;
		for (; j < n && is_release(ev[j].action); j++)
			level += reserve_change(&ev[j]);
		if (MR_GROW(*ends, cap, k + 1))
			return SIZE_MAX;
		(*ends)[k++] = j;
		i = j;
	}
	*highest = mr_alloc_array(k ? k : 1, sizeof **highest);
	if (!*highest)
		return SIZE_MAX;
	int64_t best = level; /* level: after the last event */
	size_t m = k;
	while (m && (*ends)[m - 1] == n)
		(*highest)[--m] = best;
	for (size_t i = n; i-- > 0;) {
		best = MR_MAX(best, level); /* level: after event i */
		while (m && (*ends)[m - 1] == i)
			(*highest)[--m] = best;
		level -= reserve_change(&ev[i]);
	}
	return k;
}

/* Whether the releases [i, j) give back a whole free segment that could have held the segment
 * allocated right after them, on its stream and in its pool (the small pool's segments are
 * 2 MiB, the large pool's 10 MiB or more): a cudaMalloc that failed would have been served
 * from it instead (unless max_split_size_mb keeps large blocks from smaller requests). */
static int released_could_serve(const sctx *c, size_t i, size_t j)
{
	const md_event *ev = c->md->events;
	const md_settings *set = &c->s->settings;
	if (j >= c->md->event_count || ev[j].action != MD_ACT_SEGMENT_ALLOC ||
	    (set->present && set->max_split_size != UINT64_MAX))
		return 0;
	for (size_t k = i; k < j; k++)
		if (ev[k].action == MD_ACT_SEGMENT_FREE && ev[k].stream == ev[j].stream &&
		    ev[k].size >= ev[j].size &&
		    (ev[k].size <= 2 * MR_MIB) == (ev[j].size <= 2 * MR_MIB))
			return 1;
	return 0;
}

/* Groups of consecutive segment releases: from empty_cache() (its frame is on the stack), or
 * from a cudaMalloc that failed and freed the cache to retry (the stack is the allocation's).
 * The release just before an OOM is the OOM's own last try, not a survived retry. A cudaMalloc
 * fails when reserved plus the segment it asks for do not fit, and only after no free segment
 * could hold the request: where the trace later reserves more than that, or the release gives
 * back a free segment large enough, it was no retry but a flush of torch's own (cuDNN's
 * benchmark empties the cache after trying its algorithms, from inside the convolution). */
static mr_status read_releases(const sctx *c, an_structure *out, mr_error *err)
{
	const md_event *ev = c->md->events;
	size_t n = c->md->event_count, first_iter = out->start_count ? out->starts[0] : 0;
	size_t *ends, group = 0;
	int64_t *hi, level = 0;
	if (release_ends(ev, n, &ends, &hi) == SIZE_MAX) {
		free(ends);
		free(hi);
		return mr_oom(err);
	}
	for (size_t i = 0; i < n;) {
		if (!is_release(ev[i].action)) {
			level += is_reserve(ev[i].action) ? (int64_t)ev[i].size : 0;
			i++;
			continue;
		}
		int64_t before = level;
		size_t j = i;
		uint64_t bytes = 0;
		int from_empty_cache = 0, from_torch = 0;
		for (; j < n && is_release(ev[j].action); j++) {
			bytes += ev[j].size;
			level -= (int64_t)ev[j].size;
			if (ev[j].stack < c->s->stack_count &&
			    (c->info[ev[j].stack].flags & AN_SF_EMPTY_CACHE))
				from_empty_cache = 1;
			if (ev[j].stack < c->s->stack_count &&
			    (c->info[ev[j].stack].flags & AN_SF_TORCH_EMPTY_CACHE))
				from_torch = 1;
		}
		int64_t highest = hi[group++]; /* reserved at or after j */
		/* torch's own empty_cache() (before a CUDA graph capture): neither the user's call
		 * nor a failed cudaMalloc's retry */
		if (from_torch && !from_empty_cache) {
			i = j;
			continue;
		}
		if (from_empty_cache) {
			int again = 0;
			for (size_t k = j; k < n && !again; k++)
				again = ev[k].action == MD_ACT_SEGMENT_ALLOC ||
				        ev[k].action == MD_ACT_SEGMENT_MAP;
			if (again && i >= first_iter) {
				out->empty_cache_releases++;
				out->empty_cache_bytes += bytes;
				out->empty_cache_stack = ev[i].stack;
			} else if (out->empty_cache_releases &&
			           ev[i].stack == out->empty_cache_stack) {
				out->empty_cache_last = 1;
			}
		} else {
			/* the next event that is not a segment event tells what the release was for
			 */
			size_t k = j;
			while (k < n && is_reserve(ev[k].action))
				k++;
			int64_t asked = j < n && is_reserve(ev[j].action) ? (int64_t)ev[j].size : 0;
			if (k < n && ev[k].action == MD_ACT_OOM) {
				out->releases_before_oom++;
			} else if (highest <= before + asked && !released_could_serve(c, i, j)) {
				out->retry_releases++;
				out->retry_bytes += bytes;
			}
		}
		i = j;
	}
	free(ends);
	free(hi);
	return MR_OK;
}

/* ---- kind of run ---- */

/* Whether the trace's last allocation inside a model call ran inside generate(): a trace that
 * generates and then runs forwards of its own (an RL step scoring and training on what it
 * generated) is not told inference by the generate() it holds. */
static int last_forward_generates(const sctx *c)
{
	for (size_t i = c->md->event_count; i-- > 0;) {
		const md_event *e = &c->md->events[i];
		if (e->action != MD_ACT_ALLOC || e->stack >= c->s->stack_count ||
		    !(c->info[e->stack].flags & AN_SF_MODULE_CALL))
			continue;
		return (c->info[e->stack].flags & AN_SF_GENERATE) != 0;
	}
	return 1;
}

/* The flags of the device's blocks live at the snapshot, when its trace does not reach back to
 * an empty allocator (a truncated trace: some of them were made before its window); 0 else. */
static uint32_t flags_before_window(const sctx *c, uint64_t initial_allocated)
{
	uint32_t f = 0;
	for (size_t i = 0; initial_allocated && i < c->s->segment_count; i++) {
		const md_segment *seg = &c->s->segments[i];
		for (size_t j = 0; seg->device == c->md->id && j < seg->block_count; j++) {
			const md_block *b = &c->s->blocks[seg->first_block + j];
			if (b->state != MD_BLOCK_INACTIVE && b->stack < c->s->stack_count)
				f |= c->info[b->stack].flags;
		}
	}
	return f;
}

/* Of a truncated trace: whether the activations live at the snapshot that were made before
 * its window are a saved graph's, tensors of GRAPH_MIN_OPS operations or more (told apart by
 * their innermost Python line) in GRAPH_MIN_BLOCKS blocks or more. A forward that records a
 * graph saves what every operation's backward needs (the recorded runs that died in a forward
 * before their first backward, cut to their last 20% and 5%: 10-13 such lines, in 49-223
 * blocks, where the model's layers are transformer or ViT blocks); one under no_grad keeps
 * only its running output, the masks and position tables made once per forward, and what the
 * caller keeps of earlier outputs (the recorded inference runs: 1-2 lines, and 6-7 where each
 * layer's attention weights are kept). A convolutional net's layers save few kinds of tensor
 * (a U-Net: 4 lines): that reads as neither. Returns 0 or 1, -1 when memory runs out. */
enum { GRAPH_MIN_OPS = 9, GRAPH_MIN_BLOCKS = 32 };
static int graph_before_window(const sctx *c, uint64_t initial_allocated)
{
	const md_event *ev = c->md->events;
	am_map window = {0}, lines = {0};
	uint64_t idx, blocks = 0;
	int rc = -1;
	for (size_t i = 0; initial_allocated && c->kinds && i < c->md->event_count; i++) {
		if (ev[i].action == MD_ACT_ALLOC && am_put(&window, ev[i].addr, i))
			goto done;
		if (ev[i].action == MD_ACT_FREE_REQUESTED)
			am_take(&window, ev[i].addr, &idx);
	}
	for (size_t i = 0; initial_allocated && c->kinds && i < c->s->segment_count; i++) {
		const md_segment *seg = &c->s->segments[i];
		for (size_t j = 0; seg->device == c->md->id && j < seg->block_count; j++) {
			const md_block *b = &c->s->blocks[seg->first_block + j];
			if (b->state == MD_BLOCK_INACTIVE || !is_activation(c, b->stack) ||
			    (c->info[b->stack].flags & AN_SF_KV_CACHE) ||
			    am_get(&window, b->address, &idx))
				continue;
			const md_stack *st = &c->s->stacks[b->stack];
			for (uint32_t k = 0; k < st->count; k++) {
				const md_frame *f = &c->s->frames[st->first + k];
				if (!(c->kinds[st->first + k] & AN_FK_PYTHON))
					continue;
				/* the line as a key: the string's id and the line (never 0) */
				if (am_put(&lines,
				           ((uint64_t)f->filename << 24) ^ (uint32_t)f->line, 1))
					goto done;
				blocks++;
				break;
			}
		}
	}
	rc = lines.count >= GRAPH_MIN_OPS && blocks >= GRAPH_MIN_BLOCKS;
done:
	am_free(&window);
	am_free(&lines);
	return rc;
}

/* A window of a truncated trace shows only the run's last events: no backward nor optimizer
 * inside it is no sign of a run without them when gradients or optimizer state made before it
 * are still live (a training run's evaluation pass, or the forward of a step). */
static void decide_kind(an_structure *out, const phases *ph, int generates, uint32_t before,
                        int graph_before)
{
	uint32_t f = out->flags_seen;
	out->kind = AN_RUN_TRAINING;
	if (out->backward_phases) {
		out->evidence = AN_KIND_BACKWARD;
		return;
	}
	if (ph->opt_allocs) {
		out->evidence = AN_KIND_OPTIMIZER;
		return;
	}
	if (before & (AN_SF_BACKWARD | AN_SF_OPTIMIZER)) {
		out->evidence = AN_KIND_STATE_BEFORE;
		return;
	}
	if (f & (AN_SF_CHECKPOINT | AN_SF_FSDP | AN_SF_DDP)) {
		out->evidence = AN_KIND_TECHNIQUE;
		return;
	}
	if (f & AN_SF_TRAIN_STEP) {
		out->evidence = AN_KIND_FRAMEWORK;
		return;
	}
	out->kind = AN_RUN_INFERENCE;
	if (f & AN_SF_NO_GRAD_LOOP) {
		out->evidence = AN_KIND_FRAMEWORK_NO_GRAD;
		return;
	}
	if ((f & AN_SF_GENERATE) && generates) {
		out->evidence = AN_KIND_GENERATE;
		return;
	}
	/* Finished forwards say it best; a forward that died part-way, its finished layers. */
	int graph = 0, no_graph = 0, mixed = ph->spans_graph && ph->spans_no_graph;
	if (out->kept_known && mixed) {
		/* some forwards free their activations and others keep them (a no_grad teacher,
		 * reference or scoring pass beside the one trained): their sum says neither; the
		 * last one says what the step was doing when it ended */
		graph = ph->last_kept >= KEPT_GRAPH;
		no_graph = ph->last_kept < KEPT_NO_GRAPH;
	} else if (out->kept_known) {
		graph = out->kept_ratio >= KEPT_GRAPH;
		no_graph = out->kept_ratio < KEPT_NO_GRAPH;
	} else if (out->survival_known) {
		graph = out->survival >= SURVIVAL_GRAPH;
		no_graph = out->survival < SURVIVAL_NO_GRAPH;
	}
	/* A graph AOT autograd compiled for autograd saves what its backward needs, however
	 * little its forwards keep otherwise (the compiled graph frees the rest inside it), and
	 * whatever CUDA graphs hold */
	int compiled_grad = (f & AN_SF_COMPILED_GRAD) != 0;
	if (compiled_grad) {
		graph = 1;
		no_graph = 0;
	}
	if (no_graph) {
		out->evidence = AN_KIND_NO_GRAPH;
	} else if ((out->techniques & AN_TECH_CUDA_GRAPHS) && !compiled_grad) {
		/* Memory recorded into a CUDA graph stays with the graph (its private pool keeps
		 * the recorded allocations for every replay, a compiled graph's outputs are its
		 * static buffers): forwards that keep their tensors are no sign of a graph saved
		 * for a backward there, and without a backward, an optimizer or a training
		 * technique the trace cannot tell. */
		out->kind = AN_RUN_UNKNOWN;
		out->evidence = AN_KIND_CUDA_GRAPHS;
	} else if (graph && !mixed && ph->forward_repeats &&
	           out->forward_spans > out->forwards_cut) {
		/* an evaluation loop that keeps its graphs and a training step that adds up the
		 * losses of its microbatches before one backward look the same until the backward;
		 * a forward called once (the modules of one step, each its own span) is a step that
		 * died before its backward as much as an evaluation */
		out->kind = AN_RUN_EVALUATION;
		out->evidence = (f & AN_SF_LOSS) ? AN_KIND_GRAPH_LOSSES : AN_KIND_GRAPH_NO_BACKWARD;
	} else if (graph || (f & AN_SF_DROPOUT)) {
		out->kind = AN_RUN_TRAINING;
		out->evidence = out->forwards_cut ? AN_KIND_FIRST_FORWARD : AN_KIND_FIRST_STEP;
	} else if (!no_graph && graph_before) {
		/* a window too short to tell, inside a forward whose earlier operations, before the
		 * window, saved their tensors: a step that dies before its backward, as a whole
		 * trace's first forward would be read */
		out->kind = AN_RUN_TRAINING;
		out->evidence = AN_KIND_GRAPH_BEFORE;
	} else {
		out->kind = AN_RUN_UNKNOWN;
		out->evidence = AN_KIND_UNCLEAR;
	}
}

static void techniques(an_structure *out, size_t private_segments)
{
	uint32_t f = out->flags_seen;
	static const struct {
		uint32_t flag, tech;
	} map[] = {{AN_SF_FSDP, AN_TECH_FSDP},
	           {AN_SF_DDP, AN_TECH_DDP},
	           {AN_SF_CHECKPOINT, AN_TECH_CHECKPOINT},
	           {AN_SF_COMPILE, AN_TECH_COMPILE},
	           {AN_SF_CUDA_GRAPH, AN_TECH_CUDA_GRAPHS},
	           {AN_SF_AUTOCAST, AN_TECH_AUTOCAST},
	           {AN_SF_PARAM_DTYPE, AN_TECH_FSDP_MIXED}};
	for (size_t i = 0; i < sizeof map / sizeof *map; i++)
		if (f & map[i].flag)
			out->techniques |= map[i].tech;
	if (private_segments)
		out->techniques |= AN_TECH_CUDA_GRAPHS;
	if (f & AN_SF_HF)
		out->frameworks |= AN_FW_HF;
	if (f & AN_SF_HF_TRAINER)
		out->frameworks |= AN_FW_HF_TRAINER;
	if (f & AN_SF_LIGHTNING)
		out->frameworks |= AN_FW_LIGHTNING;
	if (f & AN_SF_ACCELERATE)
		out->frameworks |= AN_FW_ACCELERATE;
}

/* Autocast is on when the first iteration copies a quarter of the weights' bytes to half
 * precision, as autocast copies them (each copy followed by its op's output: casts.h).
 * Embeddings and norms stay float32 under autocast, and some fused kernels take the weights as
 * they are: the recorded autocast runs copy 20-100% of them. A half-precision model is never
 * copied, but where a microbatch holds half as many tokens as a layer's width its layer outputs
 * have half its weights' sizes (a bf16 Llama at 2 x 512 tokens, width 2048: 92% of the bytes),
 * each followed by the next op: 5% of them pass. A run that stops within its first forward
 * (an OOM), or whose float32 weights are few, copies less than a quarter: there at least 8
 * copies, 80% of those seen made as autocast makes them, say so. Where a second iteration
 * starts, the first is whole and its share of copies decides alone: a bf16 model's own
 * activations (rotary halves, K/V projections of half a weight's size) pass the count too (a
 * bf16 Llama with checkpointing: 35 such, 16% of the bytes), and every recorded autocast run
 * with a whole first iteration copies 27-100%. (Adapters made float32
 * outside torch's modules, as LoRA code does, are not seen as parameters at all: a LoRA run on
 * a bf16 base is not seen in autocast, and the bf16 advice stays hedged.) The recorded float32
 * and bf16 runs: 0-64% of those seen, 13 copies at most (at 12%). Only copies that are a
 * weight's by more than their size count (casts.h, kept_bytes: made by one of torch.nn's
 * layers or in a compiled graph, or kept after their op): a bf16 GPT-NeoX that died in its
 * first forward made 50 temporaries of a weight's half size in the model's own code (rotary
 * halves, its attention), 37% of the bytes, each freed by the next op; 18 of them (4%) pass.
 * One copy alone is evidence only when it is (nearly: 80%) the copy of all the weights live
 * when the forward begins, as a flat weight buffer (cuDNN's LSTM) is copied whole: autocast
 * copies every weight a forward reads, and one block of one weight's half size among several
 * is as likely a coincidence. The cuBLAS workspace of the run's first matmul (32 MiB on an
 * H100, made in the Linear's call, kept, and followed by cuBLASLt's 1 MiB on the same stack)
 * is half a 4096 x 4096 float32 weight: an fp32 MLP head whose largest weight is that (70% of
 * the halves) passed on it alone. */
#define CAST_MIN_COPIES 8
static mr_status read_casts(const sctx *c, an_structure *out, int truncated, mr_error *err)
{
	const md_device *md = c->md;
	size_t first = out->start_count ? out->starts[0] : SIZE_MAX;
	for (size_t i = 0; first == SIZE_MAX && i < md->event_count; i++)
		if (md->events[i].action == MD_ACT_ALLOC &&
		    md->events[i].stack < c->s->stack_count &&
		    (c->info[md->events[i].stack].flags & AN_SF_MODULE_CALL))
			first = i;
	if (first == SIZE_MAX)
		return MR_OK;
	an_casts k;
	mr_status st = an_casts_find(c->s, md, c->info, first,
	                             out->start_count > 1 ? out->starts[1] : md->event_count,
	                             truncated, &k, err);
	int whole_first = out->start_count > 1;
	int one_whole =
	    k.kept_count == 1 && an_casts_copy_all(c->s, md, c->info, first, k.kept_bytes);
	if (!st && k.param_bytes &&
	    ((k.kept_bytes * 4 >= k.param_bytes && (k.kept_count >= 2 || one_whole)) ||
	     (!whole_first && k.kept_count >= CAST_MIN_COPIES &&
	      k.kept_bytes * 5 >= k.copied_bytes * 4)))
		out->techniques |= AN_TECH_AUTOCAST;
	an_casts_free(&k);
	return st;
}

mr_status an_structure_read(const md_snapshot *s, const md_device *md, const an_stack_info *info,
                            const uint8_t *kinds, uint64_t initial_allocated,
                            size_t private_segments, an_structure *out, mr_error *err)
{
	memset(out, 0, sizeof *out);
	sctx c = {s, md, info, kinds, 0};
	phases ph = {0};
	ph.last_step = SIZE_MAX;
	ph.span_at_oom = SIZE_MAX;
	live_walk w = {{0}, NULL, NULL};
	mr_status st = MR_OK;
	if (!md || !md->event_count) {
		out->evidence = AN_KIND_NO_TRACE;
		techniques(out, private_segments);
		return MR_OK;
	}
	for (size_t i = 0; i < md->event_count; i++) {
		uint32_t stk = md->events[i].stack;
		if (stk < s->stack_count) {
			out->flags_seen |= info[stk].flags;
			c.trace_has_python |= (info[stk].flags & AN_SF_PYTHON) != 0;
		}
	}
	for (size_t i = 0; i < s->block_count; i++)
		if (s->blocks[i].stack < s->stack_count)
			out->flags_seen |= info[s->blocks[i].stack].flags;
	techniques(out, private_segments);
	if ((st = read_phases(&c, out, &ph, err)) || (st = read_input_ratio(&c, &ph, out, err)))
		goto done;
	/* The first forward also makes the run's one-time allocations (cuBLAS workspaces, lazily
	 * built buffers), which stay alive as a saved graph would: with later forwards to judge
	 * by, it is left out. */
	if (ph.finished >= 2) {
		ph.kept_alloc -= ph.first_alloc;
		ph.kept_live -= ph.first_live;
	}
	out->kept_known = ph.kept_alloc >= MR_MIB && out->forward_spans >= 2;
	out->kept_ratio = ph.kept_alloc ? (double)ph.kept_live / (double)ph.kept_alloc : 0;
	out->survival_known = ph.survive_early >= MR_MIB;
	out->survival = ph.survive_early ? (double)ph.survive_live / (double)ph.survive_early : 0;
	int graph_before = graph_before_window(&c, initial_allocated);
	if (graph_before < 0) {
		st = mr_oom(err);
		goto done;
	}
	decide_kind(out, &ph, last_forward_generates(&c),
	            flags_before_window(&c, initial_allocated), graph_before);
	if ((st = choose_iterations(&c, out, &ph, err)))
		goto done;
	if ((st = read_casts(&c, out, initial_allocated != 0, err)))
		goto done;
	if ((st = read_releases(&c, out, err)))
		goto done;
	if (out->start_count >= 2 &&
	    ((st = walk_live(&c, out, initial_allocated, &w, err)) ||
	     (st = read_carried(&c, &w, out, initial_allocated != 0, err))))
		goto done;
	if (out->start_count >= 4 && (st = read_growth(&c, &w, out, initial_allocated != 0, err)))
		goto done;
	if (out->start_count == 3 && initial_allocated &&
	    (st = read_growth_short(&c, &w, out, err)))
		goto done;
	if (out->start_count >= 5 && (st = read_peak_rise(&w, out, err)))
		goto done;
	if (!out->growth_found && ph.tail_count >= 4)
		st = read_tail_growth(&c, &ph, out, initial_allocated, err);
done:
	walk_free(&w);
	free(ph.fwd_starts);
	free(ph.tail_starts);
	am_free(&ph.span_firsts);
	am_free(&ph.ckpt_ops);
	if (st)
		an_structure_free(out);
	return st;
}

void an_structure_free(an_structure *st)
{
	free(st->starts);
	free(st->growth_sites);
	memset(st, 0, sizeof *st);
}

size_t an_iteration_of(const an_structure *st, size_t event)
{
	size_t lo = 0, hi = st->start_count;
	if (!hi || event < st->starts[0])
		return SIZE_MAX;
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;
		if (st->starts[mid] <= event)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}
