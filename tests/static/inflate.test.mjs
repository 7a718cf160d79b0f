// js/inflate.js, the inflater of the wasm the classic build embeds where the engine has no
// DecompressionStream (js/embedded_wasm.js), against zlib's and Zopfli's encoders: every byte comes back
// from each block type (stored, fixed, dynamic) and each compression level, on data with long repeats, on
// incompressible data, on the built wasm itself when present, and on edge sizes; corrupt input throws or
// gives other bytes, and always ends.
// No browser: Node runs the same code.
//
// Run: node --test tests/static/inflate.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { repoRoot } from '../e2e/server.mjs';
import { inflate } from '../../js/inflate.js';
import { embeddedStream } from '../../scripts/size/embed_wasm.mjs';

/** Text with many repeats at many distances, and some random bytes between them. */
function mixedData(size) {
  const words = ['lock', 'request', 'exclusive', 'shared', 'steal', 'ifAvailable', '\0\0\0\x01', '\xff\xfe'];
  const random = crypto.randomBytes(size);
  const out = Buffer.alloc(size);
  let at = 0;
  for (let i = 0; at < size; i++) {
    const chunk = random[i] % 5 === 0 ? random.subarray(i, i + 7) : Buffer.from(words[random[i] % words.length], 'latin1');
    at += chunk.copy(out, at);
  }
  return out;
}

const encoders = {
  'stored blocks (level 0)': (data) => zlib.deflateSync(data, { level: 0 }),
  'fixed blocks': (data) => zlib.deflateSync(data, { strategy: zlib.constants.Z_FIXED }),
  'dynamic blocks, level 1': (data) => zlib.deflateSync(data, { level: 1 }),
  'dynamic blocks, level 9': (data) => zlib.deflateSync(data, { level: 9, memLevel: 9 }),
  'Huffman only (no matches)': (data) => zlib.deflateSync(data, { strategy: zlib.constants.Z_HUFFMAN_ONLY }),
  'runs of one distance (RLE)': (data) => zlib.deflateSync(data, { strategy: zlib.constants.Z_RLE }),
};

for (const [name, encode] of Object.entries(encoders)) {
  test(`${name}: mixed and incompressible data inflate to the original bytes`, () => {
    for (const data of [mixedData(200_000), crypto.randomBytes(70_000)]) {
      assert.ok(Buffer.from(inflate(encode(data), data.length)).equals(data));
    }
  });
}

test('edge sizes: empty, one byte, one byte repeated, a stored block of 65,535 bytes', () => {
  for (const data of [Buffer.alloc(0), Buffer.from([7]), Buffer.alloc(100_000, 0x61), crypto.randomBytes(65_535)]) {
    for (const encode of Object.values(encoders)) assert.ok(Buffer.from(inflate(encode(data), data.length)).equals(data));
  }
});

test("the build's stream (embeddedStream, Zopfli) of the wasm inflates to the wasm", { skip: !fs.existsSync(path.join(repoRoot, 'pkg', 'weblocks_bg.wasm')) && 'no pkg/: run `npm run build`' }, () => {
  const wasm = fs.readFileSync(path.join(repoRoot, 'pkg', 'weblocks_bg.wasm'));
  const packed = embeddedStream(wasm);
  // Zopfli writes a smaller stream than zlib's best.
  assert.ok(packed.length < zlib.deflateSync(wasm, { level: 9, memLevel: 9 }).length);
  assert.ok(Buffer.from(inflate(packed, wasm.length)).equals(wasm));
});

test('corrupt input throws or gives bytes of the size asked, and always ends; a size other than the stream\'s throws', () => {
  const data = mixedData(50_000);
  const packed = zlib.deflateSync(data, { level: 9 });
  let threw = 0;
  for (let i = 0; i < 40; i++) {
    const broken = Buffer.from(packed);
    broken[2 + ((i * 997) % (packed.length - 6))] ^= 0x5a;
    let inflated = null;
    try {
      inflated = inflate(broken, data.length);
    } catch (e) {
      assert.match(e.message, /corrupt/);
      threw++;
      continue;
    }
    assert.equal(inflated.length, data.length);
  }
  assert.ok(threw > 0);
  assert.throws(() => inflate(packed, data.length - 1), /corrupt/);
  assert.throws(() => inflate(packed, data.length + 1), /corrupt/);
  assert.throws(() => inflate(packed.subarray(0, packed.length >> 1), data.length), /corrupt/);
});
