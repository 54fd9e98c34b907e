/* Rows of a labelled text file: TSV, CSV or JSON Lines, read into (text,
 * pair, label) with the line each row starts on, for sky data prepare.
 *
 *   TSV    one record a line, fields split at tabs, no quoting (GLUE's
 *          files are written that way and read with quoting off: a quote is
 *          an ordinary character). "\n" or "\r\n" line ends.
 *   CSV    RFC 4180 through libcsv (Debian's libcsv-dev) in strict mode:
 *          quoted fields may hold commas, doubled quotes and line ends; a
 *          quote inside an unquoted field, text after a closing quote or a
 *          quote never closed is a bad row. Spaces are kept (not trimmed).
 *   JSONL  one JSON object a line (cJSON, bounded pool), or an array
 *          (columns by index); text and pair must be strings, a label a
 *          string or a whole number.
 * Blank lines between records are skipped; a UTF-8 byte order mark at the
 * start is dropped. Line numbers count from 1 (a header is line 1).
 *
 * Columns: TSV and CSV have a header line unless told otherwise; a column
 * is named by its header or by a 0-based index. Without names given the
 * header decides, as GLUE's layouts (GLUE's own TSV files) name them:
 *   SST-2  sentence, label               QNLI  question, sentence, label
 *   RTE    sentence1, sentence2, label   MRPC  #1 String, #2 String, Quality
 *   MNLI   sentence1, sentence2, gold_label
 *   CoLA   no header: 4 columns (source, label, original mark, sentence),
 *          found by its shape (field 1 is 0 or 1) when no header is named
 * and otherwise text / sentence (pair text_pair) for the text and label.
 * JSON Lines take names from the first object's keys the same way.
 *
 * JSON Lines are parsed in the bounded JSON pool (sky_json.h), which comes
 * back only when no document is alive: a caller holding a JSON document
 * of its own while reading a long file would see lines refused as "not
 * JSON" once the pool is spent, so it builds its documents after.
 *
 * A bad row (the wrong number of columns, a CSV quoting error, a line that
 * is not a JSON object, a missing or mistyped field) reaches the callback
 * with its reason; a problem with the file as a whole (a named column that
 * the header does not have, no text column) stops reading with an error. */
#ifndef SKY_DATAROWS_H
#define SKY_DATAROWS_H

#include "sky_err.h"

#include <stddef.h>

#define SKY_ROWS_MAX_COLS 4096        /* fields of one record */
#define SKY_ROWS_MAX_RECORD (4u << 20) /* bytes of one record (CSV, JSONL) */
#define SKY_ROWS_NAME_CAP 64          /* bytes of a column name we report */

typedef enum { SKY_ROWS_TSV, SKY_ROWS_CSV, SKY_ROWS_JSONL } sky_rows_format;

/* The format from a file name's extension (.tsv, .csv, .jsonl / .json /
 * .ndjson). Returns 0 or SKY_EINVAL. */
int sky_rows_format_of(const char *path, sky_rows_format *out);
/* "tsv", "csv", "jsonl". */
const char *sky_rows_format_name(sky_rows_format f);

typedef struct sky_rows_opts {
	sky_rows_format format;
	int header;            /* TSV/CSV: 1 a header line, 0 none, -1 auto (CoLA's shape: none) */
	const char *text_col;  /* a name or a 0-based index; NULL: from the layout */
	const char *pair_col;  /* NULL: from the layout (often none); "" none */
	const char *label_col; /* NULL: from the layout; "" none */
} sky_rows_opts;

/* Zeroes o and sets header -1 (format TSV). */
void sky_rows_opts_default(sky_rows_opts *o);

/* What the file's header (or shape) decided. */
typedef struct sky_rows_layout {
	const char *name;    /* "sst2", "cola", "mrpc", "qnli", "rte", "mnli", or "columns" */
	int header;          /* 1 when line 1 was a header */
	int ncols;           /* TSV/CSV: the columns every record must have */
	int text_i, pair_i, label_i;                  /* 0-based; -1 none (JSONL by name: -1) */
	char text[SKY_ROWS_NAME_CAP], pair[SKY_ROWS_NAME_CAP], label[SKY_ROWS_NAME_CAP];
} sky_rows_layout;

/* One row, valid during the callback only. */
typedef struct sky_row {
	long line;            /* where the record starts */
	size_t end;           /* bytes of the input read so far (progress) */
	const char *bad;      /* non-NULL: why this row is bad (the fields are unset) */
	const char *text;
	size_t text_len;
	const char *pair;     /* NULL without a pair column */
	size_t pair_len;
	const char *label;    /* NULL without a label column */
	size_t label_len;
	int label_number;     /* 1: the label was a JSON number (label holds its digits) */
} sky_row;

/* Called for each row; a non-zero return stops reading and is returned by
 * sky_rows_read. */
typedef int (*sky_row_fn)(void *ctx, const sky_row *r);

/* Reads buf[0..len) as o says, calling fn for every record after the
 * header. *layout (may be NULL) gets the columns used. Returns 0, fn's
 * non-zero value, SKY_ENOTFOUND (a named column is not in the header, or no
 * text column: d names it and lists the header), SKY_ERANGE (an index past
 * the last column), SKY_EFORMAT (no records, or a header that is not UTF-8)
 * or SKY_ENOMEM. Allocates (libcsv's buffer, a record's fields) only
 * while it runs. */
int sky_rows_read(const char *buf, size_t len, const sky_rows_opts *o, sky_row_fn fn, void *ctx,
		  sky_rows_layout *layout, sky_diag *d);

#endif
