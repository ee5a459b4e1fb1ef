// Generates the PretrainedFromHF (Hugging Face tokenizer.json) fixtures and their test vectors
// with the npm package @huggingface/tokenizers (the JavaScript port of the tokenizers library),
// so that the C++ tests (tests/tokenizer/hf_tokenizer_test.cpp) need no Node:
//
//   mkdir /tmp/hfref && (cd /tmp/hfref && npm install @huggingface/tokenizers@0.2.0)
//   NODE_PATH=/tmp/hfref/node_modules node tests/tokenizer/reference/hf_vectors.mjs
//
// (Run from the repository root; NODE_PATH is not used by ES modules, so the script resolves
// the package from NODE_PATH itself.)
//
// Tokenizers (directories under hf/, each with tokenizer.json + tokenizer_config.json):
//   gpt2_skeleton  GPT-2's tokenizer.json without "vocab" and "merges": the test fills them
//                  from data/gpt2/gpt2-vocab.json and gpt2-merges.txt ("a b" merge strings),
//                  exactly as build_gpt2() below does (a full GPT-2 tokenizer.json is 2 MB).
//   llama3_style   LLaMA-3's pipeline: Split with LLaMA-3's regex, ByteLevel(use_regex false),
//                  ignore_merges, merges as ["a", "b"] pairs, <|begin_of_text|> added by a
//                  TemplateProcessing post-processor, special tokens. Vocabulary: the first
//                  3000 GPT-2 merges (ids renumbered) plus a few whole-word tokens that no merge
//                  reaches (only ignore_merges finds them).
//   qwen2_style    Qwen2's: NFC normalizer, Split with Qwen2's regex, ByteLevel, "a b" merges
//                  (the first 2000 GPT-2 merges), <|endoftext|> / <|im_start|> / <|im_end|>, an
//                  lstrip+rstrip token and a normalized (NFC-matched) added token.
//
// Vectors: hf_vectors.jsonl, one {"tokenizer", "text", "ids", "decoded"} per line: ids =
// tokenizer.encode(text).ids (add_special_tokens true, as MindSpeed's _AutoTokenizer), decoded
// = tokenizer.decode(ids) (clean_up_tokenization_spaces from tokenizer_config.json).
// Texts: edge cases (Unicode, whitespace, contractions, digits, special tokens in text),
// paragraphs of data/corpus/kjv.jsonl.gz and (for the Split-pattern tokenizers) 150 seeded
// random strings. Left out for the ByteLevel-regex (GPT-2) tokenizer:
// U+0085 and U+FEFF, where the npm package's ByteLevel uses JavaScript's \s and the Rust
// library (and mindspeed-cpp) Unicode White_Space; single_word=true tokens, which the npm
// package ignores (hand-written C++ tests cover those).
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../../..');
const require = createRequire(path.join(process.env.NODE_PATH ?? process.cwd(), 'noop.js'));
const { Tokenizer } = require('@huggingface/tokenizers');
const packageDir = path.dirname(path.dirname(require.resolve('@huggingface/tokenizers')));
const version = JSON.parse(fs.readFileSync(path.join(packageDir, 'package.json'), 'utf8')).version;

const LLAMA3_REGEX = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const QWEN2_REGEX = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const byteLevel = (extra = {}) => ({ type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true, ...extra });
const addedToken = (id, content, special = true, extra = {}) => ({
  id, content, single_word: false, lstrip: false, rstrip: false, normalized: !special, special, ...extra,
});
const writeJson = (file, value) => fs.writeFileSync(file, JSON.stringify(value, null, 1) + '\n');

// ---- GPT-2 files
const gpt2Vocab = JSON.parse(fs.readFileSync(path.join(root, 'data/gpt2/gpt2-vocab.json'), 'utf8'));
const gpt2MergeLines = fs.readFileSync(path.join(root, 'data/gpt2/gpt2-merges.txt'), 'utf8')
  .split('\n').slice(1).filter((l) => l.length > 0);

// ---- gpt2: skeleton + vocab/merges from data/gpt2 (the C++ test does the same)
function gpt2Skeleton() {
  return {
    version: '1.0', truncation: null, padding: null,
    added_tokens: [addedToken(50256, '<|endoftext|>', true, { normalized: true })],
    normalizer: null,
    pre_tokenizer: byteLevel(),
    post_processor: byteLevel({ trim_offsets: false }),
    decoder: byteLevel(),
    model: {
      type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '', end_of_word_suffix: '',
      fuse_unk: false, byte_fallback: false, ignore_merges: false,
    },
  };
}
function build_gpt2(skeleton) {
  const full = structuredClone(skeleton);
  full.model.vocab = gpt2Vocab;
  full.model.merges = gpt2MergeLines;
  return full;
}

// ---- a small vocabulary: the 256 byte symbols plus the results of the first n GPT-2 merges
function smallVocab(numMerges, extraWords) {
  const byteSymbols = Object.keys(gpt2Vocab).filter((t) => gpt2Vocab[t] < 256);
  const vocab = {};
  let next = 0;
  for (const s of byteSymbols) vocab[s] = next++;
  const merges = [];
  for (const line of gpt2MergeLines.slice(0, numMerges)) {
    const [a, b] = line.split(' ');
    if (!(a in vocab) || !(b in vocab)) throw new Error('merge part missing: ' + line);
    merges.push([a, b]);
    if (!((a + b) in vocab)) vocab[a + b] = next++;
  }
  for (const w of extraWords) if (!(w in vocab)) vocab[w] = next++;
  return { vocab, merges, size: next };
}
// byte -> GPT-2 symbol (bytes_to_unicode)
const byteSymbol = (() => {
  const bs = [];
  for (let b = 33; b <= 126; ++b) bs.push(b);
  for (let b = 161; b <= 172; ++b) bs.push(b);
  for (let b = 174; b <= 255; ++b) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; ++b) if (!bs.includes(b)) { bs.push(b); cs.push(256 + n); ++n; }
  const map = new Array(256);
  bs.forEach((b, i) => { map[b] = String.fromCharCode(cs[i]); });
  return map;
})();
const symbols = (text) => Array.from(new TextEncoder().encode(text), (b) => byteSymbol[b]).join('');

function llama3Style() {
  const words = [' Jerusalem', ' begat', ' LORD', ' Israel', ' wilderness', 'Hello', ' firmament', ' 2024'];
  const { vocab, merges, size } = smallVocab(3000, words.map(symbols));
  const specials = ['<|begin_of_text|>', '<|end_of_text|>', '<|reserved_special_token_0|>',
    '<|start_header_id|>', '<|end_header_id|>', '<|eot_id|>'];
  const added = specials.map((s, i) => addedToken(size + i, s));
  const bos = size;
  return {
    tokenizer: {
      version: '1.0', truncation: null, padding: null, added_tokens: added, normalizer: null,
      pre_tokenizer: {
        type: 'Sequence',
        pretokenizers: [
          { type: 'Split', pattern: { Regex: LLAMA3_REGEX }, behavior: 'Isolated', invert: false },
          byteLevel({ use_regex: false }),
        ],
      },
      post_processor: {
        type: 'Sequence',
        processors: [
          byteLevel({ trim_offsets: false, use_regex: true }),
          {
            type: 'TemplateProcessing',
            single: [{ SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
            pair: [{ SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
              { SpecialToken: { id: '<|begin_of_text|>', type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
            special_tokens: { '<|begin_of_text|>': { id: '<|begin_of_text|>', ids: [bos], tokens: ['<|begin_of_text|>'] } },
          },
        ],
      },
      decoder: byteLevel(),
      model: {
        type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
        fuse_unk: false, byte_fallback: false, ignore_merges: true, vocab, merges,
      },
    },
    config: {
      bos_token: '<|begin_of_text|>', eos_token: '<|end_of_text|>', clean_up_tokenization_spaces: true,
      model_max_length: 131072, tokenizer_class: 'PreTrainedTokenizerFast',
    },
  };
}

function qwen2Style() {
  const { vocab, merges, size } = smallVocab(2000, []);
  const added = [
    addedToken(size, '<|endoftext|>'),
    addedToken(size + 1, '<|im_start|>'),
    addedToken(size + 2, '<|im_end|>'),
    addedToken(size + 3, '<mask>', true, { lstrip: true, rstrip: true }),
    addedToken(size + 4, 'e\u0301x', false, { normalized: true }),
  ];
  return {
    tokenizer: {
      version: '1.0', truncation: null, padding: null, added_tokens: added,
      normalizer: { type: 'NFC' },
      pre_tokenizer: {
        type: 'Sequence',
        pretokenizers: [
          { type: 'Split', pattern: { Regex: QWEN2_REGEX }, behavior: 'Isolated', invert: false },
          byteLevel({ use_regex: false }),
        ],
      },
      post_processor: byteLevel({ trim_offsets: false }),
      decoder: byteLevel(),
      model: {
        type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '', end_of_word_suffix: '',
        fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab,
        merges: merges.map(([a, b]) => `${a} ${b}`),
      },
    },
    config: {
      bos_token: null, eos_token: '<|endoftext|>', pad_token: '<|endoftext|>', clean_up_tokenization_spaces: false,
      model_max_length: 32768, tokenizer_class: 'Qwen2Tokenizer', split_special_tokens: false,
    },
  };
}

// ---- texts
const common = [
  'a', ' a', '  a', 'a ', 'hello world', 'Hello, World!', 'Hello', ' Hello', '\n', '\n\n', '\r\n', 'a\r\nb',
  'line one\r\nline two\r\n', ' \n', '\n ', ' \n ', 'a\nb', 'a \n b', 'a\t\tb', '\t x', '   leading',
  'trailing   ', 'mid   dle', 'x\u00a0y', 'x\u3000y', 'x\u2028y', 'x\u200by', '\u00a0\u00a0a',
  "I'm", "you're", "we've", "they'll", "he'd", "it's", "don't", "DON'T", "I'M", "YOU'RE", "WE'VE",
  "THEY'LL", "HE'D", "IT'S", "She'S", "'s", "'t", "''s", "!'s", "rock'n'roll", "'sup", "o'clock", "it’s",
  '0', '12', '123', '1234', '12345', '1234567890123', ' 42', '3.14159', '1,000,000', '2024-01-01',
  'a1b2c3', 'x²', '½', '１２３', '٣٤٥', '१२३', 'Ⅻ',
  '!', '!!!', ' !', '...', '?!?!', '@#$%^&*()', '(word)', '"quoted"', '«guillemets»', 'a.b.c',
  'def f(x):\n    return x + 1\n', '{"key": [1, 2, 3]}\n\n', 'https://example.com/path?q=1&r=2',
  '!!\n\n', 'x.\n\n\ny', 'end.\r\n\r\nnext',
  'café', 'naïve', 'résumé', 'Zürich', 'e\u0301', 'cafe\u0301', 'Cafe\u0301 au lait', 'A\u030a', '\u212b',
  'o\u0308\u0301', 'a\u0323\u0302', '\u1e0b\u0323', 'q\u0307\u0323', 'ﬁ', 'ß', 'İstanbul',
  '\u1100\u1161\u11a8', '\u1100\u1161', '한국어 텍스트', 'Привет мир', 'Ελληνικά', 'שלום', 'مرحبا بالعالم',
  'नमस्ते दुनिया', 'สวัสดี', '中文', '你好，世界！', '日本語のテキスト', 'カタカナ', '漢字かな交じり文',
  '😀', '😀😀', ' 😀', 'a😀b', '👍🏽', '👨‍👩‍👧', '👩🏽‍💻', '🇺🇸🇫🇷', '❤️', '🎉 party', '𝐀𝐁𝐂',
  'a\u0000b', '\u0001\u0002', '\u007f', 'x\u001fy', '\u00ad', '\u2060', '\t\u000b\u000c',
  ',', ', ,', 'a,,b', 'Ġ', 'Ċ', 'a'.repeat(300), ' '.repeat(50) + 'x', '\n'.repeat(20), '!'.repeat(60),
  '1234567890'.repeat(5), '中'.repeat(40), 'ab'.repeat(100),
  'The quick brown fox jumps over the lazy dog.', 'THE QUICK BROWN FOX', '  spaces  around  ',
];
const specialCases = {
  gpt2: ['<|endoftext|>', 'a<|endoftext|>b', 'text <|endoftext|> more', '<|endoftext|><|endoftext|>',
    '<|endoftext|', '<|endoftext|>\n'],
  llama3_style: ['<|begin_of_text|>', 'x<|end_of_text|>y', 'Hi <|eot_id|> there', '<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>',
    '<|begin_of_text|', ' Jerusalem', 'Jerusalem', ' Jerusalems', ' begat', ' LORD God', 'Hello Hello', ' 2024 2024'],
  qwen2_style: ['<|endoftext|>', '<|im_start|>user\nHello<|im_end|>\n', 'a <mask> b', 'a<mask>b',
    'a   <mask>   b', '<mask>', ' \t<mask>\n', 'éx', 'e\u0301x', 'caféx', 'Ae\u0301x', 'e\u0301\u0323x', 'x<|im_end|'],
};

const lines = zlib.gunzipSync(fs.readFileSync(path.join(root, 'data/corpus/kjv.jsonl.gz')))
  .toString('utf8').split('\n').filter((l) => l.length > 0);
const corpus = [];
for (let i = 0; i < lines.length; i += 40) corpus.push(JSON.parse(lines[i]).text.slice(0, 300));
corpus.push(JSON.parse(lines[22]).text.slice(0, 3000));

// ---- seeded random strings (mulberry32) over code points that stress the Split patterns,
// NFC and the added-token splitter
let seed = 4321;
function rand() {
  seed = (seed + 0x6D2B79F5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const alphabet = [
  'a', 'b', 'Z', 'e', 's', 'S', 't', 'l', 'L', 'r', 'E', 'v', 'm', 'D', '0', '7', '9', ' ', ' ', ' ', '  ',
  '\n', '\r', '\r\n', '\t', "'", "'s", "'LL", "'re", '.', ',', '!', '?', '-', '_', '"', '(', ')', '#',
  'é', 'e\u0301', '\u0301', '\u0323', 'ß', 'Ω', 'Ж', 'ק', 'ع', 'न', 'ि', '中', 'あ', '한', '\u1100', '\u1161',
  '😀', '👍', '🏽', '\u200d', '\u00a0', '\u3000', '\u2028', '²', '½', '١', '<', '>', '|', '<|', '|>',
  '<mask>', '<|im_end|>', '<|eot_id|>', 'éx',
];
const randomTexts = [];
for (let k = 0; k < 150; ++k) {
  const len = 1 + Math.floor(rand() * 30);
  let t = '';
  for (let j = 0; j < len; ++j) t += alphabet[Math.floor(rand() * alphabet.length)];
  randomTexts.push(t);
}

// ---- write fixtures and vectors
const outDir = path.join(here, 'hf');
const out = [];
function emit(name, tokenizerJson, config, texts) {
  const tok = new Tokenizer(tokenizerJson, config);
  for (const text of texts) {
    const ids = tok.encode(text).ids;
    if (ids.some((id) => id === undefined || id === null)) throw new Error(`${name}: undefined id for ${JSON.stringify(text)}`);
    const decoded = ids.length > 0 ? tok.decode(ids) : '';
    out.push(JSON.stringify({ tokenizer: name, text, ids, decoded }));
  }
}

fs.mkdirSync(path.join(outDir, 'gpt2_skeleton'), { recursive: true });
const skeleton = gpt2Skeleton();
writeJson(path.join(outDir, 'gpt2_skeleton/tokenizer.json'), skeleton);
const gpt2Config = { model_max_length: 1024, tokenizer_class: 'GPT2Tokenizer', clean_up_tokenization_spaces: false };
writeJson(path.join(outDir, 'gpt2_skeleton/tokenizer_config.json'), gpt2Config);
const noJsWhitespace = (t) => !/[\u0085\ufeff]/u.test(t);
emit('gpt2', build_gpt2(skeleton), gpt2Config, [...common, ...specialCases.gpt2, ...corpus].filter(noJsWhitespace));

for (const [name, make] of [['llama3_style', llama3Style], ['qwen2_style', qwen2Style]]) {
  const { tokenizer, config } = make();
  fs.mkdirSync(path.join(outDir, name), { recursive: true });
  writeJson(path.join(outDir, name, 'tokenizer.json'), tokenizer);
  writeJson(path.join(outDir, name, 'tokenizer_config.json'), config);
  // U+0085 / U+FEFF are fine here: Split patterns go through the package's Oniguruma
  // translation (\s = White_Space), as in the Rust library.
  emit(name, tokenizer, config, [...common, 'x\u0085y', '\ufeffa b', ...specialCases[name], ...corpus, ...randomTexts]);
}

fs.writeFileSync(path.join(here, 'hf_vectors.jsonl'), out.join('\n') + '\n');
console.log(`@huggingface/tokenizers ${version}: wrote ${out.length} vectors to hf_vectors.jsonl`);
