// A zlib-stream inflater (RFC 1950 around RFC 1951's DEFLATE), for the engines without DecompressionStream:
// the classic build embeds the wasm DEFLATE-compressed (scripts/size/embed_wasm.mjs), which engines that
// have DecompressionStream decode natively, off the main thread (js/embedded_wasm.js). Modelled on zlib's
// puff.c: canonical Huffman codes kept as counts per length and symbols in code order, decoded a bit at a
// time, so a table costs one pass over the code lengths and no lookup table is built.
//
// `inflate(input, outputSize)`: the `outputSize` bytes that the zlib stream `input` holds. The 2-byte header
// is skipped (the build writes no preset dictionary) and the Adler-32 after the last block is not read: what
// the bytes must be is checked by WebAssembly's own validation when they are compiled. Past the end of
// `input` it reads zero bits (`undefined << n` is 0). Corrupt input throws or gives wrong bytes; it always
// ends: every code read moves the output on or ends a block, and the output never grows past `outputSize`.

// Lengths 257-285 and distances 0-29: their bases and extra bits (RFC 1951, 3.2.5).
const LENGTH_BASE = new Uint16Array(29);
const LENGTH_EXTRA = new Uint8Array(29);
const DISTANCE_BASE = new Uint16Array(30);
const DISTANCE_EXTRA = new Uint8Array(30);
for (let i = 0, base = 3; i < 28; i++) {
  LENGTH_EXTRA[i] = i < 8 ? 0 : (i >> 2) - 1;
  LENGTH_BASE[i] = base;
  base += 1 << LENGTH_EXTRA[i];
}
LENGTH_BASE[28] = 258;
for (let i = 0, base = 1; i < 30; i++) {
  DISTANCE_EXTRA[i] = i < 4 ? 0 : (i >> 1) - 1;
  DISTANCE_BASE[i] = base;
  base += 1 << DISTANCE_EXTRA[i];
}
// The order in which a dynamic block gives its code-length code's lengths.
const CODE_LENGTH_ORDER = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15];

function fail(what) {
  throw new Error(`inflate: corrupt stream (${what})`);
}

/** The canonical Huffman code of `lengths[start..start + n)`: how many codes of each length, and the symbols in code order. */
function huffman(lengths, start, n) {
  const counts = new Uint16Array(16);
  const offsets = new Uint16Array(16);
  const symbols = new Uint16Array(n);
  for (let i = 0; i < n; i++) counts[lengths[start + i]]++;
  counts[0] = 0;
  for (let length = 1; length < 15; length++) offsets[length + 1] = offsets[length] + counts[length];
  for (let i = 0; i < n; i++) if (lengths[start + i] !== 0) symbols[offsets[lengths[start + i]]++] = i;
  return { counts, symbols };
}

let fixedCodes = null;

/** The fixed block's literal/length and distance codes (RFC 1951, 3.2.6), made at the first fixed block. */
function fixed() {
  if (fixedCodes === null) {
    const lengths = new Uint8Array(318);
    lengths.fill(8, 0, 144).fill(9, 144, 256).fill(7, 256, 280).fill(8, 280, 288).fill(5, 288);
    fixedCodes = [huffman(lengths, 0, 288), huffman(lengths, 288, 30)];
  }
  return fixedCodes;
}

export function inflate(input, outputSize) {
  const out = new Uint8Array(outputSize);
  let outPos = 0;
  let inPos = 2;
  // Bits not yet used, the lowest first; fewer than 8 between reads, so a stored block's alignment drops them.
  let bitBuffer = 0;
  let bitCount = 0;
  const bits = (n) => {
    while (bitCount < n) {
      bitBuffer |= input[inPos++] << bitCount;
      bitCount += 8;
    }
    const value = bitBuffer & ((1 << n) - 1);
    bitBuffer >>>= n;
    bitCount -= n;
    return value;
  };
  // One symbol of `code`: a code is read bit by bit, the first bit the highest, until it is one of the
  // codes of the length read so far (those are consecutive, from `first`).
  const decode = ({ counts, symbols }) => {
    let code = 0;
    let first = 0;
    let index = 0;
    for (let length = 1; length < 16; length++) {
      if (bitCount === 0) {
        bitBuffer = input[inPos++] | 0;
        bitCount = 8;
      }
      code |= bitBuffer & 1;
      bitBuffer >>>= 1;
      bitCount--;
      const count = counts[length];
      if (code - first < count) return symbols[index + code - first];
      index += count;
      first = (first + count) << 1;
      code <<= 1;
    }
    return fail('no such code');
  };
  let last;
  do {
    last = bits(1);
    const type = bits(2);
    if (type === 0) {
      bitBuffer = bitCount = 0;
      const length = input[inPos] | (input[inPos + 1] << 8);
      if ((input[inPos + 2] | (input[inPos + 3] << 8)) !== (~length & 0xffff)) fail('stored length');
      inPos += 4;
      if (outPos + length > outputSize || inPos + length > input.length) fail('stored block too long');
      out.set(input.subarray(inPos, inPos + length), outPos);
      inPos += length;
      outPos += length;
      continue;
    }
    let literals;
    let distances;
    if (type === 1) [literals, distances] = fixed();
    else if (type === 2) {
      const nLiterals = bits(5) + 257;
      const nDistances = bits(5) + 1;
      const nCodeLengths = bits(4) + 4;
      const codeLengths = new Uint8Array(19);
      for (let i = 0; i < nCodeLengths; i++) codeLengths[CODE_LENGTH_ORDER[i]] = bits(3);
      const lengthCode = huffman(codeLengths, 0, 19);
      const lengths = new Uint8Array(nLiterals + nDistances);
      for (let i = 0; i < lengths.length; ) {
        const symbol = decode(lengthCode);
        if (symbol < 16) {
          lengths[i++] = symbol;
          continue;
        }
        let repeated = 0;
        let times;
        if (symbol === 16) {
          if (i === 0) fail('repeat of no length');
          repeated = lengths[i - 1];
          times = 3 + bits(2);
        } else times = symbol === 17 ? 3 + bits(3) : 11 + bits(7);
        if (i + times > lengths.length) fail('too many lengths');
        lengths.fill(repeated, i, (i += times));
      }
      literals = huffman(lengths, 0, nLiterals);
      distances = huffman(lengths, nLiterals, nDistances);
    } else fail('block type 3');
    for (;;) {
      let symbol = decode(literals);
      if (symbol < 256) {
        if (outPos >= outputSize) fail('too long');
        out[outPos++] = symbol;
      } else if (symbol === 256) break;
      else {
        symbol -= 257;
        if (symbol >= 29) fail('length symbol');
        const length = LENGTH_BASE[symbol] + bits(LENGTH_EXTRA[symbol]);
        const distanceSymbol = decode(distances);
        if (distanceSymbol >= 30) fail('distance symbol');
        const distance = DISTANCE_BASE[distanceSymbol] + bits(DISTANCE_EXTRA[distanceSymbol]);
        if (distance > outPos || outPos + length > outputSize) fail('match out of range');
        for (const end = outPos + length; outPos < end; outPos++) out[outPos] = out[outPos - distance];
      }
    }
  } while (!last);
  if (outPos !== outputSize) fail('too short');
  return out;
}
