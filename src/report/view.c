/* view.c: choosing the devices a report shows. */
#include "report/view.h"

#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

int rp_view_shows(const rp_view *v, int32_t device)
{
	return v->device < 0 || v->device == device;
}

mr_status rp_view_init(rp_view *v, const rp_report *r, int device, mr_error *err)
{
	memset(v, 0, sizeof *v);
	v->report = r;
	v->device = device;
	if (!r->ev.has_snapshot) {
		an_numbers all[RP_VIEW_MAX_NUMBERS];
		v->numbers_in_evidence = an_text_devices(&r->ev, all, RP_VIEW_MAX_NUMBERS);
		for (size_t i = 0; i < v->numbers_in_evidence; i++)
			if (rp_view_shows(v, all[i].device))
				v->numbers[v->number_count++] = all[i];
		return MR_OK;
	}
	v->devices = mr_alloc_array(r->an.device_count, sizeof *v->devices);
	if (!v->devices)
		return mr_oom(err);
	for (size_t i = 0; i < r->an.device_count; i++)
		if (rp_view_shows(v, r->an.devices[i].device))
			v->devices[v->device_count++] = &r->an.devices[i];
	return MR_OK;
}

void rp_view_free(rp_view *v)
{
	free(v->devices);
	memset(v, 0, sizeof *v);
}
