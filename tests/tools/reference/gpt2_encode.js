// Reads a JSON list of strings on stdin, writes the list of their GPT-2 ids (npm
// gpt-3-encoder 1.1.4) on stdout. Used by make_preprocess_reference.py.
//   NODE_PATH=/tmp/npmref/node_modules node tests/tools/reference/gpt2_encode.js < texts.json
const { encode } = require('gpt-3-encoder');
let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', chunk => { input += chunk; });
process.stdin.on('end', () => {
  const texts = JSON.parse(input);
  process.stdout.write(JSON.stringify(texts.map(t => encode(t))));
});
