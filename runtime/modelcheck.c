#include "sky_modelcheck.h"

#include "sky_quant_model.h"
#include "sky_safetensors.h"

#include <string.h>

int sky_modelcheck_int8(const char *path, const sky_model_cfg *cfg, sky_diag *d)
{
	sky_st_file f;
	sky_qmodel m;
	int rc, prec = 0, layers = 0;
	sky_st_init(&f);
	memset(&m, 0, sizeof m);
	if ((rc = sky_st_open(&f, path, d)) != 0 || (rc = sky_qmodel_probe(&f, &prec, &layers, d)))
		goto exit;
	if (prec != SKY_PREC_INT8) {
		rc = sky_diag_set(d, SKY_EFORMAT, "the model has fp32 layers; serving takes an int8 "
				  "model (sky quantize)");
		goto exit;
	}
	if (layers != cfg->layers) {
		rc = sky_diag_set(d, SKY_EINVAL, "the model has %d layers, the job %d", layers,
				  cfg->layers);
		goto exit;
	}
	/* every tensor's dtype and shape, as serving will load it */
	rc = sky_qmodel_open(&m, &f, cfg, d);
exit:
	sky_qmodel_close(&m);
	sky_st_close(&f);
	return rc;
}
