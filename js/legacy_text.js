// The legacy build's TextEncoder and TextDecoder (scripts/build.mjs injects them in place of the globals):
// the engine's own where it has them, else UTF-8 in JavaScript, for the engines of the legacy build that
// have none (Safari 10.0, iOS 10.0 to 10.2). The glue only encodes strings and decodes what Rust wrote
// (always valid UTF-8); like the platform's, the encoder writes a lone surrogate as U+FFFD.
import { theGlobal } from './global_object.js';

class Utf8Encoder {
  encode(text = '') {
    const bytes = [];
    for (let i = 0; i < text.length; i++) {
      let c = text.charCodeAt(i);
      if (c >= 0xd800 && c < 0xe000) {
        const next = text.charCodeAt(i + 1);
        if (c < 0xdc00 && next >= 0xdc00 && next < 0xe000) {
          c = 0x10000 + ((c - 0xd800) << 10) + (next - 0xdc00);
          i++;
        } else {
          c = 0xfffd;
        }
      }
      if (c < 0x80) bytes.push(c);
      else if (c < 0x800) bytes.push(0xc0 | (c >> 6), 0x80 | (c & 63));
      else if (c < 0x10000) bytes.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
      else bytes.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    }
    return new Uint8Array(bytes);
  }
}

class Utf8Decoder {
  decode(bytes = []) {
    let text = '';
    for (let i = 0; i < bytes.length; ) {
      const b = bytes[i++];
      let c = b;
      if (b >= 0xf0) c = ((b & 7) << 18) | ((bytes[i++] & 63) << 12) | ((bytes[i++] & 63) << 6) | (bytes[i++] & 63);
      else if (b >= 0xe0) c = ((b & 15) << 12) | ((bytes[i++] & 63) << 6) | (bytes[i++] & 63);
      else if (b >= 0xc0) c = ((b & 31) << 6) | (bytes[i++] & 63);
      text += c < 0x10000 ? String.fromCharCode(c) : String.fromCharCode(0xd800 + ((c - 0x10000) >> 10), 0xdc00 + ((c - 0x10000) & 1023));
    }
    return text;
  }
}

const NativeTextEncoder = theGlobal.TextEncoder;
const NativeTextDecoder = theGlobal.TextDecoder;
const TextEncoderHere = typeof NativeTextEncoder === 'function' ? NativeTextEncoder : Utf8Encoder;
const TextDecoderHere = typeof NativeTextDecoder === 'function' ? NativeTextDecoder : Utf8Decoder;
export { TextEncoderHere as TextEncoder, TextDecoderHere as TextDecoder };
