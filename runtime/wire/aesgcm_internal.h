/* AES-256-GCM on the CPU's AES and carry-less multiply instructions (x86
 * AES-NI + PCLMULQDQ, Armv8 AESE/AESMC + PMULL), for sealed tensor frames
 * (frameseal.c only; no public header includes this).
 *
 * Why: Mbed TLS 2.28's GCM runs one 16-byte block at a time (one AES-NI
 * call and one carry-less multiply with a full reduction per block), about
 * 180 MB/s on the machine this was written on; frames are megabytes. This
 * path runs eight AES blocks in flight and folds four GHASH blocks per
 * reduction. It uses the round keys Mbed TLS expanded
 * (mbedtls_aes_setkey_enc) and produces exactly Mbed TLS's output: Mbed
 * TLS's mbedtls_gcm_* is the reference, and tests/wire/test_frameseal.c
 * compares the two byte for byte (ciphertext and tag) over many lengths.
 * Without the instructions (a Raspberry Pi 4's Cortex-A72 has no Crypto
 * Extension) or with SKY_CPU_DISABLE=aesgcm, sky_aesgcm_init() returns 0
 * and frames go through Mbed TLS.
 *
 * The nonce is 96 bits (J0 = nonce | 0x00000001, NIST SP 800-38D §7.1). */
#ifndef SKY_AESGCM_INTERNAL_H
#define SKY_AESGCM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* Key schedule (15 round keys) and H^1..H^4, 16-byte aligned. */
#define SKY_AESGCM_KEY_BYTES (15 * 16 + 4 * 16)

/* One seal or open in progress (on the caller's stack). */
typedef struct sky_aesgcm_op {
	_Alignas(16) unsigned char y[16]; /* GHASH accumulator (byte-reversed) */
	_Alignas(16) unsigned char j0[16]; /* nonce | counter 1: masks the tag */
	uint32_t ctr;                     /* next counter value */
	uint64_t aad_bytes, text_bytes;
} sky_aesgcm_op;

/* Fills ks (SKY_AESGCM_KEY_BYTES, 16-byte aligned) for the 32-byte key
 * and returns 1 if this CPU has the instructions (sky_cpu_features.aesgcm),
 * else 0 (ks untouched). */
int sky_aesgcm_init(unsigned char *ks, const unsigned char key[32]);
/* Starts an operation: nonce (12 bytes), then the whole associated data. */
void sky_aesgcm_start(const unsigned char *ks, sky_aesgcm_op *op, const unsigned char nonce[12],
		      const unsigned char *aad, size_t aad_len);
/* Encrypts (decrypt 0) or decrypts (1) in[0..n) into out. Every call but
 * the last of an operation must pass a multiple of 16 bytes. in == out is
 * allowed; other overlap is not. */
void sky_aesgcm_update(const unsigned char *ks, sky_aesgcm_op *op, int decrypt,
		       const unsigned char *in, unsigned char *out, size_t n);
/* The 16-byte tag of everything so far. */
void sky_aesgcm_finish(const unsigned char *ks, sky_aesgcm_op *op, unsigned char tag[16]);

#endif
