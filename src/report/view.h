/* view.h: the devices a report shows, chosen once: every device, or only the one --device
 * names. Every renderer, the batch index and `diff` read devices through a view instead of
 * testing the option themselves.
 *
 * Ownership: a view borrows the report (which must outlive it) and owns its device list;
 * rp_view_free releases it. */
#ifndef MR_VIEW_H
#define MR_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "analyze/analyze.h"
#include "analyze/text_devices.h"
#include "base/error.h"
#include "report/report.h"

enum { RP_VIEW_MAX_NUMBERS = 64 };

typedef struct {
	const rp_report *report;
	int device; /* -1: every device, else the one shown */
	/* With a snapshot: the analysed devices shown, in device order. */
	const an_device **devices;
	size_t device_count;
	/* Without one: the devices of the text evidence shown (see analyze/text_devices.h), and
	 * how many the evidence describes before the choice (0: it has no per-device numbers). */
	an_numbers numbers[RP_VIEW_MAX_NUMBERS];
	size_t number_count, numbers_in_evidence;
} rp_view;

/* Chooses the devices of r that `device` (-1: all) selects. On failure *v is left freed. */
mr_status rp_view_init(rp_view *v, const rp_report *r, int device, mr_error *err);
void rp_view_free(rp_view *v);

/* Whether the view shows this device. */
int rp_view_shows(const rp_view *v, int32_t device);

#endif
