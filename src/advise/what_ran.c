/* what_ran.c: "Training (backward passes ran), 40 iterations; torch.compile; Hugging Face." */
#include "advise/what_ran.h"

#include "base/buf.h"
#include "base/mem.h"

static const char *evidence_words(an_kind_evidence e)
{
	switch (e) {
	case AN_KIND_BACKWARD: return "backward passes ran";
	case AN_KIND_OPTIMIZER: return "the optimizer ran";
	case AN_KIND_TECHNIQUE: return "a training technique is on";
	case AN_KIND_FRAMEWORK: return "a framework's training step is on the stack";
	case AN_KIND_FRAMEWORK_NO_GRAD:
		return "a framework's prediction or evaluation loop, which runs without gradients";
	case AN_KIND_GENERATE: return "generate()";
	case AN_KIND_NO_GRAPH: return "its forwards free their activations as they go: no_grad";
	case AN_KIND_GRAPH_NO_BACKWARD:
		return "its forwards keep their autograd graphs, and no backward ever runs";
	case AN_KIND_GRAPH_LOSSES:
		return "its forwards keep their autograd graphs and compute a loss, and no "
		       "backward "
		       "ran: an evaluation without no_grad, or microbatches whose summed loss was "
		       "not "
		       "backpropagated yet";
	case AN_KIND_FIRST_FORWARD:
		return "it died in its first forward, which was keeping activations for a backward";
	case AN_KIND_FIRST_STEP:
		return "its forwards, each run once, kept activations for a backward, and it died "
		       "before the first one";
	case AN_KIND_CUDA_GRAPHS:
		return "CUDA graphs hold what their forwards allocate, so what a forward keeps "
		       "cannot tell whether gradients were being recorded";
	case AN_KIND_STATE_BEFORE:
		return "gradients or optimizer state made before the trace's window are live";
	case AN_KIND_GRAPH_BEFORE:
		return "the forward it died in was keeping activations for a backward: what many "
		       "of "
		       "its operations made before the trace's window is still live";
	default: return "the trace cannot tell whether gradients were being recorded";
	}
}

static const char *const techs[AN_TECH_COUNT] = {"FSDP",
                                                 "DDP",
                                                 "activation checkpointing",
                                                 "torch.compile",
                                                 "CUDA graphs",
                                                 "autocast (mixed precision)",
                                                 "FSDP's mixed precision (a lower param_dtype)"};

/* the techniques only a training step has a use for (what AN_KIND_TECHNIQUE stands on) */
#define TRAINING_TECHS (AN_TECH_FSDP | AN_TECH_DDP | AN_TECH_CHECKPOINT)

/* "FSDP and activation checkpointing are on, techniques for training)" */
static void put_training_techs(mr_buf *b, uint32_t named)
{
	unsigned n = 0, total = 0;
	for (unsigned i = 0; i < AN_TECH_COUNT; i++)
		total += (named >> i) & 1u;
	for (unsigned i = 0; i < AN_TECH_COUNT; i++) {
		if (!(named & (1u << i)))
			continue;
		n++;
		const char *sep = n == 1       ? ""
		                  : n == total ? (total > 2 ? ", and " : " and ")
		                               : ", ";
		mr_buf_printf(b, "%s%s", sep, techs[i]);
	}
	mr_buf_puts(b, total > 1 ? " are on, techniques for training)"
	                         : " is on, a technique for training)");
}

int ad_write_what_ran(ad_advice *a, const an_structure *run)
{
	mr_buf b = {0};
	if (run && run->evidence != AN_KIND_NO_TRACE) {
		static const char *const kinds[] = {"Unknown kind of run", "Training", "Evaluation",
		                                    "Inference"};
		/* the techniques that made it training are named there, not again in the list */
		uint32_t named = 0;
		if (run->evidence == AN_KIND_TECHNIQUE)
			named = run->techniques & TRAINING_TECHS;
		if (named) {
			mr_buf_printf(&b, "%s (", kinds[run->kind]);
			put_training_techs(&b, named);
		} else {
			mr_buf_printf(&b, "%s (%s)", kinds[run->kind],
			              evidence_words(run->evidence));
		}
		if (run->start_count > 1)
			mr_buf_printf(&b, ", %zu iterations", run->start_count);
		else if (run->start_count == 1 || run->forward_spans)
			mr_buf_printf(&b, ", one iteration");
		if (run->accumulating && run->kind == AN_RUN_TRAINING)
			mr_buf_puts(&b, ", gradients accumulated over microbatches");
		const char *sep = "; ";
		for (unsigned i = 0; i < AN_TECH_COUNT; i++)
			if ((run->techniques & ~named) & (1u << i)) {
				mr_buf_printf(&b, "%s%s", sep, techs[i]);
				sep = ", ";
			}
		static const struct {
			uint32_t fw;
			const char *name;
		} fws[] = {{AN_FW_HF_TRAINER, "Hugging Face Trainer"},
		           {AN_FW_HF, "Hugging Face transformers"},
		           {AN_FW_LIGHTNING, "PyTorch Lightning"},
		           {AN_FW_ACCELERATE, "accelerate"}};
		for (size_t i = 0; i < sizeof fws / sizeof *fws; i++) {
			/* the Trainer is transformers: say it once */
			if (!(run->frameworks & fws[i].fw) ||
			    (fws[i].fw == AN_FW_HF && (run->frameworks & AN_FW_HF_TRAINER)))
				continue;
			mr_buf_printf(&b, "%s%s", sep, fws[i].name);
			sep = ", ";
		}
		mr_buf_putc(&b, '.');
	}
	if (b.failed) {
		mr_buf_free(&b);
		return -1;
	}
	a->what_ran = b.data ? b.data : mr_strndup("", 0);
	return a->what_ran ? 0 : -1;
}
