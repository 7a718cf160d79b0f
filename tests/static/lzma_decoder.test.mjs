// js/lzma_decoder.js, the decoder of the wasm the classic build embeds (scripts/size/embed_wasm.mjs),
// against xz's encoder: every byte comes back, for the literal/position settings the build uses and
// others (each changes which probabilities the decoder picks), on data with long repeats, on incompressible
// data (long distances, the direct-bit path), on the built wasm itself when present, and on edge sizes;
// and decoded in steps of any size, as the classic script decodes, the same bytes.
// No browser: Node runs the same code.
//
// Run: node --test tests/static/lzma_decoder.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../e2e/server.mjs';
import { lzmaDecode, lzmaDecoder } from '../../js/lzma_decoder.js';
import { embeddedStream, lzmaCompress } from '../../scripts/size/embed_wasm.mjs';

function xz(bytes, lc, lp, pb) {
  const result = spawnSync('xz', ['--format=raw', `--lzma1=preset=6,lc=${lc},lp=${lp},pb=${pb}`, '--stdout'], { input: bytes });
  assert.equal(result.status, 0, String(result.stderr));
  return result.stdout;
}

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

const settings = [
  [3, 0, 0], // what the build uses
  [3, 0, 2], // xz's default
  [0, 2, 2],
  [4, 0, 1],
  [1, 3, 4],
];

for (const [lc, lp, pb] of settings) {
  test(`lc=${lc} lp=${lp} pb=${pb}: mixed and incompressible data decode to the original bytes`, () => {
    for (const data of [mixedData(200_000), crypto.randomBytes(70_000)]) {
      const decoded = lzmaDecode(xz(data, lc, lp, pb), data.length, lc, lp, pb);
      assert.ok(Buffer.from(decoded).equals(data));
    }
  });
}

test('decoded in steps (lzmaDecoder), the bytes are those of one decoding, whatever the step', () => {
  const data = mixedData(150_000);
  const packed = xz(data, 3, 0, 0);
  for (const size of [1, 7, 300, 8192, 100_000]) {
    const step = lzmaDecoder(packed, data.length, 3, 0, 0);
    let out;
    let steps = 0;
    while ((out = step(size)) === undefined) steps++;
    assert.ok(Buffer.from(out).equals(data), `steps of ${size}`);
    // Each step decoded at least its count (a match, at most 273 bytes, may run past it), so the steps
    // before the last are fewer than the output has counts, and there was one at least.
    assert.ok(steps < Math.ceil(data.length / size), `steps of ${size}: ${steps}`);
    assert.ok(steps >= 1);
  }
});

test('edge sizes: empty, one byte, one byte repeated', () => {
  for (const data of [Buffer.alloc(0), Buffer.from([7]), Buffer.alloc(100_000, 0x61)]) {
    assert.ok(Buffer.from(lzmaDecode(xz(data, 3, 0, 0), data.length, 3, 0, 0)).equals(data));
  }
});

test("the build's own compression (lzmaCompress) of the wasm decodes to the wasm", { skip: !fs.existsSync(path.join(repoRoot, 'pkg', 'weblocks_bg.wasm')) && 'no pkg/: run `npm run build`' }, () => {
  const wasm = fs.readFileSync(path.join(repoRoot, 'pkg', 'weblocks_bg.wasm'));
  const packed = lzmaCompress(wasm);
  assert.ok(packed.length < wasm.length / 2);
  assert.ok(Buffer.from(lzmaDecode(packed, wasm.length, 3, 0, 0)).equals(wasm));
});

test('the embedded stream (embeddedStream: the end the decoder never reads cut off) decodes to the wasm', { skip: !fs.existsSync(path.join(repoRoot, 'pkg', 'weblocks_bg.wasm')) && 'no pkg/: run `npm run build`' }, () => {
  const wasm = fs.readFileSync(path.join(repoRoot, 'pkg', 'weblocks_bg.wasm'));
  const full = lzmaCompress(wasm);
  const embedded = embeddedStream(wasm);
  assert.ok(embedded.length < full.length && full.subarray(0, embedded.length).equals(embedded));
  assert.ok(Buffer.from(lzmaDecode(embedded, wasm.length, 3, 0, 0)).equals(wasm));
  // One byte fewer no longer decodes to the wasm: the cut stops where it must.
  let shorter = null;
  try {
    shorter = Buffer.from(lzmaDecode(embedded.subarray(0, embedded.length - 1), wasm.length, 3, 0, 0));
  } catch {}
  assert.ok(shorter === null || !shorter.equals(wasm));
});

test('corrupt input throws or gives other bytes, and always ends', () => {
  const data = mixedData(50_000);
  const packed = Buffer.from(xz(data, 3, 0, 0));
  for (let i = 0; i < 20; i++) {
    const broken = Buffer.from(packed);
    broken[6 + ((i * 997) % (packed.length - 6))] ^= 0x5a;
    let decoded = null;
    try {
      decoded = lzmaDecode(broken, data.length, 3, 0, 0);
    } catch (e) {
      assert.match(e.message, /corrupt/);
      continue;
    }
    assert.equal(decoded.length, data.length);
  }
});
