/* BERT's tokenizer: the ids Hugging Face's `tokenizers` library gives.
 *
 * A tokenizer is a WordPiece vocabulary plus BERT's normalisation flags,
 * read from a Hugging Face model directory: vocab.txt with
 * tokenizer_config.json (do_lower_case, strip_accents,
 * tokenize_chinese_chars), or tokenizer.json whose model is WordPiece (its
 * BertNormalizer and BertPreTokenizer). The vocabulary is loaded once into
 * one block (a hash table of token -> id and the token strings); encoding
 * allocates nothing and writes into caller memory.
 *
 * Encoding a text, as HF's BertNormalizer, BertPreTokenizer, WordPiece and
 * BertProcessing do it (tokenizers src/normalizers/bert.rs,
 * src/pre_tokenizers/bert.rs, src/models/wordpiece/mod.rs):
 *   1. special tokens written in the text ("[MASK]") are matched first, on
 *      the raw text, and give their ids;
 *   2. clean_text: NUL, U+FFFD and control characters (categories Cc, Cf,
 *      Co; tab, newline and carriage return excepted) are removed, every
 *      whitespace character becomes a space;
 *   3. tokenize_chinese_chars: each CJK ideograph becomes a word of its own;
 *   4. strip_accents (by default: as lowercase): NFD, then nonspacing marks
 *      (Mn) are removed; lowercase: each character's full lower-case
 *      mapping;
 *   5. words are split at whitespace, and each punctuation character
 *      (ASCII symbols !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~ and categories P*)
 *      is a word of its own;
 *   6. WordPiece: greedy longest match from the left, continuation pieces
 *      carry the "##" prefix; a word longer than max_input_chars_per_word
 *      (100) characters, or one that no pieces cover, is [UNK];
 *   7. [CLS] a [SEP] (b [SEP]), token type 0 for a and its [SEP], 1 for b
 *      and its [SEP]; truncation longest-first to the length asked (each
 *      text read, as HF reads it, up to the first word that ends at or past
 *      that length); padding with [PAD], type 0, attention mask 0.
 * Unicode categories, NFD and case come from utf8proc. HF's category tables
 * are those of Unicode 8.0 (crate unicode_categories) while utf8proc's are
 * newer: the few characters assigned since 8.0 that are punctuation, format
 * controls or nonspacing marks are treated as HF treats them (ordinary
 * characters), from a table tools/golden/tokenizer_golden.js checks against
 * HF itself (docs/data.md). */
#ifndef SKY_TOKENIZER_H
#define SKY_TOKENIZER_H

#include "sky_err.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_TOK_MAX_VOCAB (1u << 21)      /* tokens; BERT vocabularies hold 30k-120k */
#define SKY_TOK_MAX_TOKEN_BYTES 512u      /* one token; a word past 100 chars is [UNK] */
#define SKY_TOK_MAX_FILE_BYTES (64u << 20) /* vocab.txt or tokenizer.json */
#define SKY_TOK_MAX_WORD_CHARS 100        /* HF's max_input_chars_per_word default */
#define SKY_TOK_MAX_PREFIX 16             /* bytes of the continuation prefix ("##") */

/* The normalisation flags (HF BertNormalizer's names in comments). */
typedef struct sky_tok_flags {
	int clean_text;    /* clean_text: drop controls, whitespace to spaces (default 1) */
	int chinese_chars; /* handle_chinese_chars / tokenize_chinese_chars (default 1) */
	int strip_accents; /* strip_accents: 1, 0, or -1 for "as lowercase" (default -1) */
	int lowercase;     /* lowercase / do_lower_case (default 1) */
} sky_tok_flags;

/* Sets the defaults BertTokenizerFast uses: clean, chinese, strip as
 * lowercase, lowercase. */
void sky_tok_flags_default(sky_tok_flags *f);

#define SKY_TOK_MAX_SPECIAL 8

typedef struct sky_tokenizer {
	unsigned char *block; /* the one allocation: everything below points into it */
	size_t block_bytes;
	uint32_t n;          /* tokens; ids are 0..n-1 */
	uint32_t *tok_off;   /* (n + 1) byte offsets of token i in text; i ends at i + 1 */
	uint32_t *slots;     /* (cap) hash table: id + 1, 0 when empty */
	uint32_t *slot_hash; /* (cap) the full hash of the slot's token */
	uint32_t cap_mask;   /* cap - 1, cap a power of two >= 2n */
	const char *text;    /* every token's bytes, each followed by a NUL */
	uint32_t max_token_bytes;
	sky_tok_flags flags; /* strip_accents resolved to 0 or 1 */
	int max_word_chars;
	char prefix[SKY_TOK_MAX_PREFIX + 1]; /* continuing_subword_prefix */
	uint32_t prefix_len;
	int32_t id_pad, id_unk, id_cls, id_sep, id_mask; /* id_mask -1 when absent */
	int n_special;                                    /* matched in raw text */
	int32_t special[SKY_TOK_MAX_SPECIAL];
	uint32_t hash; /* FNV-1a over the flags and the vocabulary: which tokenizer */
} sky_tokenizer;

/* Zeroes t; cannot fail. */
void sky_tok_init(sky_tokenizer *t);
/* Releases the block; NULL-safe, may be called twice. */
void sky_tok_free(sky_tokenizer *t);

/* Loads a vocab.txt held in text[0..len): one token per line, id = line
 * number - 1, "\n" or "\r\n" line ends, a last line without an end allowed.
 * Refused (SKY_EFORMAT, d names the line): invalid UTF-8, an empty line, a
 * token longer than SKY_TOK_MAX_TOKEN_BYTES, a token seen twice (both line
 * numbers); SKY_ERANGE for more than SKY_TOK_MAX_VOCAB tokens or a file
 * over SKY_TOK_MAX_FILE_BYTES; SKY_ENOTFOUND if [PAD], [UNK], [CLS] or
 * [SEP] is missing; SKY_ENOMEM if the block cannot be had. */
int sky_tok_load_vocab(sky_tokenizer *t, const char *text, size_t len, const sky_tok_flags *f,
		       sky_diag *d);
/* Loads a tokenizer.json held in json[0..len): model.type "WordPiece"
 * (vocab, unk_token, continuing_subword_prefix, max_input_chars_per_word),
 * normalizer "BertNormalizer" (or null: no normalisation), pre_tokenizer
 * "BertPreTokenizer"; added_tokens marked special are matched in raw
 * text. Another model, normalizer or pre-tokenizer is refused naming it
 * (SKY_EUNSUPPORTED); the vocabulary's rules as sky_tok_load_vocab (ids
 * must be 0..n-1, each once). */
int sky_tok_load_json(sky_tokenizer *t, const char *json, size_t len, sky_diag *d);
/* Loads a Hugging Face directory: tokenizer.json if present, else
 * vocab.txt with tokenizer_config.json's flags (defaults when it is
 * absent). SKY_ENOTFOUND names the files looked for. */
int sky_tok_load_dir(sky_tokenizer *t, const char *dir, sky_diag *d);

/* The id of token s[0..len), or -1. */
int32_t sky_tok_find(const sky_tokenizer *t, const char *s, size_t len);
/* Token id's text (NUL-terminated), or NULL when id is out of range. */
const char *sky_tok_token(const sky_tokenizer *t, int32_t id);

/* One encoded sequence, in caller memory of cap entries each. */
typedef struct sky_tok_enc {
	int32_t *ids;      /* (cap) */
	int32_t *type_ids; /* (cap) */
	int32_t *mask;     /* (cap) attention mask: 1 for tokens, 0 for padding */
	int cap;           /* truncate to this many tokens, specials included */
	int pad;           /* 1: pad to cap; 0: stop at len */
	int len;           /* out: tokens before padding */
	int n_a, n_b;      /* out: word pieces of a and b before truncation, counted
			    * (as HF counts them) up to the first word ending at or
			    * past cap pieces */
} sky_tok_enc;

/* Encodes text a (and b, when b is not NULL) into e: [CLS] a [SEP] (b
 * [SEP]), truncated longest-first to e->cap, padded if e->pad. Allocates
 * nothing. Returns 0; SKY_EFORMAT with d naming the byte offset (and which
 * text) for invalid UTF-8; SKY_EINVAL if e->cap is below the special
 * tokens' count (2, or 3 for a pair). */
int sky_tok_encode(const sky_tokenizer *t, const char *a, size_t alen, const char *b, size_t blen,
		   sky_tok_enc *e, sky_diag *d);

/* Tokens one text gives (word pieces, no specials, no truncation): for
 * counting and benchmarks. Returns the count (>= 0) or SKY_EFORMAT as
 * sky_tok_encode. */
long sky_tok_count(const sky_tokenizer *t, const char *s, size_t len, sky_diag *d);

/* BERT's basic tokenizer alone (steps 2-5 under flags f, no vocabulary):
 * calls on_word with each word in UTF-8, or with wlen 0 for a word longer
 * than 100 characters. For building vocabularies. Returns 0 or SKY_EFORMAT
 * (invalid UTF-8, d names the byte offset). */
int sky_tok_basic(const sky_tok_flags *f, const char *s, size_t len,
		  void (*on_word)(void *ctx, const char *w, size_t wlen), void *ctx, sky_diag *d);

#endif
