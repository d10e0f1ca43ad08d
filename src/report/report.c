/* report.c: the pipeline. */
#include "report/report.h"

#include <stdlib.h>
#include <string.h>

#include "advise/replay.h"
#include "advise/rules.h"

mr_status rp_build(rp_report *out, ld_evidence *ev, const rp_params *params, mr_error *err)
{
	mr_status st = MR_OK;
	memset(out, 0, sizeof *out);
	out->ev = *ev; /* the analysis points into out->ev.snap: it is moved first */
	memset(ev, 0, sizeof *ev);
	if (out->ev.has_snapshot &&
	    ((st = an_analyze(&out->ev.snap, 0, &out->an, err)) ||
	     (st = ad_replay_recorded(&out->ev, &out->an, &out->recorded, err))))
		goto done;
	if ((st = ad_advise(&out->ev, &out->an, params->device, params->budget, &out->advice, err)))
		goto done;
	st = ad_replay_settings(&out->ev, &out->an, out->recorded, &out->advice, err);
done:
	if (st)
		rp_free(out);
	return st;
}

void rp_free(rp_report *r)
{
	ad_free(&r->advice);
	free(r->recorded);
	an_free(&r->an);
	ld_free(&r->ev);
	memset(r, 0, sizeof *r);
}
