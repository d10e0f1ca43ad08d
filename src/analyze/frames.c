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

int an_frame_hidden(const md_snapshot *s, const md_frame *f)
{
	static const char *const names[] = {"unwind::unwind",    "CapturedTraceback::gather",
	                                    "gather_with_cpp",   "_start",
	                                    "__libc_start_main", "PyEval_",
	                                    "PyObject_",         "PyFunction_"};
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
	const char *name = md_str(s, f->name), *file = md_str(s, f->filename);
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (strstr(name, names[i]))
			return 1;
	for (size_t i = 0; i < sizeof files / sizeof *files; i++)
		if (strstr(file, files[i]))
			return 1;
	return 0;
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

int an_library_file(const char *f)
{
	return an_torch_internal(f) || strstr(f, "site-packages") || strstr(f, "dist-packages");
}

static int python_file(const char *f)
{
	size_t n = strlen(f);
	return n > 3 && strcmp(f + n - 3, ".py") == 0;
}

/* "torch/optim/" in a path, also in its Windows spelling "torch\optim\". */
static int path_has(const char *file, const char *dir)
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

const md_frame *an_user_frame(const md_snapshot *s, uint32_t stack)
{
	if (stack >= s->stack_count)
		return NULL;
	const md_stack *st = &s->stacks[stack];
	const md_frame *first_shown = NULL, *first_python = NULL, *first_outside_torch = NULL;
	for (uint32_t k = 0; k < st->count; k++) {
		const md_frame *f = &s->frames[st->first + k];
		const char *file = md_str(s, f->filename);
		if (an_frame_hidden(s, f))
			continue;
		if (!first_shown)
			first_shown = f;
		if (!python_file(file))
			continue;
		if (!first_python)
			first_python = f;
		if (!an_library_file(file))
			return f;
		if (!first_outside_torch && !an_torch_internal(file))
			first_outside_torch = f;
	}
	return first_outside_torch ? first_outside_torch
	       : first_python      ? first_python
	                           : first_shown;
}

const md_frame *an_site_frame(const md_snapshot *s, uint32_t stack)
{
	if (stack >= s->stack_count)
		return NULL;
	const md_stack *st = &s->stacks[stack];
	const md_frame *first = NULL;
	for (uint32_t i = 0; i < st->count; i++) {
		const md_frame *f = &s->frames[st->first + i];
		if (an_frame_hidden(s, f))
			continue;
		if (python_file(md_str(s, f->filename)))
			return f;
		if (!first)
			first = f;
	}
	return first;
}

/* A call into a model: nn.Module.__call__ (a compiled model is called through it too; dynamo's
 * eval_frame wrappers alone are no sign: torch wraps its optimizers in them). */
static int model_call(const char *name, const char *file)
{
	return path_has(file, "torch/nn/modules/module.py") &&
	       (strcmp(name, "_call_impl") == 0 || strcmp(name, "_wrapped_call_impl") == 0 ||
	        strcmp(name, "__call__") == 0);
}

/* Code torch.compile runs: inductor's generated kernels and wrappers, AOT autograd, dynamo's
 * tracing (not eval_frame.py, whose disable wrapper is on every optimizer step). */
static int compiled_frame(const char *file)
{
	return path_has(file, "torch/_inductor/") ||
	       path_has(file, "torch/_functorch/_aot_autograd/") ||
	       strstr(file, "torchinductor_") || path_has(file, "torch/_dynamo/convert_frame.py") ||
	       path_has(file, "torch/_dynamo/output_graph.py") ||
	       path_has(file, "torch/_dynamo/symbolic_convert.py");
}

static int params_frame(const char *name, const char *file)
{
	return strcmp(name, "_apply") == 0 || strcmp(name, "load_state_dict") == 0 ||
	       strcmp(name, "_load_from_state_dict") == 0 ||
	       strcmp(name, "reset_parameters") == 0 || path_has(file, "torch/nn/parameter.py") ||
	       (strcmp(name, "__init__") == 0 && path_has(file, "torch/nn/modules/"));
}

/* Autograd's backward: the engine's entry points, AccumulateGrad, a compiled backward, and
 * any function named backward (a custom autograd.Function's). Not function.py's `apply`,
 * which forward calls too. */
static int backward_frame(const char *name, const char *file)
{
	if (path_has(file, "torch/autograd/"))
		return strcmp(name, "apply") != 0 && !path_has(file, "torch/autograd/graph.py") &&
		       !path_has(file, "torch/autograd/grad_mode.py");
	return strstr(name, "AccumulateGrad") || strcmp(name, "_engine_run_backward") == 0 ||
	       strcmp(name, "backward") == 0 || strstr(name, "::backward") != NULL;
}

static int loss_frame(const char *name, const char *file)
{
	static const char *const names[] = {"cross_entropy",   "log_softmax",
	                                    "nll_loss",        "binary_cross_entropy",
	                                    "ForCausalLMLoss", "fixed_cross_entropy"};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (strcmp(name, names[i]) == 0)
			return 1;
	return path_has(file, "torch/nn/modules/loss.py") || path_has(file, "transformers/loss/");
}

/* Frameworks and techniques on the stack, wherever their frames are. */
static uint32_t markers(const char *name, const char *file)
{
	uint32_t f = 0;
	if (path_has(file, "transformers/")) {
		f |= AN_SF_HF;
		if (path_has(file, "transformers/generation/"))
			f |= AN_SF_GENERATE;
		if (path_has(file, "transformers/trainer.py")) {
			f |= AN_SF_HF_TRAINER;
			if (strcmp(name, "training_step") == 0 || strcmp(name, "compute_loss") == 0)
				f |= AN_SF_TRAIN_STEP;
		}
		if (path_has(file, "transformers/cache_utils.py"))
			f |= AN_SF_KV_CACHE;
	}
	if (path_has(file, "lightning/") || path_has(file, "pytorch_lightning/")) {
		f |= AN_SF_LIGHTNING;
		if (strstr(name, "training_step") || path_has(file, "loops/optimization/"))
			f |= AN_SF_TRAIN_STEP;
	}
	if (path_has(file, "accelerate/"))
		f |= AN_SF_ACCELERATE;
	if (path_has(file, "torch/distributed/fsdp/") ||
	    path_has(file, "torch/distributed/_composable/fsdp"))
		f |= AN_SF_FSDP;
	if (path_has(file, "torch/nn/parallel/distributed.py"))
		f |= AN_SF_DDP;
	if (path_has(file, "torch/utils/checkpoint.py"))
		f |= AN_SF_CHECKPOINT;
	if (compiled_frame(file))
		f |= AN_SF_COMPILE;
	if (path_has(file, "torch/cuda/graphs.py"))
		f |= AN_SF_CUDA_GRAPH;
	if (path_has(file, "torch/amp/") || path_has(file, "torch/cuda/amp/") ||
	    path_has(file, "lightning/pytorch/plugins/precision/amp.py") ||
	    path_has(file, "lightning/fabric/plugins/precision/amp.py"))
		f |= AN_SF_AUTOCAST;
	if (strcmp(name, "dropout") == 0 && path_has(file, "torch/nn/functional.py"))
		f |= AN_SF_DROPOUT;
	if (strcmp(name, "empty_cache") == 0 && path_has(file, "torch/cuda/memory.py"))
		f |= AN_SF_EMPTY_CACHE;
	if (path_has(file, "torch/optim/"))
		f |= AN_SF_IN_OPTIMIZER;
	if (strcmp(name, "zero_grad") == 0)
		f |= AN_SF_ZERO_GRAD;
	if (loss_frame(name, file))
		f |= AN_SF_LOSS;
	return f;
}

/* The category decided by frame f (innermost first), or AN_CAT_COUNT when f decides nothing.
 * `outside_torch_inner`: a frame outside torch lies between f and the allocation. */
static int decides(const char *name, const char *file, int outside_torch_inner)
{
	/* The optimizer decides only for its own work: an optimizer.step(closure) whose closure
	 * (user or framework code, inner to it) runs forward and backward decides nothing. */
	if (path_has(file, "torch/optim/"))
		return outside_torch_inner ? AN_CAT_COUNT : AN_CAT_OPTIMIZER;
	if (path_has(file, "torch/distributed/fsdp/") ||
	    path_has(file, "torch/distributed/_composable/fsdp")) {
		/* FSDP's own buffers: parameters (sharded, all-gathered) or the gradients it
		 * reduce-scatters */
		return strstr(name, "reduce") || strstr(name, "backward") || strstr(name, "grad")
		           ? AN_CAT_GRADIENTS
		           : AN_CAT_PARAMETERS;
	}
	/* DDP's gradient buckets (built at construction, rebuilt in a forward) */
	if (path_has(file, "torch/nn/parallel/distributed.py"))
		return AN_CAT_GRADIENTS;
	if (params_frame(name, file))
		return AN_CAT_PARAMETERS;
	if (backward_frame(name, file))
		return AN_CAT_GRADIENTS;
	/* a module's forward, a loss, or a compiled graph's forward (its buffers are the saved
	 * activations; a compiled backward was decided above) */
	if (strcmp(name, "forward") == 0 || strstr(name, "::forward") || loss_frame(name, file) ||
	    compiled_frame(file))
		return AN_CAT_ACTIVATIONS;
	return AN_CAT_COUNT;
}

static void classify(const md_snapshot *s, const md_stack *st, an_stack_info *out)
{
	int shown = 0, outside_torch_inner = 0;
	uint32_t outermost_python = UINT32_MAX, first_model_call = UINT32_MAX;
	out->category = AN_CAT_COUNT;
	for (uint32_t k = 0; k < st->count; k++) {
		const md_frame *f = &s->frames[st->first + k];
		if (an_frame_hidden(s, f))
			continue;
		const char *name = md_str(s, f->name), *file = md_str(s, f->filename);
		shown++;
		out->flags |= markers(name, file);
		if (!python_file(file))
			continue;
		out->flags |= AN_SF_PYTHON;
		outermost_python = k;
		if (model_call(name, file)) {
			out->flags |= AN_SF_MODULE_CALL;
			first_model_call = k; /* the outermost one, once the loop ends */
			if (strcmp(name, "_call_impl") == 0 && out->model_calls < 255)
				out->model_calls++;
		}
		if (out->category == AN_CAT_COUNT) {
			int c = decides(name, file, outside_torch_inner);
			if (c != AN_CAT_COUNT) {
				out->category = (uint8_t)c;
				if (c == AN_CAT_OPTIMIZER)
					out->flags |= AN_SF_OPTIMIZER;
			}
		}
		if (!an_torch_internal(file))
			outside_torch_inner = 1;
		if (backward_frame(name, file))
			out->flags |= AN_SF_BACKWARD;
	}
	/* A custom Function's backward that the engine calls: its outermost Python frame is
	 * autograd's function.py (the engine's thread has nothing above it). */
	if (outermost_python != UINT32_MAX) {
		const md_frame *f = &s->frames[st->first + outermost_python];
		/* The main thread's stacks start in the user's script; a stack that starts inside
		 * torch ran on another thread: autograd's engine, running backward (a checkpoint's
		 * recomputation, a custom Function's backward, DDP's hooks). */
		if (an_torch_internal(md_str(s, f->filename)))
			out->flags |= AN_SF_ENGINE_THREAD;
		if (path_has(md_str(s, f->filename), "torch/autograd/function.py")) {
			out->flags |= AN_SF_BACKWARD;
			if (out->category == AN_CAT_COUNT || out->category == AN_CAT_OTHER)
				out->category = AN_CAT_GRADIENTS;
		}
	}
	if (out->category == AN_CAT_COUNT && shown)
		out->category = AN_CAT_OTHER;
	/* The loop-level chain: Python frames outside (above) the outermost model call. */
	out->loop_lo = first_model_call == UINT32_MAX ? 0 : first_model_call + 1;
	uint32_t depth = 0;
	for (uint32_t k = out->loop_lo; k < st->count; k++) {
		const md_frame *f = &s->frames[st->first + k];
		if (!an_frame_hidden(s, f) && python_file(md_str(s, f->filename)))
			depth++;
	}
	out->loop_depth = (uint8_t)MR_MIN(depth, 255u);
}

an_stack_info *an_classify_stacks(const md_snapshot *s)
{
	an_stack_info *info = mr_alloc_array(s->stack_count ? s->stack_count : 1, sizeof *info);
	if (!info)
		return NULL;
	for (size_t i = 0; i < s->stack_count; i++)
		classify(s, &s->stacks[i], &info[i]);
	return info;
}

int an_stack_category(const an_stack_info *info, uint32_t stack, int no_frames)
{
	int c = info[stack].category;
	return c == AN_CAT_COUNT ? no_frames : c;
}
