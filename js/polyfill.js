// weblocks, the polyfill: `import 'weblocks/polyfill'` installs `navigator.locks`, `LockManager` and
// `Lock` where `navigator.locks` is missing (e.g. plain-http pages), and leaves a native one alone.
import { install } from './index.js';

install();
