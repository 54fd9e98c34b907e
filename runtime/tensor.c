/* Named-tensor tables for flat parameter blocks (see sky_tensor.h). */
#include "sky_tensor.h"

int sky_tensor_table(const sky_tensor_spec *spec, int n, sky_tensor_info *out)
{
	size_t off = 0;
	for (int i = 0; i < n; i++) {
		out[i].name = spec[i].name;
		out[i].ndim = spec[i].cols ? 2 : 1;
		out[i].shape[0] = spec[i].rows;
		out[i].shape[1] = spec[i].cols;
		out[i].offset = off;
		out[i].count = (size_t)spec[i].rows * (spec[i].cols ? (size_t)spec[i].cols : 1);
		off += out[i].count;
	}
	return n;
}
