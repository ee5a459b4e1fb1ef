// Prints the npm @huggingface/tokenizers ids that hf_tokenizer_test's HfTokenizerComponents
// cases assert: tokenizer.json components the fixtures do not use (RobertaProcessing, a lone
// ByteLevel pre-tokenizer with and without use_regex, a Sequence of NFC normalizers, no
// normalizer), each applied to a copy of hf/qwen2_style/tokenizer.json. Run with the package in
// a temporary directory, as hf_vectors.mjs:
//
//   mkdir /tmp/hfref && (cd /tmp/hfref && npm install @huggingface/tokenizers@0.2.0)
//   NODE_PATH=/tmp/hfref/node_modules node tests/tokenizer/reference/hf_component_cases.mjs
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(process.env.NODE_PATH ?? process.cwd(), 'noop.js'));
const { Tokenizer } = require('@huggingface/tokenizers');
const base = JSON.parse(fs.readFileSync(path.join(here, 'hf/qwen2_style/tokenizer.json'), 'utf8'));
const config = JSON.parse(fs.readFileSync(path.join(here, 'hf/qwen2_style/tokenizer_config.json'), 'utf8'));

const texts = ['Hello world', '', "Hello world.\n\nAnd  then 123, it's here", 'e\u0301x cafe\u0301 \u212b'];
const byteLevel = (useRegex) => ({ type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: useRegex });
const roberta = { type: 'RobertaProcessing', sep: ['<|im_end|>', 2258], cls: ['<|im_start|>', 2257], trim_offsets: true, add_prefix_space: false };
const cases = {
  roberta: (t) => { t.post_processor = roberta; },
  roberta_in_sequence: (t) => { t.post_processor = { type: 'Sequence', processors: [t.post_processor, roberta] }; },
  lone_bytelevel_no_regex: (t) => { t.pre_tokenizer = byteLevel(false); },
  lone_bytelevel_regex: (t) => { t.pre_tokenizer = byteLevel(true); },
  nfc_sequence: (t) => { t.normalizer = { type: 'Sequence', normalizers: [{ type: 'NFC' }, { type: 'NFC' }] }; },
  no_normalizer: (t) => { t.normalizer = null; },
};
for (const [name, edit] of Object.entries(cases)) {
  const t = structuredClone(base);
  edit(t);
  const tok = new Tokenizer(t, config);
  for (const text of texts) {
    const { ids, tokens } = tok.encode(text);
    console.log(JSON.stringify({ case: name, text, ids, tokens }));
  }
}
