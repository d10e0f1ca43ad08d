/* frames.h: what an allocation's stack says about it, read once per interned stack.
 *
 * Which frames PyTorch's viewer hides, the user's own line, the category of the memory (by the
 * innermost frame that decides), and the markers the run's structure is read from: calls into a
 * model (nn.Module or a compiled model), autograd's backward, the optimizer's own work, the
 * frameworks and techniques whose code is on the stack. Frames only: numbers live elsewhere.
 *
 * Ownership: an_classify_stacks returns an array the caller frees with free(). The frame
 * pointers returned by the lookups point into the md_snapshot. */
#ifndef MR_FRAMES_H
#define MR_FRAMES_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

/* Live memory by what it holds. UNKNOWN: blocks older than the trace, whose stack was never
 * recorded; OTHER: what no rule claims. */
enum {
	AN_CAT_PARAMETERS,
	AN_CAT_GRADIENTS,
	AN_CAT_OPTIMIZER,
	AN_CAT_ACTIVATIONS,
	AN_CAT_OTHER,
	AN_CAT_UNKNOWN,
	AN_CAT_COUNT
};
const char *an_category_name(int cat);

/* Markers of a stack (an_stack_info.flags). */
enum {
	AN_SF_PYTHON = 1u << 0,      /* at least one Python frame */
	AN_SF_MODULE_CALL = 1u << 1, /* inside a call of an nn.Module or a compiled model */
	AN_SF_BACKWARD = 1u << 2,    /* autograd's backward (or a Function it runs) */
	AN_SF_OPTIMIZER = 1u << 3,   /* the optimizer's own work: its state or its update */
	AN_SF_GENERATE = 1u << 4,    /* text generation (transformers generate) */
	AN_SF_CHECKPOINT = 1u << 5,  /* torch.utils.checkpoint */
	AN_SF_FSDP = 1u << 6,
	AN_SF_DDP = 1u << 7,
	AN_SF_COMPILE = 1u << 8,    /* torch.compile: dynamo, inductor, AOT autograd */
	AN_SF_CUDA_GRAPH = 1u << 9, /* torch.cuda.graphs */
	AN_SF_HF = 1u << 10,        /* Hugging Face transformers */
	AN_SF_LIGHTNING = 1u << 11,
	AN_SF_ACCELERATE = 1u << 12,
	AN_SF_HF_TRAINER = 1u << 13,    /* transformers' Trainer loop */
	AN_SF_TRAIN_STEP = 1u << 14,    /* a framework's training step (Lightning, Trainer) */
	AN_SF_DROPOUT = 1u << 15,       /* a dropout mask: a module in training mode */
	AN_SF_LOSS = 1u << 16,          /* a loss function (cross_entropy, log_softmax, nll_loss) */
	AN_SF_EMPTY_CACHE = 1u << 17,   /* torch.cuda.empty_cache() */
	AN_SF_KV_CACHE = 1u << 18,      /* transformers' KV cache (cache_utils) */
	AN_SF_AUTOCAST = 1u << 19,      /* inside torch.autocast / amp */
	AN_SF_ENGINE_THREAD = 1u << 20, /* no user code above it: a thread of autograd's engine */
	AN_SF_IN_OPTIMIZER = 1u << 21,  /* a torch/optim frame anywhere (a step, a zero_grad) */
	AN_SF_ZERO_GRAD = 1u << 22,     /* zero_grad() of an optimizer or a module */
	AN_SF_NO_GRAD_LOOP = 1u << 23,  /* a framework's prediction or evaluation loop, which runs
	                                   without gradients (Lightning's predict, validate and
	                                   test; the Trainer's prediction_step) */
	AN_SF_GATHER_PREDS = 1u << 24,  /* the Trainer concatenating eval predictions on the
	                                   device (trainer_pt_utils nested_concat) */
	AN_SF_NN_LAYER = 1u << 25,      /* the innermost Python frame in torch/nn/modules/ or
	                                   outside torch is a torch.nn layer other
	                                   than Linear (torch/nn/modules/ but not linear.py,
	                                   module.py or loss.py): an LSTM, a convolution, a
	                                   norm, a pooling, an embedding, whose output is not
	                                   logits */
	AN_SF_TORCH_EMPTY_CACHE = 1u << 26, /* empty_cache() called by torch itself (its caller
	                                       is a torch frame: torch.cuda.graph's capture), not
	                                       by the user's code */
	AN_SF_RESIZE = 1u << 27,            /* F.interpolate / F.upsample*: a resized image or
	                                       feature map (nn.Upsample calls it too) */
	AN_SF_PARAM_DTYPE = 1u << 28,       /* FSDP casting its parameters to a lower dtype to
	                                       compute in (FSDP2's MixedPrecisionPolicy
	                                       param_dtype, FSDP1's MixedPrecision) */
	AN_SF_COMPILED_GRAD = 1u << 29,     /* AOT autograd compiling a graph for autograd
	                                       (aot_stage2_autograd, aot_dispatch_autograd) or
	                                       running one (its CompiledFunction's forward): a
	                                       compiled forward that saves tensors for a
	                                       backward, as a forward in grad mode does */
	AN_SF_TORCH_LAYER = 1u << 30,       /* the layer that made it (the innermost Python
	                                       frame in torch/nn/modules/ or outside torch) is
	                                       one of torch.nn's, Linear included */
};

typedef struct {
	uint32_t flags;
	uint8_t category;    /* by the innermost deciding frame; AN_CAT_COUNT when no frame decides
	                        and none is shown (the caller knows whether the trace saw it) */
	uint8_t loop_depth;  /* Python frames above the first model call (the loop-level chain) */
	uint8_t model_calls; /* nested nn.Module calls (1: the model itself; 2: a module it
	                        calls directly, such as the output projection) */
	uint32_t loop_lo;    /* the loop-level chain is the Python frames of frames[loop_lo..count),
	                        outermost last (stacks are stored innermost first) */
} an_stack_info;

/* One entry per stack of s (s->stack_count), or NULL when memory runs out. */
an_stack_info *an_classify_stacks(const md_snapshot *s);

/* Category of a block allocated with `stack`: the stack's deciding frame, else `no_frames`
 * (what the caller knows of a block with no shown frame: GRADIENTS for one the trace saw the
 * autograd engine allocate, UNKNOWN for one older than the trace). */
int an_stack_category(const an_stack_info *info, uint32_t stack, int no_frames);

/* PyTorch's own viewer hides these frames (unwinding, interpreter, dispatcher plumbing). */
int an_frame_hidden(const md_snapshot *s, const md_frame *f);
/* A file of torch itself (or functorch, triton), by path. */
int an_torch_internal(const char *filename);
/* A file of an installed training framework that runs the user's model (accelerate, Lightning,
 * DeepSpeed):
 * its forwards wrap a whole model (accelerate's autocast one, Lightning's strategy wrappers),
 * they are none of its modules. */
int an_framework_file(const char *filename);
/* "torch/optim/" in a path, also in its Windows spelling "torch\optim\". */
int an_path_has(const char *file, const char *dir);
/* A file of an installed package (site-packages, dist-packages), of torch, or of Python's
 * standard library (lib/pythonX.Y). */
int an_library_file(const char *filename);
/* "/lib/python3.12/" (or python2.x) in path: a file of the interpreter's standard library.
 * Returns the text after it, or NULL. */
const char *an_python_stdlib(const char *path);

/* The first line of the user's own code: the innermost shown Python frame outside torch and
 * installed packages (site-packages: transformers, lightning), else the innermost outside torch,
 * else the innermost Python frame, else the first shown, else NULL. */
const md_frame *an_user_frame(const md_snapshot *s, uint32_t stack);

/* The user's own line, strictly: the innermost shown Python frame outside library files, or
 * NULL when the stack has none (all of it is torch and packages, or there is no Python frame:
 * the autograd engine's thread in backward). */
const md_frame *an_own_frame(const md_snapshot *s, uint32_t stack);
/* The innermost shown Python frame inside a library file, or NULL. */
const md_frame *an_library_frame(const md_snapshot *s, uint32_t stack);

/* What the site rules ask of a frame, one byte per frame of s: read once per interned string,
 * so that a long name or path shared by many frames is read once. */
enum {
	AN_FK_SHOWN = 1u << 0,     /* not hidden (an_frame_hidden) */
	AN_FK_PYTHON = 1u << 1,    /* a .py file */
	AN_FK_LIBRARY = 1u << 2,   /* an_library_file */
	AN_FK_TORCH = 1u << 3,     /* an_torch_internal */
	AN_FK_ALLOCATOR = 1u << 4, /* the caching allocator's own (CUDACachingAllocator,
	                              memory_snapshot.cpp) */
};
/* The kinds of s's frames (s->frame_count bytes; the caller frees), or NULL when memory runs
 * out. */
uint8_t *an_frame_kinds(const md_snapshot *s);
/* an_user_frame, an_own_frame, an_library_frame and the first shown frame, reading the frames'
 * kinds (an_frame_kinds) instead of their strings; kinds NULL reads the strings. */
const md_frame *an_user_frame_k(const md_snapshot *s, const uint8_t *kinds, uint32_t stack);
const md_frame *an_own_frame_k(const md_snapshot *s, const uint8_t *kinds, uint32_t stack);
const md_frame *an_library_frame_k(const md_snapshot *s, const uint8_t *kinds, uint32_t stack);
const md_frame *an_first_shown_k(const md_snapshot *s, const uint8_t *kinds, uint32_t stack);

#endif
