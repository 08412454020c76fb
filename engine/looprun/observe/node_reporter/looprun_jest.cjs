// looprun's reporter for jest (29): the same records as looprun_outcome.mjs writes for node's
// runner, from jest's main process (the test files run in workers or in band). What a test
// prints never reaches these records. The destination (LOOPRUN_JEST_OUTCOME) is taken out of
// the environment before any test runs, and the whole file is written once, at the end of
// the run: whatever a test appended to it earlier is overwritten.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { fileURLToPath } = require('node:url');
const { inspect } = require('node:util');

const MAX_TEXT = 4000;
const FRAME = /(?:\(|\s|^)((?:file:\/\/)?\/[^\s():]+):(\d+)(?::(\d+))?\)?\s*$/;
// spellings that focus a test or a suite: jest then runs only the focused tests of that
// file, so none of its results is the whole file's (counted as not passing, like a skip)
const FOCUS = /(?:^|[^\w$.])(?:fit|fdescribe|(?:it|test|describe)\.only)\s*\(/m;

function bounded(text) {
  const s = String(text ?? '');
  return s.length > MAX_TEXT ? s.slice(0, MAX_TEXT) + '...' : s;
}

class LooprunJest {
  constructor() {
    this.out = process.env.LOOPRUN_JEST_OUTCOME;
    // workers inherit the environment when they start, after this: tests never see it
    delete process.env.LOOPRUN_JEST_OUTCOME;
    this.root = process.cwd();
    this.records = [];
    this.sources = new Map(); // test file -> its text when jest picked it up
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

  frames(stack) {
    const out = [];
    for (const line of String(stack ?? '').split('\n')) {
      const text = line.trim();
      const m = FRAME.exec(text);
      if (!m) continue;
      const file = this.relative(m[1]);
      if (path.isAbsolute(file) || file.split('/').includes('node_modules')) continue;
      out.push({ text: text.replace(m[1], file), file, line: Number(m[2]) });
      if (out.length >= 5) break;
    }
    return out;
  }

  // jest hands over what a test threw as sparse data when it crossed from a worker (an
  // expect() failure keeps its matcher result, the rest only a message): the failure's
  // text (`failureMessages`), which starts with the error's name and holds its stack, fills in
  error(detail, text) {
    const d = detail && typeof detail === 'object' ? detail : {};
    const matcher = d.matcherResult && typeof d.matcherResult === 'object' ? d.matcherResult : null;
    const stack = bounded(d.stack ?? text ?? '');
    const message = String(d.message ?? (matcher ? matcher.message : String(text ?? '')));
    let name = String(d.name ?? '');
    if (!name) {
      const m = /^([A-Z][\w$]*(?:Error|Exception))\b/.exec(String(text ?? stack));
      name = m ? m[1] : '';
    }
    // jest prints node's assert failures as "assert.equal(received, expected)"
    const assertion = matcher || d.code === 'ERR_ASSERTION' || /^assert[.(]/.test(message);
    const out = {
      failure_type: 'testCodeFailure',
      error_name: assertion ? 'AssertionError' : name,
      error_code: d.code !== undefined ? String(d.code) : '',
      message: bounded(message.split('\n    at ')[0]),
      stack,
    };
    // a matcher's values crossed as JSON (Infinity became null): its message shows them
    if (!matcher && ('expected' in d || 'actual' in d)) {
      out.expected = bounded(inspect(d.expected, { depth: 3 }));
      out.actual = bounded(inspect(d.actual, { depth: 3 }));
    }
    const frames = this.frames(stack);
    out.frames = frames.map((f) => f.text);
    out.at = frames.length ? { file: frames[0].file, line: frames[0].line } : null;
    return out;
  }

  onTestFileStart(test) {
    this.remember(test && test.path);
  }

  onTestStart(test) {
    this.remember(test && test.path);
  }

  remember(file) {
    if (!file || this.sources.has(file)) return;
    try { this.sources.set(file, fs.readFileSync(file, 'utf8')); } catch { this.sources.set(file, ''); }
  }

  onTestResult(test, result) {
    const abs = result.testFilePath;
    this.remember(abs);
    const file = this.relative(abs);
    const focused = FOCUS.test(this.sources.get(abs) ?? '');
    if (result.testExecError) {
      const e = result.testExecError;
      const record = { event: 'fail', file, path: [abs], nesting: 0, whole_file: true };
      Object.assign(record, this.error(e, e.stack ?? e.message));
      record.failure_type = 'loadFailure';
      record.stderr = bounded(`${e.message ?? ''}\n${result.failureMessage ?? ''}`);
      // babel names the place of a syntax error: "/abs/src/x.js: Unexpected token (1:10)"
      const at = /(\/[^\s:]+): [^\n]*\((\d+):\d+\)/.exec(record.message);
      if (!record.at && at) record.at = { file: this.relative(at[1]), line: Number(at[2]) };
      const m = /^([A-Z][\w$]*(?:Error|Exception))\b/m.exec(record.stderr);
      if (!record.error_name && m) record.error_name = m[1];
      this.records.push(record);
    }
    for (const a of result.testResults ?? []) {
      const failed = a.status === 'failed';
      const skipped = a.status === 'pending' || a.status === 'skipped' || a.status === 'disabled';
      const todo = a.status === 'todo';
      const record = {
        event: failed ? 'fail' : 'pass',
        file,
        path: [...(a.ancestorTitles ?? []), a.title],
        nesting: (a.ancestorTitles ?? []).length,
        line: a.location ? a.location.line : null,
        suite: false,
        skip: (skipped || (focused && !failed)) && !todo,
        todo,
        focused,
        junit_name: a.fullName,
      };
      if (failed) {
        const details = a.failureDetails ?? [];
        Object.assign(record, this.error(details[0], (a.failureMessages ?? [])[0]));
      }
      this.records.push(record);
    }
  }

  onRunComplete(contexts, results) {
    if (!this.out) return;
    const counts = {
      tests: results.numTotalTests,
      pass: results.numPassedTests,
      fail: results.numFailedTests,
      skipped: results.numPendingTests + results.numTodoTests,
      suites_failed: results.numFailedTestSuites,
    };
    const lines = [{ event: 'start', reporter: 'looprun-node', root: this.root, runner: 'jest' }];
    lines.push(...this.records, { event: 'end', counts });
    fs.writeFileSync(this.out, lines.map((r) => JSON.stringify(r)).join('\n') + '\n');
  }
}

module.exports = LooprunJest;
