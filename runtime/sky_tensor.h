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

#endif
