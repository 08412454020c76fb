// looprun's reporter for vitest (3.x): the same records as looprun_outcome.mjs writes for
// node's runner, written by vitest's main process (the tests run in workers) to the file
// named by LOOPRUN_VITEST_OUTCOME. What a test prints never reaches these records.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const MAX_TEXT = 4000;
const FRAME = /(?:\(|\s|^)((?:file:\/\/)?\/[^\s():]+):(\d+)(?::(\d+))?\)?\s*$/;

function bounded(text) {
  const s = String(text ?? '');
  return s.length > MAX_TEXT ? s.slice(0, MAX_TEXT) + '...' : s;
}

export default class LooprunVitest {
  constructor() {
    this.out = process.env.LOOPRUN_VITEST_OUTCOME;
    this.root = process.cwd();
  }

  relative(file) {
    let p = String(file ?? '');
    if (p.startsWith('file://')) {
      try { p = fileURLToPath(p); } catch { return p; }
    }
    if (!path.isAbsolute(p)) return p.split(path.sep).join('/');
    const rel = path.relative(this.root, p);
    if (rel.startsWith('..') || path.isAbsolute(rel)) return p;
    return rel.split(path.sep).join('/');
  }

  // the first place in the project (not node_modules, not node's internals) a stack names
  where(stack) {
    for (const line of String(stack ?? '').split('\n')) {
      const m = FRAME.exec(line.trim());
      if (!m) continue;
      const file = this.relative(m[1]);
      if (path.isAbsolute(file) || file.split('/').includes('node_modules')) continue;
      return { file, line: Number(m[2]) };
    }
    return null;
  }

  frames(stack) {
    const out = [];
    for (const line of String(stack ?? '').split('\n').slice(1)) {
      const text = line.trim();
      const m = FRAME.exec(text);
      if (!m) continue;
      const file = this.relative(m[1]);
      if (path.isAbsolute(file) || file.split('/').includes('node_modules')) continue;
      out.push(text.replace(m[1], file));
      if (out.length >= 5) break;
    }
    return out;
  }

  error(e) {
    const out = {
      failure_type: 'testCodeFailure',
      error_name: String(e?.name ?? ''),
      error_code: e?.code !== undefined ? String(e.code) : '',
      message: bounded(e?.message ?? String(e)),
      stack: bounded(e?.stack ?? ''),
    };
    if (e && ('expected' in e || 'actual' in e)) {
      out.expected = bounded(e.expected);
      out.actual = bounded(e.actual);
    }
    out.frames = this.frames(out.stack);
    out.at = this.where(out.stack);
    // vite names the place of a syntax error in its message: "At file: /src/x.js:1:17"
    const at = /At file: \/?(\S+?):(\d+)(?::\d+)?\s*$/m.exec(out.message);
    if (!out.at && at) out.at = { file: at[1], line: Number(at[2]) };
    return out;
  }

  write(record) {
    if (this.out) fs.appendFileSync(this.out, JSON.stringify(record) + '\n');
  }

  onInit() {
    if (!this.out) return;
    fs.writeFileSync(this.out, '');
    this.write({ event: 'start', reporter: 'looprun-node', root: this.root, runner: 'vitest' });
  }

  onTestRunEnd(modules, unhandled) {
    const counts = { tests: 0, pass: 0, fail: 0, skipped: 0 };
    for (const mod of modules) {
      const file = this.relative(mod.moduleId);
      const moduleErrors = mod.errors();
      if (moduleErrors.length) {
        const record = { event: 'fail', file, path: [mod.moduleId], nesting: 0, whole_file: true };
        Object.assign(record, this.error(moduleErrors[0]));
        record.failure_type = 'loadFailure';
        record.stderr = bounded(moduleErrors.map((e) => `${e.name}: ${e.message}`).join('\n'));
        this.write(record);
      }
      for (const test of mod.children.allTests()) {
        const names = [];
        for (let p = test.parent; p && p.type === 'suite'; p = p.parent) names.unshift(p.name);
        const result = test.result();
        const state = result?.state ?? 'pending';
        const skipped = state === 'skipped' || state === 'pending';
        const record = {
          event: state === 'failed' ? 'fail' : 'pass',
          file,
          path: [...names, test.name],
          nesting: names.length,
          line: test.location?.line ?? null,
          suite: false,
          skip: skipped && test.options?.mode !== 'todo',
          todo: skipped && test.options?.mode === 'todo',
        };
        if (state === 'failed') Object.assign(record, this.error((result.errors ?? [])[0]));
        counts.tests += 1;
        counts[state === 'failed' ? 'fail' : skipped ? 'skipped' : 'pass'] += 1;
        this.write(record);
      }
    }
    for (const e of unhandled ?? []) {
      this.write({ event: 'fail', file: '', path: ['unhandled error'], nesting: 0,
        ...this.error(e), failure_type: 'uncaughtException' });
    }
    this.write({ event: 'end', counts });
  }
}
