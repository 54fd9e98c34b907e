/* Named tensors inside a flat parameter block.
 *
 * Every block with parameters (an encoder layer, the embeddings, the head)
 * keeps them in one flat float array, so gradients, optimizer state and
 * file I/O treat a block as one vector. A table of sky_tensor_info says
 * which part of the vector is which HuggingFace tensor. */
#ifndef SKY_TENSOR_H
#define SKY_TENSOR_H

#include <stddef.h>

typedef struct sky_tensor_info {
	const char *name; /* HuggingFace name within the block, e.g. "attention.self.query.weight" */
	int ndim;         /* 1 or 2 */
	int shape[2];     /* torch order: (out, in) for a Linear weight */
	size_t offset;    /* in floats from the block start */
	size_t count;     /* shape[0] * (ndim == 2 ? shape[1] : 1) */
} sky_tensor_info;

/* One row of a block's layout, as a block lists its tensors. */
typedef struct sky_tensor_spec {
	const char *name;
	int rows, cols; /* cols 0: a vector of rows floats */
} sky_tensor_spec;

/* Fills out[0..n) from spec: the tensors laid end to end from offset 0, in
 * spec order. Returns n (cannot fail). */
int sky_tensor_table(const sky_tensor_spec *spec, int n, sky_tensor_info *out);

#endif
