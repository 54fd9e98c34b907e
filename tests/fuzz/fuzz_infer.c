/* libFuzzer harness: an inference request as a first stage receives it,
 * and a response as a client receives it. An accepted request must
 * re-encode and decode to the same tokens and mask; an accepted response
 * must round-trip with the same logits, bit for bit. A refusal must carry
 * one of the contract's codes. */
#include "sky_infermsg.h"
#include "sky_json.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SEQ 32
#define VOCAB 1000

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int32_t tok[SEQ], mask[SEQ], tok2[SEQ], mask2[SEQ];
	static char buf[SKY_INFER_RESP_MAX_BYTES];
	static sky_infer_resp r, back;
	sky_infer_req q = {.tokens = tok, .mask = mask, .cap = SEQ};
	sky_diag d;
	int code = -1;
	sky_diag_clear(&d);
	int rc = sky_infer_req_decode((const char *)data, size, SEQ, VOCAB, &q, &code, &d);
	if (rc == 0) {
		sky_infer_req q2 = {.tokens = tok2, .mask = mask2, .cap = SEQ};
		q.has_mask = 1;
		int n = sky_infer_req_encode(&q, buf, sizeof buf, &d);
		if (n <= 0 || code != SKY_INFER_OK ||
		    sky_infer_req_decode(buf, (size_t)n, SEQ, VOCAB, &q2, &code, &d) != 0 ||
		    q2.n != q.n || memcmp(tok, tok2, sizeof(int32_t) * (size_t)q.n) != 0 ||
		    memcmp(mask, mask2, sizeof(int32_t) * (size_t)q.n) != 0 || strcmp(q.id, q2.id))
			abort();
	} else if (code <= SKY_INFER_OK || code >= SKY_INFER_NCODES || !d.msg[0]) {
		abort();
	}
	if (sky_infer_resp_decode((const char *)data, size, &r, &d) == 0) {
		int n = sky_infer_resp_encode(&r, buf, sizeof buf, &d);
		if (n <= 0 || sky_infer_resp_decode(buf, (size_t)n, &back, &d) != 0 ||
		    back.ok != r.ok || back.n_logits != r.n_logits ||
		    memcmp(back.logits, r.logits, sizeof(float) * (size_t)r.n_logits) != 0)
			abort();
	}
	if (sky_json_pool_used() != 0)
		abort();
	return 0;
}
