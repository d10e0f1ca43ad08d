/* structure.h: the run a trace shows. What kind of run it was (training, evaluation without
 * no_grad, inference), where its real iterations start, which techniques and frameworks were
 * on, and what grew from one iteration to the next, compared at the same phase of each.
 *
 * Iterations come from real boundaries: a loop of the user's (or a framework's) code above any
 * model call whose body runs the model, else the forward passes that follow each backward, else
 * a record_function annotation that repeats. Repetition inside one forward (a model's layers) is
 * never an iteration: it happens below the model call.
 *
 * Ownership: an_structure owns its arrays; an_structure_free releases them. */
#ifndef MR_STRUCTURE_H
#define MR_STRUCTURE_H

#include <stddef.h>
#include <stdint.h>

#include "analyze/frames.h"
#include "base/error.h"
#include "model/model.h"

typedef enum { AN_RUN_UNKNOWN, AN_RUN_TRAINING, AN_RUN_EVALUATION, AN_RUN_INFERENCE } an_run_kind;
const char *an_run_kind_name(an_run_kind k); /* "training", "evaluation", "inference", "unknown" */

/* What decided the kind (the "what ran" line says it). */
typedef enum {
	AN_KIND_NO_TRACE,          /* no trace: nothing to read the run from */
	AN_KIND_BACKWARD,          /* backward passes ran */
	AN_KIND_OPTIMIZER,         /* the optimizer ran */
	AN_KIND_TECHNIQUE,         /* a training technique is on (checkpointing, FSDP, DDP) */
	AN_KIND_FRAMEWORK,         /* a framework's training step is on the stack */
	AN_KIND_FRAMEWORK_NO_GRAD, /* a framework's prediction or evaluation loop, without a
	                              training step, backward or optimizer */
	AN_KIND_GENERATE,          /* text generation */
	AN_KIND_NO_GRAPH,          /* forwards free their activations as they go (no_grad) */
	AN_KIND_GRAPH_NO_BACKWARD, /* forwards keep their graphs, and no backward ever runs */
	AN_KIND_GRAPH_LOSSES,      /* the same, each forward computing a loss: an evaluation, or
	                              microbatches whose summed loss is not backpropagated yet */
	AN_KIND_FIRST_FORWARD, /* a forward that keeps its graph died before the first backward */
	AN_KIND_FIRST_STEP,    /* forwards that keep their graphs ran once, and the run died after
	                          them, before the first backward */
	AN_KIND_UNCLEAR,       /* the trace cannot tell */
	AN_KIND_CUDA_GRAPHS,   /* CUDA graphs hold what their forwards allocate: what a forward
	                          keeps says nothing of autograd, and nothing else tells */
	AN_KIND_STATE_BEFORE,  /* a truncated trace whose window shows no backward nor optimizer,
	                          but gradients or optimizer state live from before it */
	AN_KIND_GRAPH_BEFORE,  /* a truncated trace whose window cannot tell, but the activations
	                          live from before it are a saved graph's, of many operations */
} an_kind_evidence;

enum {
	AN_TECH_FSDP = 1u << 0,
	AN_TECH_DDP = 1u << 1,
	AN_TECH_CHECKPOINT = 1u << 2,
	AN_TECH_COMPILE = 1u << 3,
	AN_TECH_CUDA_GRAPHS = 1u << 4,
	AN_TECH_AUTOCAST = 1u << 5,   /* mixed precision: autocast's frames or its weight copies */
	AN_TECH_FSDP_MIXED = 1u << 6, /* mixed precision: FSDP computing in a lower param_dtype */
	AN_TECH_COUNT = 7,
	AN_TECH_MIXED = AN_TECH_AUTOCAST | AN_TECH_FSDP_MIXED /* weights float32, compute lower */
};
/* The contract's spelling of technique bit i: fsdp, ddp, activation_checkpointing,
 * torch_compile, cuda_graphs, autocast, fsdp_mixed_precision. */
const char *an_technique_name(unsigned bit_index);

enum {
	AN_FW_HF = 1u << 0,
	AN_FW_HF_TRAINER = 1u << 1,
	AN_FW_LIGHTNING = 1u << 2,
	AN_FW_ACCELERATE = 1u << 3,
};

typedef enum {
	AN_ITER_NONE,       /* no boundaries found */
	AN_ITER_LOOP,       /* a loop above the model call */
	AN_ITER_BACKWARD,   /* the forward that follows each backward */
	AN_ITER_ANNOTATION, /* a repeating record_function annotation */
} an_iter_source;

typedef struct {
	uint32_t stack;
	uint64_t bytes_per_iteration;
	uint64_t total_bytes; /* still alive at the snapshot, allocated after the first iteration */
	uint64_t before_window; /* of a truncated trace: alive at the snapshot at this stack,
	                           allocated before the window */
	uint64_t blocks;
} an_growth_site;

typedef struct {
	an_run_kind kind;
	an_kind_evidence evidence;
	uint32_t techniques; /* AN_TECH_* */
	uint32_t frameworks; /* AN_FW_* */
	uint32_t flags_seen; /* every AN_SF_* marker of the trace's and the live blocks' stacks */

	an_iter_source iter_source;
	size_t *starts; /* event index where each iteration starts, ascending */
	size_t start_count;
	uint32_t loop_stack; /* with AN_ITER_LOOP: a stack whose loop-level chain holds the loop */
	uint32_t
	    loop_level; /* the loop's function is frame `loop_level` of that chain (0 outermost) */
	int loop_decodes; /* with AN_ITER_LOOP: the loop is generate()'s own, once a token */
	size_t backward_phases, forward_spans;
	size_t
	    forwards_cut; /* forward spans an out-of-memory error ended (the trace's oom events) */
	/* The forward the last OOM ended: 1 when its finished layers' tensors were being saved
	 * for a backward, -1 when they were freed as it went (no_grad: an evaluation or inference
	 * pass), 0 when it cannot tell (too little finished, or the OOM was not in a forward). */
	int oom_forward_graph;
	/* How much larger that forward's input was than the earlier forwards': the median, over
	 * the forward operations it shares with them (oom_input_sites of them, at least 4), of
	 * its largest request over their largest. 0: unknown (no earlier forward). */
	double oom_input_ratio;
	size_t oom_input_sites;
	/* oom_input_ratio compares it with the forwards that trained, by the user's own lines: it
	 * was called from a line of its own, after them (an evaluation or a render after training
	 * steps), none of whose operations the training forwards' calls share. */
	int oom_input_other_call;
	/* With oom_input_ratio: the largest request the failing operation (the same innermost
	 * frames) made in the failing forward, the failing request included, over the largest it
	 * made in the earlier forwards. 0: unknown (no such operation before). Near
	 * oom_input_ratio squared, that operation's tensor grows with the square of the input's
	 * size (a T x T tensor where the rest grows with T), whether the failing request was that
	 * tensor or one made after it. */
	double oom_request_ratio;
	/* A forward that an earlier, handled OOM cut short, and the model called again after it
	 * (a retry): the bytes that failed forward allocated and that are still live at the trace's
	 * last OOM, and the handled OOM's event. 0 when no retry followed a handled OOM. */
	/* The forward the last OOM cut short, or the last one finished before it, called the
	 * forward that earlier forwards ran under torch.utils.checkpoint, got past where they
	 * began checkpointing, and checkpointed nothing: checkpointing was not running. */
	int checkpoint_skipped;
	uint64_t held_from_failed;
	size_t handled_oom_event;
	/* An OOM after a forward that saved nothing for a backward (an evaluation pass inside the
	 * step, its loss or metric failing), with an earlier forward that kept its layers' tensors
	 * and whose backward had not run yet: the bytes that graph-keeping forward allocated
	 * that are still live at the OOM, and its first allocation's stack. 0: none. */
	uint64_t graph_held_at_oom;
	uint32_t graph_held_stack;
	/* An occasional forward that saved nothing for a backward (an evaluation under no_grad,
	 * after two graph-keeping forwards or more in a row; the last of its run), then a
	 * graph-keeping forward: what that pass allocated that is still live at the last OOM (its
	 * outputs, kept by a reference), and its first allocation's stack. 0: none. */
	uint64_t nograd_held_at_oom;
	uint32_t nograd_held_stack;
	size_t optimizer_phases; /* runs of the optimizer's own allocations (steps that allocate) */
	int accumulating;        /* two backward passes with no optimizer step between them, each
	                            after its own forward from the same call: gradient accumulation
	                            (or an optimizer that allocates nothing) */
	int maybe_accumulating;  /* a forward after a backward with no optimizer step between, and
	                            no step seen at all: accumulation, or a stateless optimizer */
	int kept_known;          /* kept_ratio was measured over complete forwards */
	double kept_ratio;  /* bytes a forward allocated that live at its end / all it allocated */
	int survival_known; /* survival was measured over a model's layers */
	double survival;    /* the same, for layers that had finished */

	/* Growth: live memory at the start of each iteration after the first. */
	int growth_checked; /* enough iterations to compare (three after the first) */
	int growth_found;
	uint64_t growth_per_iteration; /* median increase per iteration (stepped: the average) */
	/* The iterations' increases were given back within the trace: at a later iteration's
	 * start live memory was back at or below the first counted one's (memory built up
	 * inside a larger cycle, such as an outer step, and released by it): no growth found. */
	int growth_released;
	/* The increases stopped: after the last rise, live memory at the iterations' starts
	 * stayed within GROWTH_MIN_BYTES for growth_bounded iterations, at least four and four
	 * times the rises' spacing (a deque with a maxlen, a cache of a few shapes, filled to its
	 * bound): no growth found. growth_bounded_bytes: what the iterations before added. */
	size_t growth_bounded;
	uint64_t growth_bounded_bytes;
	/* Of a truncated trace, one increment (its one whole iteration) with growth found: what
	 * its growing sites hold from before the window makes up the earlier ones. */
	size_t growth_increments, growth_positive;
	/* Growth in steps: live memory rose at only some iterations' starts (a new optimizer, a
	 * model copy or a logged tensor every few iterations), at least three rises within 2x of
	 * each other, nothing given back between them, all still there at the end. Then
	 * growth_per_iteration is the average over all increments, growth_step_bytes the median
	 * rise and growth_step_every the median number of iterations from one rise to the next. */
	int growth_stepped;
	uint64_t growth_step_bytes;
	size_t growth_step_every;
	/* How much each whole iteration's peak allocated rises over the one before, the median;
	 * 0 unless it rises at three of four increments at least, over three or more. */
	uint64_t peak_rise;
	an_growth_site *growth_sites; /* largest first */
	size_t growth_site_count;
	/* The growth fields above describe a loop after the last backward and optimizer step
	 * (an evaluation over many batches), not the training iterations: found there when the
	 * training iterations show none. growth_tail_batches: that loop's iterations. */
	int growth_in_tail;
	size_t growth_tail_batches;

	/* Activations allocated in an earlier iteration (from the first one's start to the last
	 * one's) and still live at the trace's end: a backward frees what its forward saved, so
	 * these are kept by something (a retained graph, an output or loss kept across steps, a
	 * cache). carried_stack: the stack holding the most of them. Of a truncated trace, with
	 * what the stacks that made activations in the window (after a step, when it holds no
	 * whole iteration's forward) hold from before it (carried_before_window, among them). */
	uint64_t carried_activations;
	uint32_t carried_stack;
	uint64_t carried_before_window;
	/* The most activation bytes an earlier iteration's forward allocated that were still live
	 * when a later iteration began (at iteration held_iteration's start, 1-based past the
	 * first): outputs kept across the step (forward hooks storing them, a stored output or
	 * loss), whether or not the next forward then overwrote and freed them. */
	uint64_t held_activations;
	size_t held_iteration;

	/* Segments given back to CUDA and asked for again. */
	size_t empty_cache_releases; /* release groups from torch.cuda.empty_cache() after the first
	                                iteration began, with segments allocated again later */
	uint64_t empty_cache_bytes;
	uint32_t empty_cache_stack; /* the stack of one such release: its user frame calls it */
	int empty_cache_last;  /* the same call released again after the trace's last reservation
	                          (the trace ends before the next iteration could ask) */
	size_t retry_releases; /* release groups not from empty_cache(): a failed cudaMalloc freed
	                          the cache and retried (or garbage collection ran); not the release
	                          just before an OOM */
	uint64_t retry_bytes;
	size_t releases_before_oom;
} an_structure;

/* Reads the structure of device md's trace. info classifies s's stacks (an_classify_stacks),
 * kinds its frames (an_frame_kinds); initial_allocated is the allocated bytes when the trace window
 * begins; private_segments is how many segments of the device sit in private pools (CUDA graphs).
 */
mr_status an_structure_read(const md_snapshot *s, const md_device *md, const an_stack_info *info,
                            const uint8_t *kinds, uint64_t initial_allocated,
                            size_t private_segments, an_structure *out, mr_error *err);
void an_structure_free(an_structure *st);

/* The iteration that event `event` belongs to (0-based), or SIZE_MAX before the first. */
size_t an_iteration_of(const an_structure *st, size_t event);

/* Whether an out-of-memory error cut the run's first forward short, before any step
 * finished (one forward, no backward, no second iteration): what the rest of the step needs
 * is not in the trace. */
int an_first_forward_cut(const an_structure *r);

#endif
