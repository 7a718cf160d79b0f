// A raw LZMA1 decoder, the inverse of `xz --format=raw --lzma1=...`: the classic build embeds the wasm
// LZMA-compressed (scripts/size/embed_wasm.mjs), 12% smaller than Zopfli's DEFLATE, and this decoder
// (~1 KB gzipped) is all it takes to read it back. Written from the LZMA specification (the LZMA SDK's
// lzma-specification.txt): a range coder over adaptive bit probabilities; literals coded in a tree chosen by
// the previous byte (and, after a match, steered by the byte at the last distance); lengths and distances
// coded in trees, with the last four distances kept for repeats.
//
// `lzmaDecode(input, outputSize, lc, lp, pb)`: the `outputSize` bytes that `input`, a raw LZMA1 stream made
// with those literal context, literal position and position bits, decodes to. It stops at `outputSize`
// (an end marker after it is never read), and reads 0 past the end of `input` (`x | undefined` is `x`), so
// the classic build embeds the stream without the end it does not need. Corrupt input gives wrong bytes
// or throws; it always ends. `lzmaDecoder(...)` is the same decoding in steps: each call of the function
// it returns, `step(count)`, decodes at least `count` more bytes (a match may run past them) or up to the
// end, and returns the output once it is whole, else undefined; the bytes do not depend on the steps.

// Offsets of the probability arrays in one Uint16Array (states 0-11, position states 0-15).
const IS_MATCH = 0; //      [state << 4 | posState]
const IS_REP = 192; //      [state]
const IS_REP_G0 = 204; //   [state]
const IS_REP_G1 = 216; //   [state]
const IS_REP_G2 = 228; //   [state]
const IS_REP0_LONG = 240; // [state << 4 | posState]
const POS_SLOT = 432; //    4 trees of 6 bits (64 each)
const SPEC_POS = 688; //    114: the reverse trees of distances 4 to 127
const ALIGN = 802; //       16: the low 4 bits of longer distances
const LEN = 818; //         a length coder (514): choice, choice2, 16 low and 16 mid trees of 8, a high tree of 256
const REP_LEN = 1332; //    the length coder of repeats
const LITERAL = 1846; //    0x300 per literal context

export function lzmaDecoder(input, outputSize, lc, lp, pb) {
  const out = new Uint8Array(outputSize);
  const probs = new Uint16Array(LITERAL + (0x300 << (lc + lp))).fill(1024);
  // The range coder. `range` and `code` are unsigned 32-bit values kept in int32s (compared with the sign
  // bit flipped): V8 then never boxes them. The stream's first byte is always 0.
  let inPos = 5;
  let range = -1;
  let code = (input[1] << 24) | (input[2] << 16) | (input[3] << 8) | input[4];
  const normalize = () => {
    if ((range & 0xff000000) === 0) {
      range <<= 8;
      code = (code << 8) | input[inPos++];
    }
  };
  const bit = (i) => {
    const p = probs[i];
    const bound = Math.imul(range >>> 11, p);
    let b = 0;
    if ((code ^ 0x80000000) < (bound ^ 0x80000000)) {
      range = bound;
      probs[i] = p + ((2048 - p) >> 5);
    } else {
      range -= bound;
      code -= bound;
      probs[i] = p - (p >> 5);
      b = 1;
    }
    normalize();
    return b;
  };
  // A bit tree of `bits` bits: the symbol read most significant bit first, or, `reverse`, least first.
  const tree = (base, bits, reverse) => {
    let m = 1;
    let symbol = 0;
    for (let i = 0; i < bits; i++) {
      const b = bit(base + m);
      m = (m << 1) | b;
      symbol |= b << i;
    }
    return reverse ? symbol : m - (1 << bits);
  };
  const length = (base, posState) =>
    bit(base) === 0
      ? tree(base + 2 + posState * 8, 3)
      : bit(base + 1) === 0
        ? 8 + tree(base + 130 + posState * 8, 3)
        : 16 + tree(base + 258, 8);

  // The decoder's state between steps; within one, in locals of the step, which the engines keep in registers.
  let saved = [0, 0, 0, 0, 0, 0];
  return (count) => {
    let [state, rep0, rep1, rep2, rep3, pos] = saved;
    const until = Math.min(pos + count, outputSize);
    while (pos < until) {
      const posState = pos & ((1 << pb) - 1);
      if (bit(IS_MATCH + ((state << 4) | posState)) === 0) {
        const previous = pos > 0 ? out[pos - 1] : 0;
        const base = LITERAL + 0x300 * (((pos & ((1 << lp) - 1)) << lc) + (previous >> (8 - lc)));
        // After a match the byte at distance rep0 predicts this one, up to the first bit that differs: while
        // `offset` is 0x100 each bit's probability is chosen by the predicted bit too; then it is 0.
        let offset = state >= 7 ? 0x100 : 0;
        let matchByte = offset && out[pos - rep0 - 1];
        let symbol = 1;
        while (symbol < 0x100) {
          matchByte <<= 1;
          const matchBit = matchByte & offset;
          const b = bit(base + offset + matchBit + symbol);
          symbol = (symbol << 1) | b;
          offset &= b ? matchBit : ~matchBit;
        }
        out[pos++] = symbol;
        state = state < 4 ? 0 : state < 10 ? state - 3 : state - 6;
        continue;
      }
      let len;
      if (bit(IS_REP + state) === 0) {
        // A match at a new distance.
        rep3 = rep2;
        rep2 = rep1;
        rep1 = rep0;
        len = length(LEN, posState);
        state = state < 7 ? 7 : 10;
        const slot = tree(POS_SLOT + (len < 3 ? len : 3) * 64, 6);
        if (slot < 4) {
          rep0 = slot;
        } else {
          const direct = (slot >> 1) - 1;
          rep0 = (2 | (slot & 1)) << direct;
          if (slot < 14) {
            rep0 += tree(SPEC_POS + rep0 - slot - 1, direct, true);
          } else {
            for (let i = direct - 4; i > 0; i--) {
              range = (range >>> 1) | 0;
              if ((code ^ 0x80000000) >= (range ^ 0x80000000)) {
                code -= range;
                rep0 += 1 << (i + 3);
              }
              normalize();
            }
            rep0 += tree(ALIGN, 4, true);
          }
        }
      } else {
        // A match at one of the last four distances, or (short rep) one byte at the last one.
        if (bit(IS_REP_G0 + state) === 0) {
          if (bit(IS_REP0_LONG + ((state << 4) | posState)) === 0) {
            state = state < 7 ? 9 : 11;
            len = -1;
          }
        } else {
          let distance;
          if (bit(IS_REP_G1 + state) === 0) {
            distance = rep1;
          } else {
            if (bit(IS_REP_G2 + state) === 0) {
              distance = rep2;
            } else {
              distance = rep3;
              rep3 = rep2;
            }
            rep2 = rep1;
          }
          rep1 = rep0;
          rep0 = distance;
        }
        if (len === undefined) {
          len = length(REP_LEN, posState);
          state = state < 7 ? 8 : 11;
        }
      }
      // A distance beyond the output (or negative, from corrupt input: huge as unsigned) cannot be copied.
      if (rep0 >>> 0 >= pos) throw new Error('weblocks: the embedded wasm is corrupt');
      for (let n = len + 2; n > 0 && pos < outputSize; n--, pos++) out[pos] = out[pos - rep0 - 1];
    }
    saved = [state, rep0, rep1, rep2, rep3, pos];
    return pos < outputSize ? undefined : out;
  };
}

export function lzmaDecode(input, outputSize, lc, lp, pb) {
  return lzmaDecoder(input, outputSize, lc, lp, pb)(outputSize);
}
