/* SVG pictures of plans and pipeline time lines; see sky_svg.h. */
#include "sky_svg.h"

#include "sky_text.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* XML text or attribute value; control characters (not allowed in XML 1.0)
 * become '?' */
static void esc(sky_text *o, const char *s)
{
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;
		switch (c) {
		case '&': sky_text_put(o, "&amp;"); break;
		case '<': sky_text_put(o, "&lt;"); break;
		case '>': sky_text_put(o, "&gt;"); break;
		case '"': sky_text_put(o, "&quot;"); break;
		default: sky_text_put(o, "%c", c < 0x20 || c == 0x7f ? '?' : (char)c);
		}
	}
}

static void begin(sky_text *o, int w, int h, const char *title)
{
	sky_text_put(o,
		     "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		     "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		     "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
		     "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
		     w, h, w, h);
	if (title && *title) {
		sky_text_put(o, "<title>");
		esc(o, title);
		sky_text_put(o, "</title>\n<text x=\"10\" y=\"20\" font-size=\"15\" font-weight=\"bold\">");
		esc(o, title);
		sky_text_put(o, "</text>\n");
	}
}

/* A tick step of 1, 2 or 5 x 10^k that gives about `want` ticks over span. */
static double tick_step(double span, int want)
{
	double raw = span / (want > 0 ? want : 1), p = pow(10, floor(log10(raw)));
	double r = raw / p;
	return (r < 1.5 ? 1 : r < 3.5 ? 2 : r < 7.5 ? 5 : 10) * p;
}

/* ---- the plan ---------------------------------------------------------------- */

/* colour per stage: a fixed cycle that neighbours never share */
static const char *const k_stage_fill[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1",
					   "#76b7b2", "#edc948", "#9c755f", "#e15759"};
#define N_FILL (sizeof k_stage_fill / sizeof k_stage_fill[0])

enum { PLAN_LABEL_W = 190, PLAN_UNITS_W = 520, PLAN_TIME_W = 210, PLAN_ROW_H = 22, PLAN_TOP = 64 };

/* pale bands behind the rows, one per site, when a plan spans sites */
static const char *const k_site_band[] = {"#e8f0f8", "#fbeede", "#e7f3e5", "#f3e8f1",
					  "#e6f3f2", "#fbf6dc"};
#define N_BAND (sizeof k_site_band / sizeof k_site_band[0])
#define PLAN_SITES_DRAWN 64 /* sites beyond this share the last band */

/* x of the layer axis' start and of the time bars */
#define PLAN_X_UNITS PLAN_LABEL_W
#define PLAN_X_TIME (PLAN_LABEL_W + PLAN_UNITS_W + 10)

/* The layer axis (ux: pixels per half-layer) and the column headings. */
static void plan_axis(sky_text *o, const sky_job *j, int n_stages, double ux)
{
	/* layer axis: a tick every few layers, at the start of a layer (unit 2i) */
	double step = tick_step(j->model.layers, 8);
	if (step < 1)
		step = 1;
	for (double l = 0; l <= j->model.layers + 1e-9; l += step) {
		double x = PLAN_X_UNITS + 2 * l * ux;
		sky_text_put(o,
			     "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>"
			     "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"#666\">%g</text>\n",
			     x, PLAN_TOP - 6, x, PLAN_TOP + n_stages * PLAN_ROW_H, x, PLAN_TOP - 9, l);
	}
	sky_text_put(o, "<text x=\"%d\" y=\"%d\" fill=\"#666\">layer</text>\n", PLAN_X_UNITS - 40,
		     PLAN_TOP - 9);
	sky_text_put(o, "<text x=\"%d\" y=\"%d\" fill=\"#666\">time per micro-batch</text>\n",
		     PLAN_X_TIME + 16, PLAN_TOP - 9);
}

/* The plan's sites, in the order its stages first reach them, into
 * site_name[] (PLAN_SITES_DRAWN); returns how many. */
static int plan_site_names(const sky_fleet *f, const sky_plan *p, const char **site_name)
{
	int n_sites = 0;
	for (int k = 0; k < p->n_stages; k++) {
		const char *st = f->board[p->stage[k].board].site;
		int i = 0;
		while (i < n_sites && !sky_site_eq(site_name[i], st))
			i++;
		if (i == n_sites && n_sites < PLAN_SITES_DRAWN)
			site_name[n_sites++] = st;
	}
	return n_sites;
}

/* A band behind each row in its site's colour (w: the picture's width),
 * then a red mark on every cut between sites. Returns the cuts marked. */
static int plan_site_marks(sky_text *o, const sky_fleet *f, const sky_plan *p, int w, double ux,
			   const char *const *site_name, int n_sites)
{
	int crossings = 0;
	for (int k = 0; k < p->n_stages; k++) {
		const sky_stage *s = &p->stage[k];
		const char *st = f->board[s->board].site;
		int i = 0, y = PLAN_TOP + k * PLAN_ROW_H;
		while (i + 1 < n_sites && !sky_site_eq(site_name[i], st))
			i++;
		sky_text_put(o,
			     "<rect x=\"4\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"><title>site ",
			     y, w - 8, PLAN_ROW_H, k_site_band[(size_t)i % N_BAND]);
		esc(o, sky_site_name(st));
		sky_text_put(o, "</title></rect>\n");
	}
	for (int k = 0; k + 1 < p->n_stages; k++) {
		const sky_stage *s = &p->stage[k];
		if (sky_site_eq(f->board[s->board].site, f->board[p->stage[k + 1].board].site))
			continue;
		int y = PLAN_TOP + (k + 1) * PLAN_ROW_H;
		double x = PLAN_X_UNITS + (s->last_unit + 1) * ux;
		crossings++;
		sky_text_put(o,
			     "<g><title>cut between sites ");
		esc(o, sky_site_name(f->board[s->board].site));
		sky_text_put(o, " and ");
		esc(o, sky_site_name(f->board[p->stage[k + 1].board].site));
		sky_text_put(o,
			     ": the busiest hop carries %.1f ms of activations, %.1f ms of gradients "
			     "per micro-batch, + %.1f ms latency</title>"
			     "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#d62728\" "
			     "stroke-width=\"2\" stroke-dasharray=\"5 3\"/>"
			     "<circle cx=\"%.1f\" cy=\"%d\" r=\"4\" fill=\"#d62728\"/></g>\n",
			     s->wan_xfer_s * 1e3, s->wan_xfer_b_s * 1e3, s->wan_lat_s * 1e3, 8, y,
			     PLAN_X_UNITS + PLAN_UNITS_W, y, x, y);
	}
	return crossings;
}

/* Stage k's row: its board (and site, when the plan spans sites), its
 * half-layers on the axis, its time against the worst stage's. */
static void plan_row(sky_text *o, const sky_fleet *f, const sky_plan *p, int k, double ux,
		     double worst, int n_sites)
{
	const sky_stage *s = &p->stage[k];
	const sky_board *b = &f->board[s->board];
	int y = PLAN_TOP + k * PLAN_ROW_H;
	double x0 = PLAN_X_UNITS + s->first_unit * ux, bw = (s->last_unit - s->first_unit + 1) * ux;
	sky_text_put(o, "<g><title>");
	esc(o, b->id);
	sky_text_put(o,
		     ": half-layers %d-%d (layer %d.%c to %d.%c), fwd %.2f ms, bwd %.2f ms, send "
		     "%.2f ms per micro-batch, %d in flight, %.1f MB</title>\n",
		     s->first_unit, s->last_unit, s->first_unit / 2, s->first_unit % 2 ? 'f' : 'a',
		     s->last_unit / 2, s->last_unit % 2 ? 'f' : 'a', s->fwd_s * 1e3, s->bwd_s * 1e3,
		     s->send_s * 1e3, s->in_flight, (double)s->mem_bytes / 1e6);
	sky_text_put(o, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", PLAN_X_UNITS - 8, y + 15);
	esc(o, b->id);
	if (n_sites > 1) {
		sky_text_put(o, " @ ");
		esc(o, sky_site_name(b->site));
	}
	sky_text_put(o, "</text>\n");
	sky_text_put(o,
		     "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\" "
		     "stroke=\"white\"/>\n",
		     x0, y + 2, bw, PLAN_ROW_H - 4, k_stage_fill[k % N_FILL]);
	if (bw > 34)
		sky_text_put(o,
			     "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"white\" "
			     "font-size=\"11\">%d</text>\n",
			     x0 + bw / 2, y + 15, s->last_unit - s->first_unit + 1);
	double tw = s->time_s / worst * (PLAN_TIME_W - 70);
	int is_worst = k == p->bottleneck_stage;
	sky_text_put(o,
		     "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>"
		     "<text x=\"%.1f\" y=\"%d\" fill=\"#333\">%.1f ms%s</text>\n</g>\n",
		     PLAN_X_TIME, y + 4, tw, PLAN_ROW_H - 8, is_worst ? "#e15759" : "#bab0ac",
		     PLAN_X_TIME + tw + 4, y + 15, s->time_s * 1e3, is_worst ? " *" : "");
}

int sky_svg_plan(const sky_fleet *f, const sky_job *j, const sky_plan *p, const char *title,
		 char *buf, size_t cap)
{
	if (!f || !j || !p || !buf || p->n_stages < 1 || p->n_stages > SKY_PLAN_MAX_BOARDS ||
	    j->model.layers < 1)
		return SKY_EINVAL;
	const int units = 2 * j->model.layers;
	for (int k = 0; k < p->n_stages; k++) {
		const sky_stage *s = &p->stage[k];
		if (s->board < 0 || s->board >= f->n || s->first_unit < 0 ||
		    s->last_unit < s->first_unit || s->last_unit >= units || !isfinite(s->time_s))
			return SKY_EINVAL;
	}
	sky_text o;
	sky_text_init(&o, buf, cap);
	const int w = PLAN_LABEL_W + PLAN_UNITS_W + PLAN_TIME_W + 20;
	const int h = PLAN_TOP + p->n_stages * PLAN_ROW_H + 40;
	const double ux = (double)PLAN_UNITS_W / units;
	begin(&o, w, h, title);
	sky_text_put(&o,
		     "<text x=\"10\" y=\"40\" fill=\"#444\">%s, %d layers = %d half-layers, %d stage%s; "
		     "bottleneck %.1f ms per micro-batch (lower bound %.1f ms)</text>\n",
		     sky_algo_name(p->algo), j->model.layers, units, p->n_stages, p->n_stages == 1 ? "" : "s",
		     p->bottleneck_s * 1e3, p->lower_bound_s * 1e3);
	plan_axis(&o, j, p->n_stages, ux);
	double worst = p->bottleneck_s > 0 ? p->bottleneck_s : 1;
	/* sites: drawn only when the plan spans more than one (a plan in one
	 * site looks as it did before sites) */
	const char *site_name[PLAN_SITES_DRAWN];
	int n_sites = plan_site_names(f, p, site_name), crossings = 0;
	if (n_sites > 1)
		crossings = plan_site_marks(&o, f, p, w, ux, site_name, n_sites);
	for (int k = 0; k < p->n_stages; k++)
		plan_row(&o, f, p, k, ux, worst, n_sites);
	if (n_sites > 1)
		sky_text_put(&o,
			     "<text x=\"10\" y=\"%d\" fill=\"#666\">Numbers in bars: half-layers per "
			     "stage. * the bottleneck stage. Bands: %d sites; red dashes: %d cut%s "
			     "between sites.</text>\n</svg>\n",
			     h - 12, n_sites, crossings, crossings == 1 ? "" : "s");
	else
		sky_text_put(&o,
			     "<text x=\"10\" y=\"%d\" fill=\"#666\">Numbers in bars: half-layers per "
			     "stage. * the bottleneck stage.</text>\n</svg>\n",
			     h - 12);
	return sky_text_result(&o);
}

/* ---- the time line ------------------------------------------------------------ */

static const char *kind_fill(char k)
{
	switch (k) {
	case 'F': return "#4e79a7";
	case 'B': return "#f28e2b";
	case 'S': return "#59a14f";
	case 'W': return "#e8e8e8";
	case 'O': return "#b07aa1";
	default: return "#999999";
	}
}

enum { TL_LABEL_W = 130, TL_PLOT_W = 840, TL_ROW_H = 26, TL_TOP = 78 };

int sky_svg_timeline(const sky_svg_span *s, size_t n, int n_stages, const char *const *labels,
		     const char *title, char *buf, size_t cap)
{
	if (!buf || (n && !s) || n_stages < 1 || n_stages > SKY_PLAN_MAX_BOARDS)
		return SKY_EINVAL;
	double t0 = INFINITY, t1 = -INFINITY;
	for (size_t i = 0; i < n; i++) {
		if (s[i].stage < 0 || s[i].stage >= n_stages || !isfinite(s[i].t0_s) ||
		    !isfinite(s[i].t1_s) || s[i].t1_s < s[i].t0_s)
			return SKY_EINVAL;
		t0 = fmin(t0, s[i].t0_s), t1 = fmax(t1, s[i].t1_s);
	}
	if (!n)
		t0 = 0, t1 = 1;
	if (!(t1 > t0))
		t1 = t0 + 1e-3;
	sky_text o;
	sky_text_init(&o, buf, cap);
	const int w = TL_LABEL_W + TL_PLOT_W + 30, h = TL_TOP + n_stages * TL_ROW_H + 30;
	const double sx = TL_PLOT_W / (t1 - t0);
	begin(&o, w, h, title);
	/* legend */
	static const struct { char k; const char *what; } legend[] = {
		{'F', "forward"}, {'B', "backward"}, {'S', "send"}, {'O', "optimizer"},
		{'W', "waiting"}};
	for (size_t i = 0; i < sizeof legend / sizeof legend[0]; i++) {
		int x = 10 + (int)i * 110;
		sky_text_put(&o,
			     "<rect x=\"%d\" y=\"32\" width=\"14\" height=\"12\" fill=\"%s\" stroke=\"#aaa\"/>"
			     "<text x=\"%d\" y=\"43\">%s</text>\n",
			     x, kind_fill(legend[i].k), x + 19, legend[i].what);
	}
	/* time axis in ms from the first span */
	double span_ms = (t1 - t0) * 1e3, step = tick_step(span_ms, 10);
	for (double t = 0; t <= span_ms + 1e-9; t += step) {
		double x = TL_LABEL_W + t / 1e3 * sx;
		sky_text_put(&o,
			     "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>"
			     "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"#666\">%g</text>\n",
			     x, TL_TOP - 6, x, TL_TOP + n_stages * TL_ROW_H, x, TL_TOP - 9, t);
	}
	sky_text_put(&o, "<text x=\"%d\" y=\"%d\" fill=\"#666\" text-anchor=\"end\">ms</text>\n",
		     TL_LABEL_W - 8, TL_TOP - 9);
	for (int k = 0; k < n_stages; k++) {
		int y = TL_TOP + k * TL_ROW_H;
		sky_text_put(&o, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", TL_LABEL_W - 8, y + 17);
		if (labels && labels[k])
			esc(&o, labels[k]);
		else
			sky_text_put(&o, "stage %d", k);
		sky_text_put(&o, "</text>\n");
	}
	for (size_t i = 0; i < n; i++) {
		double x = TL_LABEL_W + (s[i].t0_s - t0) * sx, bw = (s[i].t1_s - s[i].t0_s) * sx;
		int y = TL_TOP + s[i].stage * TL_ROW_H;
		sky_text_put(&o,
			     "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\"><title>%c",
			     x, y + 3, bw > 0.3 ? bw : 0.3, TL_ROW_H - 6, kind_fill(s[i].kind),
			     s[i].kind >= 0x20 && s[i].kind < 0x7f && !strchr("&<>\"", s[i].kind) ? s[i].kind
											           : '?');
		if (s[i].mb >= 0)
			sky_text_put(&o, " mb %d", s[i].mb);
		sky_text_put(&o, ": %.2f-%.2f ms</title></rect>\n", (s[i].t0_s - t0) * 1e3,
			     (s[i].t1_s - t0) * 1e3);
	}
	sky_text_put(&o, "</svg>\n");
	return sky_text_result(&o);
}
