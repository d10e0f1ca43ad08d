/* advise.c: findings and ranked recommendations. */
#include "advise.h"

#include <stdlib.h>
#include <string.h>

#include "report.h"

const char *ad_cause_name(ad_cause c)
{
	switch (c) {
	case AD_CAUSE_FRAGMENTATION:
		return "fragmentation";
	case AD_CAUSE_CAPACITY:
		return "capacity";
	case AD_CAUSE_OTHER_PROCESSES:
		return "other_processes";
	default:
		return "unknown";
	}
}

const char *ad_severity_name(ad_severity s)
{
	return s == AD_CRITICAL ? "critical" : s == AD_WARNING ? "warning" : "info";
}

const char *ad_category_name(int cat)
{
	static const char *const names[AD_CAT_COUNT] = {"parameters", "gradients", "optimizer_state",
							"activations", "other"};
	return cat >= 0 && cat < AD_CAT_COUNT ? names[cat] : "other";
}

void ad_free(ad_advice *a)
{
	free(a->verdict);
	for (size_t i = 0; i < a->finding_count; i++)
		free(a->findings[i].message);
	free(a->findings);
	for (size_t i = 0; i < a->rec_count; i++) {
		free(a->recs[i].title);
		free(a->recs[i].reason);
		free(a->recs[i].change);
	}
	free(a->recs);
	memset(a, 0, sizeof *a);
}

mr_status ad_advise(const rp_run *run, ad_advice *out, mr_error *err)
{
	memset(out, 0, sizeof *out);
	(void)run;
	out->verdict = mr_strndup("", 0);
	return out->verdict ? MR_OK : mr_oom(err);
}
