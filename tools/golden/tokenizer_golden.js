#!/usr/bin/env node
// Golden token ids from Hugging Face's own tokenizer (the `tokenizers`
// package of the npm registry, Rust underneath) for Sky's tokenizer test
// (tests/runtime/test_tokenizer.c). Not run by make check; run it after
// changing the corpus or a vocabulary, and commit what it writes:
//
//   npm install --prefix build/node tokenizers      (once; not committed)
//   node tools/golden/tokenizer_golden.js           (golden ids)
//   node tools/golden/tokenizer_golden.js --hf8     (runtime/tokenizer_hf8.h)
//
// Golden ids: for each vocabulary under tests/data/tokenizer/ (uncased/,
// cased/, lower-accents/: vocab.txt and tokenizer_config.json), the tokenizer.json that
// BertTokenizerFast makes of it is written beside it (json-uncased/,
// json-cased/), and every line of tests/data/tokenizer/corpus.txt is encoded
// as a single sentence (no truncation; and truncated and padded to 16), and
// each line with the next as a pair (truncated and padded to 24 and to 9).
// One JSON object per encoding into golden_<vocab>.jsonl:
//   {"line":N,"pair":M|null,"seq":S (0: none),"ids":[..],"type_ids":[..],"mask":[..]}
// and golden_truncation.jsonl: what longest-first truncation keeps of every
// pair of lengths (see truncationGrid).
//
// --hf8: HF's BERT normalizer and pre-tokenizer classify characters with
// the Unicode 8.0 tables of the unicode_categories crate, Sky with
// utf8proc's newer ones. This asks HF itself, character by character, what
// it makes of every code point (punctuation, removed as a control, removed
// as a nonspacing mark, or ordinary) and writes the ranges where that
// differs from the current Unicode categories (node's own tables).
'use strict';
const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..', '..');
// The tokenizers package: $SKY_TOKENIZERS, build/node/ of this checkout,
// or node's own search path; null when none loads.
function loadTokenizers() {
	const tries = [process.env.SKY_TOKENIZERS, path.join(root, 'build/node/node_modules/tokenizers'),
		'tokenizers'].filter(Boolean);
	for (const t of tries) {
		try {
			const m = require(t);
			let version = '?';
			try {
				version = require(path.join(path.dirname(require.resolve(t)), 'package.json')).version;
			} catch (e) { /* unknown */ }
			m.skyVersion = version;
			return m;
		} catch (e) { /* next */ }
	}
	return null;
}
let tk = null;

const SPECIAL = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'];

// What BertTokenizerFast saves as tokenizer.json for a vocab.txt and its flags.
function bertTokenizerJson(vocabTxt, cfg) {
	const lines = vocabTxt.split('\n');
	if (lines[lines.length - 1] === '') lines.pop();
	const vocab = {};
	lines.forEach((t, i) => { vocab[t.replace(/\r$/, '')] = i; });
	const lower = cfg.do_lower_case !== undefined ? cfg.do_lower_case : true;
	const strip = cfg.strip_accents !== undefined ? cfg.strip_accents : null;
	const cjk = cfg.tokenize_chinese_chars !== undefined ? cfg.tokenize_chinese_chars : true;
	const cls = vocab['[CLS]'], sep = vocab['[SEP]'];
	return {
		version: '1.0',
		truncation: null,
		padding: null,
		added_tokens: SPECIAL.filter((t) => t in vocab).map((t) => ({
			id: vocab[t], content: t, single_word: false, lstrip: false, rstrip: false,
			normalized: false, special: true,
		})),
		normalizer: {
			type: 'BertNormalizer', clean_text: true, handle_chinese_chars: cjk,
			strip_accents: strip, lowercase: lower,
		},
		pre_tokenizer: { type: 'BertPreTokenizer' },
		post_processor: {
			type: 'TemplateProcessing',
			single: [{ SpecialToken: { id: '[CLS]', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
				{ SpecialToken: { id: '[SEP]', type_id: 0 } }],
			pair: [{ SpecialToken: { id: '[CLS]', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
				{ SpecialToken: { id: '[SEP]', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } },
				{ SpecialToken: { id: '[SEP]', type_id: 1 } }],
			special_tokens: {
				'[CLS]': { id: '[CLS]', ids: [cls], tokens: ['[CLS]'] },
				'[SEP]': { id: '[SEP]', ids: [sep], tokens: ['[SEP]'] },
			},
		},
		decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
		model: {
			type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##',
			max_input_chars_per_word: 100, vocab,
		},
	};
}

async function golden() {
	const dir = path.join(root, 'tests/data/tokenizer');
	const corpus = fs.readFileSync(path.join(dir, 'corpus.txt'), 'utf8').split('\n');
	if (corpus[corpus.length - 1] === '') corpus.pop();
	for (const name of ['uncased', 'cased', 'lower-accents']) {
		const vocabTxt = fs.readFileSync(path.join(dir, name, 'vocab.txt'), 'utf8');
		const cfg = JSON.parse(fs.readFileSync(path.join(dir, name, 'tokenizer_config.json'), 'utf8'));
		const json = bertTokenizerJson(vocabTxt, cfg);
		fs.mkdirSync(path.join(dir, 'json-' + name), { recursive: true });
		fs.writeFileSync(path.join(dir, 'json-' + name, 'tokenizer.json'), JSON.stringify(json) + '\n');
		const plain = tk.Tokenizer.fromString(JSON.stringify(json));
		const trunc = {};
		for (const seq of [16, 24, 9]) {
			const t = tk.Tokenizer.fromString(JSON.stringify(json));
			t.setTruncation(seq, { strategy: 'LongestFirst' });
			t.setPadding({ padId: json.model.vocab['[PAD]'], padToken: '[PAD]', maxLength: seq });
			trunc[seq] = t;
		}
		const out = [];
		const emit = (line, pair, seq, e) => out.push(JSON.stringify({
			line, pair, seq, ids: e.getIds(), type_ids: e.getTypeIds(), mask: e.getAttentionMask(),
		}));
		for (let i = 0; i < corpus.length; i++) {
			emit(i + 1, null, 0, await plain.encode(corpus[i]));
			emit(i + 1, null, 16, await trunc[16].encode(corpus[i]));
			const j = (i + 1) % corpus.length;
			emit(i + 1, j + 1, 24, await trunc[24].encode(corpus[i], corpus[j]));
			emit(i + 1, j + 1, 9, await trunc[9].encode(corpus[i], corpus[j]));
		}
		fs.writeFileSync(path.join(dir, 'golden_' + name + '.jsonl'), out.join('\n') + '\n');
		console.log(`tokenizer_golden: ${out.length} encodings of ${corpus.length} lines with ` +
			`${name}/vocab.txt (${Object.keys(json.model.vocab).length} tokens)`);
	}
	await truncationGrid(dir);
}

// Longest-first truncation on every pair of lengths 0..2L+2 for a few L:
// text a is na pieces, b nb pieces, either as that many one-piece words
// ("a a a") or as one word of that many pieces ("aaa" = a ##a ##a), with
// the vocabulary TRUNC_VOCAB (test_tokenizer.c builds the same). One line
// per (L, words): {"seq":L,"words":1|0,"max":M,"kept":[[a,b] for na, nb]}.
const TRUNC_VOCAB = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', 'a', 'b', '##a', '##b'];
async function truncationGrid(dir) {
	const vocab = {};
	TRUNC_VOCAB.forEach((t, i) => { vocab[t] = i; });
	const json = bertTokenizerJson(TRUNC_VOCAB.join('\n') + '\n', {});
	const out = [];
	for (const seq of [6, 9, 10, 24]) {
		const t = tk.Tokenizer.fromString(JSON.stringify(json));
		t.setTruncation(seq, { strategy: 'LongestFirst' });
		for (const words of [1, 0]) {
			const mk = (n, c) => (words ? Array(n).fill(c).join(' ') : c.repeat(n));
			const max = 2 * seq + 2, kept = [];
			for (let na = 0; na <= max; na++) {
				for (let nb = 0; nb <= max; nb++) {
					const ids = (await t.encode(mk(na, 'a'), mk(nb, 'b'))).getIds();
					kept.push([ids.filter((x) => x === 4 || x === 6).length,
						ids.filter((x) => x === 5 || x === 7).length]);
				}
			}
			out.push(JSON.stringify({ seq, words, max, kept }));
		}
	}
	fs.writeFileSync(path.join(dir, 'golden_truncation.jsonl'), out.join('\n') + '\n');
	console.log(`tokenizer_golden: truncation of ${out.length} length grids`);
}

// --hf8: what HF does with each code point, against the current categories.
function hf8() {
	const K = { ORD: 0, PUNCT: 1, CTRL: 2, MN: 3 };
	const clean = tk.bertNormalizer({ cleanText: true, handleChineseChars: false, stripAccents: false,
		lowercase: false });
	const strip = tk.bertNormalizer({ cleanText: false, handleChineseChars: false, stripAccents: true,
		lowercase: false });
	const pre = tk.bertPreTokenizer();
	const reP = /[\p{P}]/u, reC = /[\p{Cc}\p{Cf}\p{Co}]/u, reMn = /\p{Mn}/u, reWs = /\p{White_Space}/u;
	const ascii = /[!-/:-@[-`{-~]/;
	const rows = [];
	for (let c = 0x80; c <= 0x10ffff; c++) {
		if (c >= 0xd800 && c <= 0xdfff) continue;
		const s = String.fromCodePoint(c);
		if (reWs.test(s)) continue; // Rust's char::is_whitespace is current
		const now = reP.test(s) || ascii.test(s) ? K.PUNCT : reC.test(s) ? K.CTRL : reMn.test(s) ? K.MN : K.ORD;
		let hf = K.ORD;
		if (clean.normalizeString('a' + s + 'b') === 'ab') hf = K.CTRL;
		else if (pre.preTokenizeString('a' + s + 'b').length === 3) hf = K.PUNCT;
		else if (s.normalize('NFD') === s && strip.normalizeString('a' + s + 'b') === 'ab') hf = K.MN;
		else if (s.normalize('NFD') !== s) hf = now === K.MN ? K.MN : hf; // decomposes: keep
		if (hf !== now) rows.push([c, hf]);
	}
	// ranges of consecutive code points with the same kind
	const ranges = [];
	for (const [c, k] of rows) {
		const last = ranges[ranges.length - 1];
		if (last && last[1] === c - 1 && last[2] === k) last[1] = c;
		else ranges.push([c, c, k]);
	}
	const names = ['K_ORD', 'K_PUNCT', 'K_CTRL', 'K_MN'];
	const hex = (x) => '0x' + x.toString(16).toUpperCase();
	let h = '/* Generated by tools/golden/tokenizer_golden.js --hf8 (tokenizers ' +
		tk.skyVersion +
		', node Unicode ' + process.versions.unicode + '); do not edit.\n' +
		' *\n' +
		' * Code points where Hugging Face\'s BERT normalizer and pre-tokenizer\n' +
		' * (Unicode 8.0 categories, crate unicode_categories) see another kind than\n' +
		' * the current Unicode categories do: mostly characters assigned since 8.0,\n' +
		' * which HF treats as ordinary characters. tokenizer.c looks a non-ASCII\n' +
		' * code point up here before asking utf8proc. */\n' +
		'#ifndef SKY_TOKENIZER_HF8_H\n#define SKY_TOKENIZER_HF8_H\n\n#include <stdint.h>\n\n' +
		'static const struct {\n\tint32_t lo, hi;\n\tint kind;\n} k_hf8[] = {\n';
	for (const [lo, hi, k] of ranges) h += `\t{${hex(lo)}, ${hex(hi)}, ${names[k]}},\n`;
	h += '};\n\n#endif\n';
	fs.writeFileSync(path.join(root, 'runtime/tokenizer_hf8.h'), h);
	console.log(`tokenizer_golden: ${rows.length} code points in ${ranges.length} ranges into runtime/tokenizer_hf8.h`);
}

module.exports = { loadTokenizers, bertTokenizerJson };
if (require.main === module) {
	tk = loadTokenizers();
	if (!tk) {
		console.error('tokenizer_golden: the tokenizers package is missing: ' +
			'npm install --prefix build/node tokenizers');
		process.exit(2);
	}
	if (process.argv.includes('--hf8')) hf8();
	else golden().catch((e) => { console.error(e); process.exit(1); });
}
