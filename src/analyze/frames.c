/* frames.c: what the frames of a stack say: which PyTorch's viewer hides, which line is the
 * user's own, which site a stack is grouped by, and what kind of memory it allocated. */
#include "analyze/frames.h"

#include <string.h>

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

int an_torch_internal(const char *f)
{
	return strstr(f, "/torch/") || strstr(f, "\\torch\\") || strncmp(f, "torch/", 6) == 0 ||
	       strstr(f, "/functorch/") || strstr(f, "/triton/");
}

static int python_file(const char *f)
{
	size_t n = strlen(f);
	return n > 3 && strcmp(f + n - 3, ".py") == 0;
}

const md_frame *an_user_frame(const md_snapshot *s, uint32_t stack)
{
	if (stack >= s->stack_count)
		return NULL;
	const md_stack *st = &s->stacks[stack];
	const md_frame *first_shown = NULL, *first_python = NULL;
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
		if (!an_torch_internal(file))
			return f;
	}
	return first_python ? first_python : first_shown;
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

const char *an_category_name(int cat)
{
	static const char *const names[AN_CAT_COUNT] = {"parameters", "gradients",
	                                                "optimizer_state", "activations", "other"};
	return cat >= 0 && cat < AN_CAT_COUNT ? names[cat] : "other";
}

static int path_has(const char *file, const char *dir)
{
	/* matches "torch/optim/" and its Windows spelling "torch\optim\" */
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

int an_category(const md_snapshot *s, uint32_t stack, int stacks_recorded)
{
	if (stack >= s->stack_count)
		return AN_CAT_OTHER;
	const md_stack *st = &s->stacks[stack];
	int params = 0, grads = 0, acts = 0, visible = 0;
	for (size_t i = 0; i < st->count; i++) {
		const md_frame *f = &s->frames[st->first + i];
		const char *name = md_str(s, f->name), *file = md_str(s, f->filename);
		if (an_frame_hidden(s, f))
			continue;
		visible++;
		if (path_has(file, "torch/optim/"))
			return AN_CAT_OPTIMIZER;
		if (strcmp(name, "_apply") == 0 || strcmp(name, "load_state_dict") == 0 ||
		    strcmp(name, "_load_from_state_dict") == 0 ||
		    strcmp(name, "reset_parameters") == 0 ||
		    path_has(file, "torch/nn/parameter.py") ||
		    (strcmp(name, "__init__") == 0 && path_has(file, "torch/nn/modules/")))
			params = 1;
		else if (path_has(file, "torch/autograd/") || strstr(name, "AccumulateGrad") ||
		         strcmp(name, "_engine_run_backward") == 0 ||
		         (strcmp(name, "backward") == 0 && path_has(file, "torch/_tensor.py")))
			grads = 1;
		else if (strcmp(name, "forward") == 0 || strstr(name, "::forward"))
			acts = 1;
	}
	if (params)
		return AN_CAT_PARAMETERS;
	if (grads)
		return AN_CAT_GRADIENTS;
	/* No Python frame in a snapshot that records them: allocated by the autograd engine's
	 * C++ threads during backward. */
	if (visible == 0 && stacks_recorded)
		return AN_CAT_GRADIENTS;
	if (acts)
		return AN_CAT_ACTIVATIONS;
	return AN_CAT_OTHER;
}
