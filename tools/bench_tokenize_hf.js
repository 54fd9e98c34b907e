#!/usr/bin/env node
// The Hugging Face side of `sky bench tokenize`: the same text, the same
// vocabulary, HF's tokenizers (npm package, Rust underneath) encoding
// every line, as Sky does in the same run. Prints one JSON line:
//   {"ok":true,"version":V,"threads":T,"lines":N,"bytes":B,"tokens":K,
//    "runs_s":[..],"median_s":S,"mb_s":M}
// or {"ok":false,"why":"..."} when the package is missing.
//
//   node tools/bench_tokenize_hf.js --model-dir DIR --text FILE [--runs N]
//
// The model directory holds tokenizer.json, or vocab.txt with
// tokenizer_config.json (turned into the tokenizer.json BertTokenizerFast
// would make, tools/golden/tokenizer_golden.js). Lines go through
// encodeBatch in chunks of 1,000 without truncation or padding; HF's
// worker threads come from RAYON_NUM_THREADS (sky bench sets 1, as Sky
// runs on one thread).
'use strict';
const fs = require('fs');
const path = require('path');
const { loadTokenizers, bertTokenizerJson } = require('./golden/tokenizer_golden.js');

function arg(name, dflt) {
	const i = process.argv.indexOf(name);
	return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : dflt;
}

async function main() {
	const tk = loadTokenizers();
	if (!tk) {
		console.log(JSON.stringify({ ok: false, why: 'the tokenizers package is not installed ' +
			'(npm install --prefix build/node tokenizers)' }));
		return;
	}
	const dir = arg('--model-dir'), file = arg('--text'), runs = +arg('--runs', '3');
	let json;
	if (fs.existsSync(path.join(dir, 'tokenizer.json'))) {
		json = fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf8');
	} else {
		const cfgPath = path.join(dir, 'tokenizer_config.json');
		const cfg = fs.existsSync(cfgPath) ? JSON.parse(fs.readFileSync(cfgPath, 'utf8')) : {};
		json = JSON.stringify(bertTokenizerJson(fs.readFileSync(path.join(dir, 'vocab.txt'), 'utf8'), cfg));
	}
	const t = tk.Tokenizer.fromString(json);
	const buf = fs.readFileSync(file);
	const lines = buf.toString('utf8').split('\n');
	if (lines[lines.length - 1] === '') lines.pop();
	const chunks = [];
	for (let i = 0; i < lines.length; i += 1000) chunks.push(lines.slice(i, i + 1000));
	const once = async () => {
		let tokens = 0;
		for (const c of chunks) {
			const enc = await t.encodeBatch(c);
			for (const e of enc) tokens += e.getLength() - 2;
		}
		return tokens;
	};
	await once(); // warm-up
	const times = [];
	let tokens = 0;
	for (let r = 0; r < runs; r++) {
		const t0 = process.hrtime.bigint();
		tokens = await once();
		times.push(Number(process.hrtime.bigint() - t0) / 1e9);
	}
	const sorted = [...times].sort((a, b) => a - b);
	const median = sorted[Math.floor(sorted.length / 2)];
	console.log(JSON.stringify({
		ok: true, version: tk.skyVersion, threads: +(process.env.RAYON_NUM_THREADS || 0),
		lines: lines.length, bytes: buf.length, tokens, runs_s: times, median_s: median,
		mb_s: buf.length / median / 1e6,
	}));
}
main().catch((e) => { console.log(JSON.stringify({ ok: false, why: String(e.message || e) })); });
