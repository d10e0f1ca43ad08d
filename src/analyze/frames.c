/* frames.c: stacks read once: hidden frames, user frames, categories, structure markers. */
#include "analyze/frames.h"

#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

const char *an_category_name(int cat)
{
	static const char *const names[AN_CAT_COUNT] = {
	    "parameters", "gradients", "optimizer_state", "activations", "other", "unknown"};
	return cat >= 0 && cat < AN_CAT_COUNT ? names[cat] : "other";
}

static int hidden_name(const char *name)
{
	static const char *const names[] = {"unwind::unwind",    "CapturedTraceback::gather",
	                                    "gather_with_cpp",   "_start",
	                                    "__libc_start_main", "PyEval_",
	                                    "PyObject_",         "PyFunction_"};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (strstr(name, names[i]))
			return 1;
	return 0;
}

static int hidden_file(const char *file)
{
	static const char *const files[] = {"core/boxing",
	                                    "/Register",
	                                    "/Redispatch",
	                                    "pythonrun.c",
	                                    "Modules/main.c",
	                                    "Objects/call.c",
	                                    "Objects/methodobject.c",
	                                    "pycore_ceval.h",
	                                    "ceval.c",
	                                    "cpython/abstract.h"};
	for (size_t i = 0; i < sizeof files / sizeof *files; i++)
		if (strstr(file, files[i]))
			return 1;
	return 0;
}

int an_frame_hidden(const md_snapshot *s, const md_frame *f)
{
	return hidden_name(md_str(s, f->name)) || hidden_file(md_str(s, f->filename));
}

/* Whether path holds package `pkg` ("/torch/") as a folder that is the package itself: the last
 * such folder, with no installation folder (site-packages) below it. A virtual environment
 * that happens to be called torch (/opt/torch/.venv/.../site-packages/transformers/...) is not
 * torch. */
static int in_package(const char *path, const char *pkg, const char *win_pkg)
{
	const char *last = NULL;
	for (const char *p = strstr(path, pkg); p; p = strstr(p + 1, pkg))
		last = p;
	for (const char *p = strstr(path, win_pkg); p; p = strstr(p + 1, win_pkg))
		if (!last || p > last)
			last = p;
	if (!last)
		return 0;
	return !strstr(last + 1, "-packages");
}

int an_torch_internal(const char *f)
{
	return strncmp(f, "torch/", 6) == 0 || in_package(f, "/torch/", "\\torch\\") ||
	       in_package(f, "/functorch/", "\\functorch\\") ||
	       in_package(f, "/triton/", "\\triton\\");
}

int an_framework_file(const char *f)
{
	return an_library_file(f) &&
	       (an_path_has(f, "accelerate/") || an_path_has(f, "lightning/") ||
	        an_path_has(f, "pytorch_lightning/") || an_path_has(f, "lightning_fabric/") ||
	        an_path_has(f, "deepspeed/"));
}

const char *an_python_stdlib(const char *path)
{
	for (const char *p = strstr(path, "/lib/python"); p; p = strstr(p + 1, "/lib/python")) {
		const char *q = p + 11;
		if (*q != '2' && *q != '3')
			continue;
		while ((*q >= '0' && *q <= '9') || *q == '.')
			q++;
		if (*q == '/')
			return q + 1;
	}
	return NULL;
}

int an_library_file(const char *f)
{
	return an_torch_internal(f) || strstr(f, "site-packages") || strstr(f, "dist-packages") ||
	       an_python_stdlib(f) != NULL;
}

static int python_file(const char *f)
{
	size_t n = strlen(f);
	return n > 3 && strcmp(f + n - 3, ".py") == 0;
}

int an_path_has(const char *file, const char *dir)
{
	size_t n = strlen(dir);
	for (const char *p = file; *p; p++) {
		size_t i = 0;
		while (i < n && p[i] && (p[i] == dir[i] || (dir[i] == '/' && p[i] == '\\')))
			i++;
		if (i == n)
			return 1;
	}
	return 0;
}

/* The kind of frame f (index i of s->frames): from kinds, else read from its strings. */
static uint8_t kind_of(const md_snapshot *s, const uint8_t *kinds, const md_frame *f)
{
	if (kinds)
		return kinds[f - s->frames];
	const char *name = md_str(s, f->name), *file = md_str(s, f->filename);
	return (uint8_t)((an_frame_hidden(s, f) ? 0 : AN_FK_SHOWN) |
	                 (python_file(file) ? AN_FK_PYTHON : 0) |
	                 (an_library_file(file) ? AN_FK_LIBRARY : 0) |
	                 (an_torch_internal(file) ? AN_FK_TORCH : 0) |
	                 (strstr(name, "CUDACachingAllocator") ||
	                          strstr(file, "CUDACachingAllocator") ||
	                          strstr(file, "memory_snapshot.cpp")
	                      ? AN_FK_ALLOCATOR
	                      : 0));
}

const md_frame *an_user_frame_k(const md_snapshot *s, const uint8_t *kinds, uint32_t stack)
{
	if (stack >= s->stack_count)
		return NULL;
	const md_stack *st = &s->stacks[stack];
	const md_frame *first_shown = NULL, *first_python = NULL, *first_outside_torch = NULL;
	for (uint32_t k = 0; k < st->count; k++) {
		const md_frame *f = &s->frames[st->first + k];
		uint8_t kind = kind_of(s, kinds, f);
		if (!(kind & AN_FK_SHOWN))
			continue;
		if (!first_shown)
			first_shown = f;
		if (!(kind & AN_FK_PYTHON))
			continue;
		if (!first_python)
			first_python = f;
		if (!(kind & AN_FK_LIBRARY))
			return f;
		if (!first_outside_torch && !(kind & AN_FK_TORCH))
			first_outside_torch = f;
	}
	return first_outside_torch ? first_outside_torch
	       : first_python      ? first_python
	                           : first_shown;
}

const md_frame *an_user_frame(const md_snapshot *s, uint32_t stack)
{
	return an_user_frame_k(s, NULL, stack);
}

/* The innermost shown frame whose kind has all of `want` and none of `not`, or NULL. */
static const md_frame *frame_where(const md_snapshot *s, const uint8_t *kinds, uint32_t stack,
                                   uint8_t want, uint8_t none)
{
	if (stack >= s->stack_count)
		return NULL;
	const md_stack *st = &s->stacks[stack];
	for (uint32_t k = 0; k < st->count; k++) {
		const md_frame *f = &s->frames[st->first + k];
		uint8_t kind = kind_of(s, kinds, f);
		if ((kind & want) == want && !(kind & none))
			return f;
	}
	return NULL;
}

const md_frame *an_own_frame_k(const md_snapshot *s, const uint8_t *kinds, uint32_t stack)
{
	return frame_where(s, kinds, stack, AN_FK_SHOWN | AN_FK_PYTHON, AN_FK_LIBRARY);
}

const md_frame *an_library_frame_k(const md_snapshot *s, const uint8_t *kinds, uint32_t stack)
{
	return frame_where(s, kinds, stack, AN_FK_SHOWN | AN_FK_PYTHON | AN_FK_LIBRARY, 0);
}

const md_frame *an_first_shown_k(const md_snapshot *s, const uint8_t *kinds, uint32_t stack)
{
	return frame_where(s, kinds, stack, AN_FK_SHOWN, 0);
}

const md_frame *an_own_frame(const md_snapshot *s, uint32_t stack)
{
	return an_own_frame_k(s, NULL, stack);
}

const md_frame *an_library_frame(const md_snapshot *s, uint32_t stack)
{
	return an_library_frame_k(s, NULL, stack);
}

/* What the rules below ask of a frame's name and of its file, as bits: read once per interned
 * string (text_cache), so a long name or path shared by many frames is read once, not once per
 * frame. Equality with a short word (strcmp) stops at the first difference and is asked
 * directly. */
enum {
	N_HIDDEN = 1u << 0,
	N_ACCUMULATE_GRAD = 1u << 1, /* "AccumulateGrad" */
	N_COLON_BACKWARD = 1u << 2,  /* "::backward" */
	N_COLON_FORWARD = 1u << 3,   /* "::forward" */
	N_TRAINING_STEP = 1u << 4,   /* "training_step" anywhere */
	N_REDUCE = 1u << 5,
	N_BACKWARD = 1u << 6,
	N_GRAD = 1u << 7,
	N_ALLOCATOR = 1u << 8, /* "CUDACachingAllocator" */
};
#define F(k) ((uint64_t)1 << (9 + (k))) /* above the name bits */
#define F_HIDDEN F(0)
#define F_PYTHON F(1)
#define F_TORCH F(2)        /* an_torch_internal */
#define F_MODULE_PY F(3)    /* torch/nn/modules/module.py */
#define F_COMPILED F(4)     /* compiled_file */
#define F_PARAMETER F(5)    /* torch/nn/parameter.py */
#define F_NN_MODULES F(6)   /* torch/nn/modules/ */
#define F_AUTOGRAD F(7)     /* torch/autograd/ */
#define F_AG_GRAPH F(8)     /* torch/autograd/graph.py */
#define F_AG_GRAD_MODE F(9) /* torch/autograd/grad_mode.py */
#define F_AG_FUNCTION F(10) /* torch/autograd/function.py */
#define F_LOSS F(11)        /* torch/nn/modules/loss.py, transformers/loss/ */
#define F_HF F(12)          /* transformers/ */
#define F_HF_GENERATE F(13)
#define F_HF_TRAINER F(14)
#define F_HF_CACHE F(15)
#define F_LIGHTNING F(16) /* lightning/, pytorch_lightning/ */
#define F_LOOPS_OPT F(17) /* loops/optimization/ */
#define F_ACCELERATE F(18)
#define F_FSDP F(19)
#define F_DDP F(20) /* torch/nn/parallel/distributed.py */
#define F_CHECKPOINT F(21)
#define F_CUDA_GRAPHS F(22)
#define F_AMP F(23)
#define F_FUNCTIONAL F(24)  /* torch/nn/functional.py */
#define F_CUDA_MEMORY F(25) /* torch/cuda/memory.py */
#define F_OPTIM F(26)       /* torch/optim/ */
#define F_LIBRARY F(27)     /* an_library_file */
#define F_ALLOCATOR F(28)   /* CUDACachingAllocator, memory_snapshot.cpp */
#define F_EVAL_LOOP F(29)   /* Lightning's loops/prediction_loop.py, loops/evaluation_loop.py */
#define F_HF_PIPELINE F(30) /* transformers/pipelines/base.py */
#define F_AOT_RUNTIME F(31) /* AOT autograd's runtime wrappers (its CompiledFunction) */
#define TEXT_READ ((uint64_t)1 << 63) /* a string's file bits are read */
#define NAME_READ ((uint64_t)1 << 62) /* ... its name bits */

static uint64_t name_bits(const char *name)
{
	return (hidden_name(name) ? N_HIDDEN : 0) |
	       (strstr(name, "AccumulateGrad") ? N_ACCUMULATE_GRAD : 0) |
	       (strstr(name, "::backward") ? N_COLON_BACKWARD : 0) |
	       (strstr(name, "::forward") ? N_COLON_FORWARD : 0) |
	       (strstr(name, "training_step") ? N_TRAINING_STEP : 0) |
	       (strstr(name, "reduce") ? N_REDUCE : 0) |
	       (strstr(name, "backward") ? N_BACKWARD : 0) | (strstr(name, "grad") ? N_GRAD : 0) |
	       (strstr(name, "CUDACachingAllocator") ? N_ALLOCATOR : 0);
}

/* Code torch.compile runs: inductor's generated kernels and wrappers, AOT autograd, dynamo's
 * tracing (not eval_frame.py, whose disable wrapper is on every optimizer step). */
static int compiled_file(const char *file)
{
	return an_path_has(file, "torch/_inductor/") ||
	       an_path_has(file, "torch/_functorch/_aot_autograd/") ||
	       strstr(file, "torchinductor_") ||
	       an_path_has(file, "torch/_dynamo/convert_frame.py") ||
	       an_path_has(file, "torch/_dynamo/output_graph.py") ||
	       an_path_has(file, "torch/_dynamo/symbolic_convert.py");
}

static uint64_t file_bits(const char *file)
{
	static const struct {
		uint64_t bit;
		const char *dir;
	} dirs[] = {
	    {F_MODULE_PY, "torch/nn/modules/module.py"},
	    {F_PARAMETER, "torch/nn/parameter.py"},
	    {F_NN_MODULES, "torch/nn/modules/"},
	    {F_AUTOGRAD, "torch/autograd/"},
	    {F_AG_GRAPH, "torch/autograd/graph.py"},
	    {F_AG_GRAD_MODE, "torch/autograd/grad_mode.py"},
	    {F_AG_FUNCTION, "torch/autograd/function.py"},
	    {F_LOSS, "torch/nn/modules/loss.py"},
	    {F_LOSS, "transformers/loss/"},
	    {F_HF, "transformers/"},
	    {F_HF_GENERATE, "transformers/generation/"},
	    {F_HF_TRAINER, "transformers/trainer.py"},
	    {F_HF_CACHE, "transformers/cache_utils.py"},
	    {F_HF_PIPELINE, "transformers/pipelines/base.py"},
	    {F_LIGHTNING, "lightning/"},
	    {F_LIGHTNING, "pytorch_lightning/"},
	    {F_LOOPS_OPT, "loops/optimization/"},
	    {F_ACCELERATE, "accelerate/"},
	    {F_FSDP, "torch/distributed/fsdp/"},
	    {F_FSDP, "torch/distributed/_composable/fsdp"},
	    {F_DDP, "torch/nn/parallel/distributed.py"},
	    {F_CHECKPOINT, "torch/utils/checkpoint.py"},
	    {F_CUDA_GRAPHS, "torch/cuda/graphs.py"},
	    {F_AMP, "torch/amp/"},
	    {F_AMP, "torch/cuda/amp/"},
	    {F_AMP, "lightning/pytorch/plugins/precision/amp.py"},
	    {F_AMP, "lightning/fabric/plugins/precision/amp.py"},
	    {F_FUNCTIONAL, "torch/nn/functional.py"},
	    {F_CUDA_MEMORY, "torch/cuda/memory.py"},
	    {F_OPTIM, "torch/optim/"},
	    {F_EVAL_LOOP, "lightning/pytorch/loops/prediction_loop.py"},
	    {F_EVAL_LOOP, "lightning/pytorch/loops/evaluation_loop.py"},
	    {F_EVAL_LOOP, "pytorch_lightning/loops/prediction_loop.py"},
	    {F_EVAL_LOOP, "pytorch_lightning/loops/evaluation_loop.py"},
	    {F_AOT_RUNTIME, "torch/_functorch/_aot_autograd/runtime_wrappers.py"},
	    {F_AOT_RUNTIME, "torch/_functorch/_aot_autograd/jit_compile_runtime_wrappers.py"},
	};
	uint64_t b = (hidden_file(file) ? F_HIDDEN : 0) | (python_file(file) ? F_PYTHON : 0) |
	             (an_torch_internal(file) ? F_TORCH : 0) |
	             (an_library_file(file) ? F_LIBRARY : 0) |
	             (strstr(file, "CUDACachingAllocator") || strstr(file, "memory_snapshot.cpp")
	                  ? F_ALLOCATOR
	                  : 0) |
	             (compiled_file(file) ? F_COMPILED : 0);
	for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++)
		if (!(b & dirs[i].bit) && an_path_has(file, dirs[i].dir))
			b |= dirs[i].bit;
	return b;
}

/* The bits of each string of s, read on first use: a name's (name_bits) and a file's
 * (file_bits) apart, each only for a string used so. */
typedef struct {
	const md_snapshot *s;
	uint64_t *bits; /* per string id; NAME_READ, TEXT_READ once read */
} text_cache;

static uint64_t name_part(text_cache *c, uint32_t id)
{
	if (id >= c->s->strings.count)
		return name_bits("");
	if (!(c->bits[id] & NAME_READ))
		c->bits[id] |= NAME_READ | name_bits(md_str(c->s, id));
	return c->bits[id] & 0x1ffu;
}

static uint64_t file_part(text_cache *c, uint32_t id)
{
	if (id >= c->s->strings.count)
		return file_bits("");
	if (!(c->bits[id] & TEXT_READ))
		c->bits[id] |= TEXT_READ | file_bits(md_str(c->s, id));
	return c->bits[id] & ~(uint64_t)0x1ff & ~NAME_READ;
}

/* A frame's bits: what its name says and what its file says. */
static uint64_t frame_bits(text_cache *c, const md_frame *f)
{
	return name_part(c, f->name) | file_part(c, f->filename);
}

static int frame_shown(uint64_t b)
{
	return !(b & (N_HIDDEN | F_HIDDEN));
}

/* A call into a model: nn.Module.__call__ (a compiled model is called through it too; dynamo's
 * eval_frame wrappers alone are no sign: torch wraps its optimizers in them). */
static int model_call(const char *name, uint64_t b)
{
	return (b & F_MODULE_PY) &&
	       (strcmp(name, "_call_impl") == 0 || strcmp(name, "_wrapped_call_impl") == 0 ||
	        strcmp(name, "__call__") == 0);
}

static int params_frame(const char *name, uint64_t b)
{
	return strcmp(name, "_apply") == 0 || strcmp(name, "load_state_dict") == 0 ||
	       strcmp(name, "_load_from_state_dict") == 0 ||
	       strcmp(name, "reset_parameters") == 0 || (b & F_PARAMETER) ||
	       (strcmp(name, "__init__") == 0 && (b & F_NN_MODULES));
}

/* Autograd's backward: the engine's entry points, AccumulateGrad, a compiled backward, and
 * any function named backward (a custom autograd.Function's). Not function.py's `apply`,
 * which forward calls too. */
static int backward_frame(const char *name, uint64_t b)
{
	if (b & F_AUTOGRAD)
		return strcmp(name, "apply") != 0 && !(b & F_AG_GRAPH) && !(b & F_AG_GRAD_MODE);
	return (b & N_ACCUMULATE_GRAD) || strcmp(name, "_engine_run_backward") == 0 ||
	       strcmp(name, "backward") == 0 || (b & N_COLON_BACKWARD);
}

static int loss_frame(const char *name, uint64_t b)
{
	static const char *const names[] = {"cross_entropy",   "log_softmax",
	                                    "nll_loss",        "binary_cross_entropy",
	                                    "ForCausalLMLoss", "fixed_cross_entropy"};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (strcmp(name, names[i]) == 0)
			return 1;
	return (b & F_LOSS) != 0;
}

/* Frameworks and techniques on the stack, wherever their frames are. */
static uint32_t markers(const char *name, uint64_t b)
{
	uint32_t f = 0;
	if (b & F_HF) {
		f |= AN_SF_HF;
		if (b & F_HF_GENERATE)
			f |= AN_SF_GENERATE;
		if (b & F_HF_TRAINER) {
			f |= AN_SF_HF_TRAINER;
			if (strcmp(name, "training_step") == 0 || strcmp(name, "compute_loss") == 0)
				f |= AN_SF_TRAIN_STEP;
			if (strcmp(name, "prediction_step") == 0)
				f |= AN_SF_NO_GRAD_LOOP;
		}
		if (b & F_HF_CACHE)
			f |= AN_SF_KV_CACHE;
		/* a pipeline's forward runs the model under its inference context (no_grad) */
		if ((b & F_HF_PIPELINE) && strcmp(name, "forward") == 0)
			f |= AN_SF_NO_GRAD_LOOP;
		if (strcmp(name, "nested_concat") == 0)
			f |= AN_SF_GATHER_PREDS;
	}
	if (b & F_LIGHTNING) {
		f |= AN_SF_LIGHTNING;
		if ((b & N_TRAINING_STEP) || (b & F_LOOPS_OPT))
			f |= AN_SF_TRAIN_STEP;
		if (b & F_EVAL_LOOP)
			f |= AN_SF_NO_GRAD_LOOP;
	}
	static const struct {
		uint64_t bit;
		uint32_t flag;
	} plain[] = {
	    {F_ACCELERATE, AN_SF_ACCELERATE},
	    {F_FSDP, AN_SF_FSDP},
	    {F_DDP, AN_SF_DDP},
	    {F_CHECKPOINT, AN_SF_CHECKPOINT},
	    {F_COMPILED, AN_SF_COMPILE},
	    {F_CUDA_GRAPHS, AN_SF_CUDA_GRAPH},
	    {F_AMP, AN_SF_AUTOCAST},
	    {F_OPTIM, AN_SF_IN_OPTIMIZER},
	};
	for (size_t i = 0; i < sizeof plain / sizeof *plain; i++)
		if (b & plain[i].bit)
			f |= plain[i].flag;
	if (strcmp(name, "dropout") == 0 && (b & F_FUNCTIONAL))
		f |= AN_SF_DROPOUT;
	if (strcmp(name, "empty_cache") == 0 && (b & F_CUDA_MEMORY))
		f |= AN_SF_EMPTY_CACHE;
	if (strcmp(name, "zero_grad") == 0)
		f |= AN_SF_ZERO_GRAD;
	if ((b & F_FUNCTIONAL) && (strcmp(name, "interpolate") == 0 ||
	                           strncmp(name, "upsample", strlen("upsample")) == 0))
		f |= AN_SF_RESIZE;
	if (loss_frame(name, b))
		f |= AN_SF_LOSS;
	if (((b & F_COMPILED) && (strcmp(name, "aot_stage2_autograd") == 0 ||
	                          strcmp(name, "aot_dispatch_autograd") == 0)) ||
	    ((b & F_AOT_RUNTIME) && strcmp(name, "forward") == 0))
		f |= AN_SF_COMPILED_GRAD;
	/* FSDP2's all-gather inputs cast by _to_dtype_if_needed, FSDP1's _use_low_precision_shard:
	 * each allocates only where a param_dtype differs from the parameters' */
	if ((b & F_FSDP) &&
	    (strcmp(name, "_to_dtype_if_needed") == 0 || strstr(name, "low_precision")))
		f |= AN_SF_PARAM_DTYPE;
	return f;
}

/* The category decided by frame f (innermost first), or AN_CAT_COUNT when f decides nothing.
 * `outside_torch_inner`: a frame outside torch lies between f and the allocation. */
static int decides(const char *name, uint64_t b, int outside_torch_inner)
{
	/* The optimizer decides only for its own work: an optimizer.step(closure) whose closure
	 * (user or framework code, inner to it) runs forward and backward decides nothing. */
	if (b & F_OPTIM)
		return outside_torch_inner ? AN_CAT_COUNT : AN_CAT_OPTIMIZER;
	if (b & F_FSDP) {
		/* FSDP's own buffers: parameters (sharded, all-gathered) or the gradients it
		 * reduce-scatters */
		return b & (N_REDUCE | N_BACKWARD | N_GRAD) ? AN_CAT_GRADIENTS : AN_CAT_PARAMETERS;
	}
	/* DDP's gradient buckets (built at construction, rebuilt in a forward) */
	if (b & F_DDP)
		return AN_CAT_GRADIENTS;
	if (params_frame(name, b))
		return AN_CAT_PARAMETERS;
	if (backward_frame(name, b))
		return AN_CAT_GRADIENTS;
	/* a module's forward, a loss, or a compiled graph's forward (its buffers are the saved
	 * activations; a compiled backward was decided above) */
	if (strcmp(name, "forward") == 0 || (b & N_COLON_FORWARD) || loss_frame(name, b) ||
	    (b & F_COMPILED))
		return AN_CAT_ACTIVATIONS;
	return AN_CAT_COUNT;
}

static void classify(text_cache *tc, const md_stack *st, an_stack_info *out)
{
	const md_snapshot *s = tc->s;
	int shown = 0, outside_torch_inner = 0, caller_seen = 0, torch_caller = 0, layer_open = 1;
	uint32_t outermost_python = UINT32_MAX, first_model_call = UINT32_MAX;
	uint32_t empty_cache_at = UINT32_MAX;
	out->category = AN_CAT_COUNT;
	for (uint32_t k = 0; k < st->count; k++) {
		const md_frame *f = &s->frames[st->first + k];
		uint64_t b = frame_bits(tc, f);
		if (!frame_shown(b))
			continue;
		const char *name = md_str(s, f->name);
		shown++;
		out->flags |= markers(name, b);
		if (!(b & F_PYTHON))
			continue;
		/* the layer that made it: the innermost Python frame in torch.nn's modules or
		 * outside torch (BatchNorm and pooling layers call F.batch_norm, F.max_pool3d
		 * through torch/_jit_internal.py) */
		if (layer_open && (!(b & F_TORCH) || (b & F_NN_MODULES))) {
			layer_open = 0;
			if ((b & F_NN_MODULES) && !(b & (F_MODULE_PY | F_LOSS))) {
				out->flags |= AN_SF_TORCH_LAYER;
				if (!strstr(md_str(s, f->filename), "linear.py"))
					out->flags |= AN_SF_NN_LAYER;
			}
		}
		/* empty_cache() whose caller (the next Python frame out) is torch itself */
		if (empty_cache_at != UINT32_MAX && empty_cache_at != k && !caller_seen) {
			caller_seen = 1;
			if (b & F_TORCH)
				torch_caller = 1;
		}
		if (strcmp(name, "empty_cache") == 0 && (b & F_CUDA_MEMORY) &&
		    empty_cache_at == UINT32_MAX)
			empty_cache_at = k;
		out->flags |= AN_SF_PYTHON;
		outermost_python = k;
		if (model_call(name, b)) {
			out->flags |= AN_SF_MODULE_CALL;
			first_model_call = k; /* the outermost one, once the loop ends */
			if (strcmp(name, "_call_impl") == 0 && out->model_calls < 255)
				out->model_calls++;
		}
		if (out->category == AN_CAT_COUNT) {
			int c = decides(name, b, outside_torch_inner);
			if (c != AN_CAT_COUNT) {
				out->category = (uint8_t)c;
				if (c == AN_CAT_OPTIMIZER)
					out->flags |= AN_SF_OPTIMIZER;
			}
		}
		if (!(b & F_TORCH))
			outside_torch_inner = 1;
		if (backward_frame(name, b))
			out->flags |= AN_SF_BACKWARD;
	}
	/* A custom Function's backward that the engine calls: its outermost Python frame is
	 * autograd's function.py (the engine's thread has nothing above it). */
	if (outermost_python != UINT32_MAX) {
		uint64_t b = frame_bits(tc, &s->frames[st->first + outermost_python]);
		/* The main thread's stacks start in the user's script; a stack that starts inside
		 * torch ran on another thread: autograd's engine, running backward (a checkpoint's
		 * recomputation, a custom Function's backward, DDP's hooks). */
		if (b & F_TORCH)
			out->flags |= AN_SF_ENGINE_THREAD;
		if (b & F_AG_FUNCTION) {
			out->flags |= AN_SF_BACKWARD;
			if (out->category == AN_CAT_COUNT || out->category == AN_CAT_OTHER)
				out->category = AN_CAT_GRADIENTS;
		}
	}
	if (out->category == AN_CAT_COUNT && shown)
		out->category = AN_CAT_OTHER;
	if ((out->flags & AN_SF_EMPTY_CACHE) && torch_caller) {
		out->flags &= ~(uint32_t)AN_SF_EMPTY_CACHE;
		out->flags |= AN_SF_TORCH_EMPTY_CACHE;
	}
	/* The loop-level chain: Python frames outside (above) the outermost model call. */
	out->loop_lo = first_model_call == UINT32_MAX ? 0 : first_model_call + 1;
	uint32_t depth = 0;
	for (uint32_t k = out->loop_lo; k < st->count; k++) {
		uint64_t b = frame_bits(tc, &s->frames[st->first + k]);
		if (frame_shown(b) && (b & F_PYTHON))
			depth++;
	}
	out->loop_depth = (uint8_t)MR_MIN(depth, 255u);
}

an_stack_info *an_classify_stacks(const md_snapshot *s)
{
	text_cache tc = {s,
	                 mr_alloc_array(s->strings.count ? s->strings.count : 1, sizeof *tc.bits)};
	an_stack_info *info = mr_alloc_array(s->stack_count ? s->stack_count : 1, sizeof *info);
	if (info && tc.bits)
		for (size_t i = 0; i < s->stack_count; i++)
			classify(&tc, &s->stacks[i], &info[i]);
	else {
		free(info);
		info = NULL;
	}
	free(tc.bits);
	return info;
}

uint8_t *an_frame_kinds(const md_snapshot *s)
{
	text_cache tc = {s,
	                 mr_alloc_array(s->strings.count ? s->strings.count : 1, sizeof *tc.bits)};
	uint8_t *out = mr_alloc_array(s->frame_count ? s->frame_count : 1, 1);
	if (!tc.bits || !out) {
		free(out);
		out = NULL;
		goto done;
	}
	for (size_t i = 0; i < s->frame_count; i++) {
		uint64_t b = frame_bits(&tc, &s->frames[i]);
		out[i] = (uint8_t)((frame_shown(b) ? AN_FK_SHOWN : 0) |
		                   (b & F_PYTHON ? AN_FK_PYTHON : 0) |
		                   (b & F_LIBRARY ? AN_FK_LIBRARY : 0) |
		                   (b & F_TORCH ? AN_FK_TORCH : 0) |
		                   (b & (N_ALLOCATOR | F_ALLOCATOR) ? AN_FK_ALLOCATOR : 0));
	}
done:
	free(tc.bits);
	return out;
}

int an_stack_category(const an_stack_info *info, uint32_t stack, int no_frames)
{
	int c = info[stack].category;
	return c == AN_CAT_COUNT ? no_frames : c;
}
