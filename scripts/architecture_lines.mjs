// Every module of the crate, the shim and the simulated world has its line in docs/ARCHITECTURE.md: prints
// each one that has none and exits 1 (the test command's `architecture` step). A module is named there by its
// path, or by its file name (`mod.rs` by its folder's path, or its folder's name, as `participant/`).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** The folders whose modules need a line, and whether their subfolders do too. */
const FOLDERS = [
  { dir: 'src', ext: '.rs', deep: true },
  { dir: 'js', ext: '.js', deep: false },
  { dir: 'tests/protocol_sim/world', ext: '.rs', deep: true },
];

function modules({ dir, ext, deep }) {
  return fs.readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const file = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return deep ? modules({ dir: file, ext, deep }) : [];
    return entry.name.endsWith(ext) ? [file] : [];
  });
}

const escape = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/** Whether `doc` names `file`: its path, or its name as a whole word (not a part of another name). */
function named(doc, file) {
  if (doc.includes(file)) return true;
  if (path.basename(file) === 'mod.rs' && doc.includes(`${path.dirname(file)}/`)) return true;
  const base = path.basename(file);
  const name = base === 'mod.rs' ? `${path.basename(path.dirname(file))}/` : base;
  return new RegExp(`(^|[^\\w/.-])${escape(name)}($|[^\\w-])`, 'm').test(doc);
}

const doc = fs.readFileSync(path.join(root, 'docs', 'ARCHITECTURE.md'), 'utf8');
const missing = FOLDERS.flatMap(modules).filter((file) => !named(doc, file));
for (const file of missing) console.log(`${file} has no line in docs/ARCHITECTURE.md`);
console.log(missing.length === 0 ? 'every module has its line in docs/ARCHITECTURE.md' : `${missing.length} modules without a line`);
process.exit(missing.length === 0 ? 0 : 1);
