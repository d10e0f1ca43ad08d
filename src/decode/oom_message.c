/* oom_message.c: out-of-memory messages of every era, found anywhere in a text.
 *
 * The whole input is "squeezed": every blank and line break is removed, so that
 * a message hard-wrapped anywhere (even inside a word) reads as one string, e.g.
 * "CUDAoutofmemory.Triedtoallocate192.00MiB.GPU0hasatotalcapacityof...". Messages are found by
 * anchors in that string ("Triedtoallocate", "error:outofmemory", "wouldexceedallowedmemory",
 * "backendoutofmemory(", "error=2:outofmemory", "STATUS_ALLOC_FAILED", "<WORD>outofmemory.") and
 * parsed field by field; a message that stops matching keeps the
 * fields read so far. A table of line starts maps positions back to line numbers. */
#include "decode/oom_message.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "decode/amount.h"
#include "decode/chars.h"

#define EV_MAX_PROCESSES 4096 /* "Process N has ..." sentences kept per message */

const char *ev_oom_era_name(int era)
{
	switch (era) {
	case EV_OOM_ERA_LEGACY_CACHED: return "legacy_cached";
	case EV_OOM_ERA_LEGACY_RESERVED: return "legacy_reserved";
	case EV_OOM_ERA_LEGACY_HINT: return "legacy_hint";
	case EV_OOM_ERA_V21_SENTENCE: return "v21_sentence";
	case EV_OOM_ERA_CURRENT: return "current";
	case EV_OOM_ERA_ASYNC_ALLOCATOR: return "async_allocator";
	case EV_OOM_ERA_DRIVER_ERROR: return "driver_error";
	case EV_OOM_ERA_GENERIC: return "generic";
	case EV_OOM_ERA_LEGACY_RUNTIME: return "legacy_runtime_error";
	case EV_OOM_ERA_LIBRARY: return "library_alloc";
	case EV_OOM_ERA_MPS: return "mps";
	default: return "unknown";
	}
}

/* The squeezed input: no blanks, and the squeezed offset at which each line starts. */
typedef struct {
	char *s;
	size_t n;
	size_t *line_at; /* line_at[i]: squeezed offset of the start of line i+1 */
	size_t lines;
} ev_squeezed;

static mr_status ev_squeeze(const char *d, size_t len, ev_squeezed *q, mr_error *err)
{
	size_t lines = 1;
	for (size_t i = 0; i < len; i++)
		if (d[i] == '\n' || (d[i] == '\r' && (i + 1 >= len || d[i + 1] != '\n')))
			lines++;
	q->s = malloc(len + 1);
	q->line_at = mr_alloc_array(lines, sizeof *q->line_at);
	if (!q->s || !q->line_at)
		return mr_oom(err);
	size_t n = 0, l = 0;
	q->line_at[l++] = 0;
	for (size_t i = 0; i < len; i++) {
		char c = d[i];
		if (c == '\n' || (c == '\r' && (i + 1 >= len || d[i + 1] != '\n'))) {
			if (l < lines)
				q->line_at[l++] = n;
		} else if (!tc_isblank(c)) {
			q->s[n++] = c;
		}
	}
	q->s[n] = '\0';
	q->n = n;
	q->lines = l;
	return MR_OK;
}

static size_t ev_squeezed_line(const ev_squeezed *q, size_t pos)
{
	size_t lo = 0, hi = q->lines; /* largest i with line_at[i] <= pos */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (q->line_at[mid] <= pos)
			lo = mid;
		else
			hi = mid;
	}
	return lo + 1;
}

/* An amount at s[*p]; advances *p. Overflowing amounts (NVML nonsense) parse but are reported
 * through *bad so the caller can leave the field unknown. */
static int ev_amt(const char *s, size_t n, size_t *p, uint64_t *v, int *bad)
{
	if (*p > n)
		return 0;
	int ovf = 0;
	size_t used = ev_parse_amount(s + *p, n - *p, v, &ovf);
	if (!used)
		return 0;
	*p += used;
	*bad = ovf;
	return 1;
}

/* Matches a literal (case-insensitively) at *p and advances. */
static int ev_lit(const char *s, size_t n, size_t *p, const char *lit)
{
	if (!tc_at_ci(s, n, *p, lit))
		return 0;
	*p += strlen(lit);
	return 1;
}

/* Reads "WORD<digits>" (e.g. "GPU0") at *p: the device word into word[], the number into *dev. */
static int ev_dev_word(const char *s, size_t n, size_t *p, char *word, size_t wsz, int *dev)
{
	size_t q = *p;
	while (q < n && q - *p < 15 && tc_isalpha(s[q]))
		q++;
	if (q == *p)
		return 0;
	size_t w = q;
	if (!tc_read_int(s, n, &q, dev))
		return 0;
	tc_copy_word(word, wsz, s + *p, w - *p);
	*p = q;
	return 1;
}

static void ev_oom_init(ev_oom *o)
{
	memset(o, 0, sizeof *o);
	o->device = -1;
}

/* Stores an amount in a field unless it overflowed. */
#define EV_SET(o, field, flag, v, bad)                                                             \
	do {                                                                                       \
		if (!(bad)) {                                                                      \
			(o)->field = (v);                                                          \
			(o)->flag = 1;                                                             \
		}                                                                                  \
	} while (0)

/* Legacy tail "(GPU 0; T total capacity; A already allocated; F free; [X allowed;] R reserved in
 * total by PyTorch)" or "...; C cached)", in any order; p is just after '('. */
static size_t ev_oom_legacy_tail(const char *s, size_t n, size_t p, ev_oom *o, char *word,
                                 size_t wsz)
{
	int dev, cached = 0, reserved = 0, closed = 0;
	uint64_t cached_v = 0;
	if (ev_dev_word(s, n, &p, word, wsz, &dev)) {
		o->device = dev;
		if (p < n && s[p] == ';')
			p++;
	}
	for (int guard = 0; guard < 16 && p < n; guard++) {
		uint64_t v;
		int bad;
		if (!ev_amt(s, n, &p, &v, &bad))
			break;
		if (ev_lit(s, n, &p, "totalcapacity"))
			EV_SET(o, total_capacity, has_total_capacity, v, bad);
		else if (ev_lit(s, n, &p, "alreadyallocated"))
			EV_SET(o, allocated_by_pytorch, has_allocated, v, bad);
		else if (ev_lit(s, n, &p, "free"))
			EV_SET(o, device_free, has_device_free, v, bad);
		else if (ev_lit(s, n, &p, "allowed"))
			EV_SET(o, allowed, has_allowed, v, bad);
		else if (ev_lit(s, n, &p, "reservedintotalbyPyTorch")) {
			EV_SET(o, reserved_total, has_reserved_total, v, bad);
			reserved = 1;
		} else if (ev_lit(s, n, &p, "cached")) {
			cached = !bad;
			cached_v = v;
		} else {
			/* an item forks add ("57.10 GiB current active"): skip to its end */
			size_t lim = p + 64 < n ? p + 64 : n;
			while (p < lim && s[p] != ';' && s[p] != ')')
				p++;
		}
		if (p < n && s[p] == ';') {
			p++;
		} else {
			if (p < n && s[p] == ')') {
				p++;
				closed = 1;
			}
			break;
		}
	}
	if (cached) {
		/* <= 1.4 printed cached - allocated: the reserved-but-unallocated bytes */
		o->reserved_unallocated = cached_v;
		o->has_reserved_unallocated = 1;
		if (o->has_allocated && cached_v <= UINT64_MAX - o->allocated_by_pytorch) {
			o->reserved_total = o->allocated_by_pytorch + cached_v;
			o->has_reserved_total = 1;
		}
		o->era = EV_OOM_ERA_LEGACY_CACHED;
	} else if (reserved) {
		if (o->has_allocated) {
			o->reserved_unallocated = o->reserved_total > o->allocated_by_pytorch
			                              ? o->reserved_total - o->allocated_by_pytorch
			                              : 0;
			o->has_reserved_unallocated = 1;
		}
		o->era = EV_OOM_ERA_LEGACY_RESERVED;
		if (closed && tc_at_ci(s, n, p, "Ifreservedmemoryis>>allocatedmemory")) {
			o->era = EV_OOM_ERA_LEGACY_HINT;
			p += strlen("Ifreservedmemoryis>>allocatedmemory");
		}
	} else {
		o->era = EV_OOM_ERA_GENERIC;
	}
	return p;
}

/* Sentence tail (2.1+); p is just after "Tried to allocate X.". */
static size_t ev_oom_sentence_tail(const char *s, size_t n, size_t p, ev_oom *o, char *word,
                                   size_t wsz, mr_status *st, mr_error *err)
{
	uint64_t v, f;
	int bad, badf, dev;
	size_t q = p;
	if (!ev_dev_word(s, n, &q, word, wsz, &dev) || !ev_lit(s, n, &q, "hasatotalcapac")) {
		o->era = EV_OOM_ERA_GENERIC;
		return p;
	}
	o->device = dev;
	int typo = 0;
	if (ev_lit(s, n, &q, "ty"))
		typo = 1;
	else if (!ev_lit(s, n, &q, "ity")) {
		o->era = EV_OOM_ERA_GENERIC;
		return q;
	}
	o->era = typo ? EV_OOM_ERA_V21_SENTENCE : EV_OOM_ERA_CURRENT;
	if (!ev_lit(s, n, &q, "of") || !ev_amt(s, n, &q, &v, &bad))
		return q;
	EV_SET(o, total_capacity, has_total_capacity, v, bad);
	if (ev_lit(s, n, &q, "ofwhich")) {
		if (!ev_amt(s, n, &q, &f, &badf) || !ev_lit(s, n, &q, "isfree."))
			return q;
		EV_SET(o, device_free, has_device_free, f, badf);
	} else if (ev_lit(s, n, &q, ".")) {
		o->era = EV_OOM_ERA_GENERIC; /* XPU: "GPU 0 has a total capacity of T." */
	} else {
		return q;
	}
	size_t cap = 0;
	for (int guard = 0; guard < EV_MAX_PROCESSES + 8 && q < n; guard++) {
		size_t r = q;
		int pid;
		if (ev_lit(s, n, &r, "Process") && tc_read_int(s, n, &r, &pid) &&
		    ev_lit(s, n, &r, "has") && ev_amt(s, n, &r, &v, &bad) &&
		    ev_lit(s, n, &r, "memoryinuse.")) {
			if (!bad && o->other_process_count < EV_MAX_PROCESSES) {
				if (MR_GROW(o->other_processes, cap, o->other_process_count + 1)) {
					*st = mr_oom(err);
					return r;
				}
				o->other_processes[o->other_process_count].pid = pid;
				o->other_processes[o->other_process_count].bytes = v;
				o->other_process_count++;
			}
			q = r;
			continue;
		}
		r = q;
		if (ev_lit(s, n, &r, "Includingnon-PyTorchmemory,thisprocesshas") &&
		    ev_amt(s, n, &r, &v, &bad) && ev_lit(s, n, &r, "memoryinuse.")) {
			EV_SET(o, this_process_in_use, has_this_process, v, bad);
			q = r;
			continue;
		}
		r = q;
		if (ev_amt(s, n, &r, &v, &bad) && ev_lit(s, n, &r, "allowed;")) {
			EV_SET(o, allowed, has_allowed, v, bad);
			q = r;
			continue;
		}
		break;
	}
	if (!ev_lit(s, n, &q, "Oftheallocatedmemory") || !ev_amt(s, n, &q, &v, &bad) ||
	    !ev_lit(s, n, &q, "isallocatedbyPyTorch,"))
		return q;
	EV_SET(o, allocated_by_pytorch, has_allocated, v, bad);
	size_t r = q;
	if (ev_lit(s, n, &r, "with") && ev_amt(s, n, &r, &f, &badf) &&
	    ev_lit(s, n, &r, "allocatedinprivatepools")) {
		EV_SET(o, private_pools, has_private_pools, f, badf);
		/* skip "(e.g.,CUDAGraphs)," up to the "and" that follows it */
		size_t lim = r + 64 < n ? r + 64 : n;
		size_t a = tc_find_ci(s + r, lim - r, "),and");
		q = a < lim - r ? r + a + 2 : r;
	}
	if (ev_lit(s, n, &q, "and") && ev_amt(s, n, &q, &v, &bad) &&
	    ev_lit(s, n, &q, "isreservedbyPyTorchbutunallocated."))
		EV_SET(o, reserved_unallocated, has_reserved_unallocated, v, bad);
	return q;
}

/* Uppercase word (2..15 characters) ending at s[end); returns its start or end if none. */
static size_t ev_upper_word_before(const char *s, size_t end)
{
	size_t j = end;
	while (j > 0 && end - j < 15 && (tc_isupper(s[j - 1]) || tc_isdigit(s[j - 1])))
		j--;
	while (j < end && tc_isdigit(s[j])) /* a word starts with a letter */
		j++;
	return end - j >= 2 ? j : end;
}

/* The backend word ending at s[end) (ev_upper_word_before), kept within the line it ends on
 * unless it is a backend's name as a whole: the squeezed text joins lines, so a line ending in
 * "PYTORCH_CUDA_ALLOC_CONF" (PyTorch 2.1's message has no full stop there) would lend "CONF" to
 * the next line's "CUDA out of memory", while a word hard-wrapped inside itself ("CU" + "DA")
 * must join. Returns the word's start, or end if there is none. */
static size_t ev_backend_word(const ev_squeezed *q, size_t end)
{
	static const char *const known[] = {"CUDA", "HIP", "XPU", "MPS", "NPU", "MLU", "HPU"};
	size_t w = ev_upper_word_before(q->s, end);
	if (w >= end)
		return end;
	size_t start = q->line_at[ev_squeezed_line(q, end - 1) - 1];
	while (start < end && tc_isdigit(q->s[start]))
		start++;
	if (start <= w || end - start < 2)
		return w;
	for (size_t k = 0; k < sizeof known / sizeof *known; k++)
		if (strlen(known[k]) == end - w && memcmp(q->s + w, known[k], end - w) == 0)
			return w;
	return start;
}

/* "Tried to allocate" at i. Returns the offset after the message. */
static size_t ev_oom_tried(const ev_squeezed *q, size_t i, ev_oom *o, mr_status *st, mr_error *err)
{
	const char *s = q->s;
	size_t n = q->n, start = i, p = i + strlen("Triedtoallocate");
	char word[16] = "";
	int generic_lead = 0;
	static const char lead[] = "outofmemory.";
	if (i >= sizeof lead - 1 && tc_at_ci(s, n, i - (sizeof lead - 1), lead)) {
		size_t ls = i - (sizeof lead - 1);
		size_t w = ev_backend_word(q, ls);
		start = w < ls ? w : ls;
		tc_copy_word(o->backend, sizeof o->backend, s + w, ls - w);
		generic_lead =
		    w == ls && s[ls] == 'O'; /* "Out of memory." of the generic allocator */
	}
	o->line = ev_squeezed_line(q, start);
	uint64_t v;
	int bad;
	if (ev_lit(s, n, &p, "morethan1EBmemory")) {
		o->requested_more_than_1eb = 1;
		o->requested_bytes = (uint64_t)1 << 60;
		o->has_requested = 1;
		o->era = EV_OOM_ERA_GENERIC;
		return p;
	}
	if (!ev_amt(s, n, &p, &v, &bad)) {
		o->era = EV_OOM_ERA_GENERIC;
		return p;
	}
	EV_SET(o, requested_bytes, has_requested, v, bad);
	if (p < n && s[p] == '(')
		p = ev_oom_legacy_tail(s, n, p + 1, o, word, sizeof word);
	else if (p < n && s[p] == '.')
		p = ev_oom_sentence_tail(s, n, p + 1, o, word, sizeof word, st, err);
	else
		o->era = EV_OOM_ERA_GENERIC;
	if (generic_lead && o->era == EV_OOM_ERA_CURRENT)
		o->era = EV_OOM_ERA_GENERIC;
	if (!o->backend[0] && word[0] && strcmp(word, "GPU") != 0)
		tc_copy_word(o->backend, sizeof o->backend, word, strlen(word));
	return p;
}

/* cudaMallocAsync: "Allocation on device D would exceed allowed memory. (out of memory)" followed
 * by "Label : amount" lines; i is at "wouldexceedallowedmemory". */
static size_t ev_oom_async(const ev_squeezed *q, size_t i, ev_oom *o)
{
	const char *s = q->s;
	size_t n = q->n, p = i + strlen("wouldexceedallowedmemory"), start = i;
	static const char alloc[] = "Allocationondevice";
	size_t d = i;
	while (d > 0 && i - d < 10 && tc_isdigit(s[d - 1]))
		d--;
	if (d < i && d >= sizeof alloc - 1 && tc_at_ci(s, n, d - (sizeof alloc - 1), alloc)) {
		size_t dp = d;
		int dev;
		if (tc_read_int(s, n, &dp, &dev))
			o->device = dev;
		start = d - (sizeof alloc - 1);
	}
	o->line = ev_squeezed_line(q, start);
	o->era = EV_OOM_ERA_ASYNC_ALLOCATOR;
	tc_copy_word(o->backend, sizeof o->backend, "CUDA", 4);
	(void)ev_lit(s, n, &p, ".");
	(void)ev_lit(s, n, &p, "(outofmemory)");
	for (int guard = 0; guard < 8 && p < n; guard++) {
		int which;
		if (ev_lit(s, n, &p, "Currentlyallocated"))
			which = 0;
		else if (ev_lit(s, n, &p, "Requested"))
			which = 1;
		else if (ev_lit(s, n, &p, "Devicelimit"))
			which = 2;
		else if (ev_lit(s, n, &p, "Free"))
			which = 3;
		else if (ev_lit(s, n, &p, "PyTorchlimit"))
			which = 4;
		else
			break;
		size_t lim = p + 64 < n ? p + 64 : n; /* skip "(according to CUDA)" etc. to ':' */
		while (p < lim && s[p] != ':')
			p++;
		if (p >= lim)
			break;
		p++;
		uint64_t v;
		int bad;
		if (!ev_amt(s, n, &p, &v, &bad))
			break;
		switch (which) {
		case 0: EV_SET(o, allocated_by_pytorch, has_allocated, v, bad); break;
		case 1: EV_SET(o, requested_bytes, has_requested, v, bad); break;
		case 2: EV_SET(o, total_capacity, has_total_capacity, v, bad); break;
		case 3: EV_SET(o, device_free, has_device_free, v, bad); break;
		default: EV_SET(o, allowed, has_allowed, v, bad); break;
		}
	}
	return p;
}

/* Apple's MPS backend: "MPS backend out of memory (MPS allocated: X, other allocations: Y, max
 * allowed: Z). Tried to allocate W on private pool."; i is at "backendoutofmemory(". The request
 * is read here, so the main loop does not find it again. */
static size_t ev_oom_mps(const ev_squeezed *q, size_t i, ev_oom *o)
{
	const char *s = q->s;
	size_t n = q->n, w = ev_backend_word(q, i), p = i + strlen("backendoutofmemory(");
	uint64_t alloc = 0, other = 0, v;
	int bad, has_other = 0;
	tc_copy_word(o->backend, sizeof o->backend, s + w, i - w);
	o->line = ev_squeezed_line(q, w < i ? w : i);
	o->era = EV_OOM_ERA_MPS;
	if (p < n && ev_lit(s, n, &p, o->backend) && ev_lit(s, n, &p, "allocated:") &&
	    ev_amt(s, n, &p, &alloc, &bad)) {
		EV_SET(o, allocated_by_pytorch, has_allocated, alloc, bad);
		(void)ev_lit(s, n, &p, ",");
	}
	if (ev_lit(s, n, &p, "otherallocations:") && ev_amt(s, n, &p, &other, &bad)) {
		has_other = !bad;
		(void)ev_lit(s, n, &p, ",");
	}
	if (ev_lit(s, n, &p, "maxallowed:") && ev_amt(s, n, &p, &v, &bad))
		EV_SET(o, allowed, has_allowed, v, bad);
	/* what this process holds on the device: MPS's own blocks and everything else */
	if (o->has_allocated && has_other && alloc <= UINT64_MAX - other) {
		o->this_process_in_use = alloc + other;
		o->has_this_process = 1;
	}
	(void)ev_lit(s, n, &p, ").");
	if (ev_lit(s, n, &p, "Triedtoallocate") && ev_amt(s, n, &p, &v, &bad))
		EV_SET(o, requested_bytes, has_requested, v, bad);
	return p;
}

/* A message that only says memory ran out, at i: "<WORD> error: out of memory" (driver), 0.x's
 * "THCudaCheck FAIL ... error=2 : out of memory" and "cuda runtime error (2) : out of memory",
 * a CUDA library's "CUBLAS_STATUS_ALLOC_FAILED". Returns the offset after it, or i when there is
 * none; *thc is set for THCudaCheck's line (the RuntimeError that follows repeats it). */
static size_t ev_oom_no_sizes(const ev_squeezed *q, size_t i, ev_oom *o, int *thc)
{
	const char *s = q->s;
	size_t n = q->n, w;
	static const char *const libs[] = {"CUBLAS_STATUS_ALLOC_FAILED",
	                                   "CUDNN_STATUS_ALLOC_FAILED"};
	*thc = 0;
	if (tc_at(s, n, i, "error:outofmemory")) {
		/* lower-case, unlike "OutOfMemoryError: Out of memory." */
		if ((w = ev_backend_word(q, i)) >= i)
			return i;
		tc_copy_word(o->backend, sizeof o->backend, s + w, i - w);
		o->era = EV_OOM_ERA_DRIVER_ERROR;
		o->line = ev_squeezed_line(q, w);
		return i + strlen("error:outofmemory");
	}
	int thc_form = tc_at_ci(s, n, i, "error=2:outofmemory");
	if (thc_form || tc_at_ci(s, n, i, "error(2):outofmemory")) {
		static const char runtime[] = "cudaruntime";
		if (!thc_form &&
		    !(i >= sizeof runtime - 1 && tc_at_ci(s, n, i - (sizeof runtime - 1), runtime)))
			return i;
		tc_copy_word(o->backend, sizeof o->backend, "CUDA", 4);
		o->era = EV_OOM_ERA_LEGACY_RUNTIME;
		o->line = ev_squeezed_line(q, i);
		*thc = thc_form;
		return i + strlen(thc_form ? "error=2:outofmemory" : "error(2):outofmemory");
	}
	for (size_t k = 0; k < sizeof libs / sizeof *libs; k++) {
		if (!tc_at(s, n, i, libs[k]))
			continue;
		tc_copy_word(o->backend, sizeof o->backend, "CUDA", 4);
		tc_copy_word(o->status, sizeof o->status, libs[k], strlen(libs[k]));
		o->era = EV_OOM_ERA_LIBRARY;
		o->line = ev_squeezed_line(q, i);
		return i + strlen(libs[k]);
	}
	return i;
}

/* The message at s[i], if one starts there: fills o, sets *found, returns the offset after it. */
static size_t ev_oom_at(const ev_squeezed *q, size_t i, ev_oom *o, int *found, int *thc,
                        mr_status *st, mr_error *err)
{
	const char *s = q->s;
	size_t n = q->n, next = i;
	char c = s[i];
	*found = 0;
	*thc = 0;
	if (c == 'T' && tc_at(s, n, i, "Triedtoallocate")) {
		next = ev_oom_tried(q, i, o, st, err);
	} else if (c == 'w' && tc_at(s, n, i, "wouldexceedallowedmemory")) {
		next = ev_oom_async(q, i, o);
	} else if (c == 'b' && tc_at_ci(s, n, i, "backendoutofmemory(")) {
		next = ev_oom_mps(q, i, o);
	} else if (c == 'e' || c == 'C') {
		next = ev_oom_no_sizes(q, i, o, thc);
	} else if ((c == 'o' || c == 'O') && tc_at_ci(s, n, i, "outofmemory.") &&
	           !tc_at(s, n, i + 12, "Triedtoallocate")) {
		/* "XPU out of memory." with no recognisable tail */
		size_t w = ev_backend_word(q, i);
		if (w < i) {
			tc_copy_word(o->backend, sizeof o->backend, s + w, i - w);
			o->era = EV_OOM_ERA_GENERIC;
			o->line = ev_squeezed_line(q, w);
			next = i + 12;
		}
	}
	*found = next > i;
	return next;
}

/* Whether ev_oom_at could find a message at a byte: the first letters it looks for. */
static int ev_may_start(char c)
{
	return c == 'T' || c == 'w' || c == 'b' || c == 'e' || c == 'C' || c == 'o' || c == 'O';
}

/* ---- the traceback above a message ---- */

enum { TB_MAX_LINES = 400, TB_MAX_LINE = 4096 }; /* a deep framework traceback fits */

static void copy_text(char *out, size_t cap, const char *s, size_t n)
{
	while (n && (*s == ' ' || *s == '\t'))
		s++, n--;
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\r' || s[n - 1] == '\t'))
		n--;
	n = n < cap - 1 ? n : cap - 1;
	memcpy(out, s, n);
	out[n] = '\0';
}

/* A caret line under a frame's code (Python 3.11+): blanks, '^' and '~' only. */
static int caret_line(const char *s, size_t n)
{
	int marks = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '^' || s[i] == '~')
			marks = 1;
		else if (s[i] != ' ' && s[i] != '\r')
			return 0;
	}
	return marks;
}

/* `  File "PATH", line N, in FUNCTION`: 1 and the parts, else 0. */
static int frame_line(const char *s, size_t n, const char **path, size_t *path_n, long *line,
                      const char **fn, size_t *fn_n)
{
	static const char head[] = "File \"", mid[] = "\", line ", tail[] = ", in ";
	size_t i = 0;
	while (i < n && s[i] == ' ')
		i++;
	if (i == 0 || n - i < sizeof head || memcmp(s + i, head, sizeof head - 1))
		return 0;
	i += sizeof head - 1;
	const char *m = NULL;
	for (size_t j = i; j + sizeof mid - 1 <= n; j++)
		if (memcmp(s + j, mid, sizeof mid - 1) == 0)
			m = s + j; /* the last one: a path may hold the text itself */
	if (!m)
		return 0;
	*path = s + i;
	*path_n = (size_t)(m - (s + i));
	size_t k = (size_t)(m - s) + sizeof mid - 1;
	long v = 0;
	size_t digits = 0;
	while (k < n && s[k] >= '0' && s[k] <= '9' && digits < 9)
		v = v * 10 + (s[k++] - '0'), digits++;
	if (!digits || n - k < sizeof tail - 1 || memcmp(s + k, tail, sizeof tail - 1))
		return 0;
	*line = v;
	*fn = s + k + sizeof tail - 1;
	*fn_n = n - (k + sizeof tail - 1);
	return 1;
}

/* Code that is a library's or Python's own, not the user's. */
static int library_path(const char *p, size_t n)
{
	static const char *const marks[] = {"site-packages/", "dist-packages/", "/lib/python",
	                                    "<frozen ", "\\Lib\\"};
	for (size_t i = 0; i < sizeof marks / sizeof *marks; i++) {
		size_t m = strlen(marks[i]);
		for (size_t j = 0; j + m <= n; j++)
			if (memcmp(p + j, marks[i], m) == 0)
				return 1;
	}
	return 0;
}

static void set_frame(ev_frame *f, const char *path, size_t path_n, const char *fn, size_t fn_n,
                      long line, const char *code, size_t code_n)
{
	copy_text(f->file, sizeof f->file, path, path_n);
	copy_text(f->function, sizeof f->function, fn, fn_n);
	copy_text(f->code, sizeof f->code, code ? code : "", code ? code_n : 0);
	f->line = line;
}

/* Reads the traceback in the lines of d[floor..at) just above the message's line (at: its
 * start), innermost frame last as Python prints it, into o->raised and o->user. */
static void read_traceback(const char *d, size_t floor, size_t at, ev_oom *o)
{
	const char *code = NULL;
	size_t code_n = 0, end = at;
	for (int lines = 0; end > floor && lines < TB_MAX_LINES; lines++) {
		size_t e = end - 1, b = e; /* d[e] is the line break before `end` */
		while (b > floor && d[b - 1] != '\n' && e - b < TB_MAX_LINE)
			b--;
		if (b > floor && d[b - 1] != '\n')
			return; /* a line too long to be a traceback's */
		const char *s = d + b, *path, *fn;
		size_t n = e - b, path_n, fn_n;
		long line;
		end = b;
		if (caret_line(s, n))
			continue;
		if (frame_line(s, n, &path, &path_n, &line, &fn, &fn_n)) {
			if (!o->raised.line)
				set_frame(&o->raised, path, path_n, fn, fn_n, line, code, code_n);
			if (!library_path(path, path_n)) {
				set_frame(&o->user, path, path_n, fn, fn_n, line, code, code_n);
				return;
			}
			code = NULL;
			continue;
		}
		if (n && s[0] == ' ' && !code) {
			code = s;
			code_n = n;
			continue;
		}
		return; /* the traceback, if any, ends here */
	}
}

/* The traceback of every message from `first` on: each one's traceback lies between the
 * line of the message before it and its own line, so the log is read once. */
static void read_tracebacks(const char *d, size_t len, ev_oom *items, size_t first, size_t count)
{
	size_t off = 0, line = 1, floor = 0;
	for (size_t i = first; i < count; i++) {
		while (line < items[i].line && off < len) {
			const char *nl = memchr(d + off, '\n', len - off);
			if (!nl)
				break;
			off = (size_t)(nl - d) + 1;
			line++;
		}
		if (line != items[i].line)
			break;
		read_traceback(d, floor, off, &items[i]);
		floor = off;
	}
}

mr_status ev_find_ooms(const char *d, size_t len, ev_oom **items, size_t *count, mr_error *err)
{
	size_t first = *count;
	ev_squeezed q = {0};
	size_t cap = *count;
	mr_status st = ev_squeeze(d, len, &q, err);
	int after_thc = 0; /* the last message found was THCudaCheck's line */
	for (size_t i = 0; st == MR_OK && i < q.n;) {
		/* a large log should not cost a record's initialisation per byte */
		if (!ev_may_start(q.s[i])) {
			i++;
			continue;
		}
		ev_oom o;
		ev_oom_init(&o);
		int found, thc;
		size_t next = ev_oom_at(&q, i, &o, &found, &thc, &st, err);
		/* 0.x: the RuntimeError after a THCudaCheck line is the same failure */
		if (found && after_thc && o.era == EV_OOM_ERA_LEGACY_RUNTIME && !thc)
			found = 0;
		if (found)
			after_thc = thc;
		if (found && st == MR_OK && MR_GROW(*items, cap, *count + 1))
			st = mr_oom(err);
		if (found && st == MR_OK) {
			(*items)[(*count)++] = o;
		} else {
			free(o.other_processes);
		}
		i = next > i ? next : i + 1;
	}
	free(q.s);
	free(q.line_at);
	if (st == MR_OK)
		read_tracebacks(d, len, *items, first, *count);
	return st;
}

uint64_t ev_oom_limit(const ev_oom *o)
{
	if (o->has_allowed && o->allowed > 0 &&
	    (!o->has_total_capacity || o->allowed <= o->total_capacity))
		return o->allowed;
	if (o->has_total_capacity)
		return o->total_capacity;
	return 0;
}

int ev_oom_without_sizes(const ev_oom *o)
{
	return o->era == EV_OOM_ERA_DRIVER_ERROR || o->era == EV_OOM_ERA_LEGACY_RUNTIME ||
	       o->era == EV_OOM_ERA_LIBRARY;
}
