// looprun's reporter for Node's test runner (node:test).
//
// It runs in the runner's own process (the test files run in child processes), reads the
// runner's event stream and writes one JSON object per line: a "start" record, one record
// per finished test (leaf tests and the suites, hooks or files that failed on their own),
// and an "end" record with the runner's totals once the stream is over. Text a test prints
// reaches this reporter as test:stdout/test:stderr events and is never read as a verdict.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { inspect } from 'node:util';

const ROOT = process.cwd();
const MAX_TEXT = 4000;
const FRAME = /(?:\(|\s|^)((?:file:\/\/)?\/[^\s():]+):(\d+)(?::(\d+))?\)?\s*$/;

function bounded(text) {
  const s = String(text ?? '');
  return s.length > MAX_TEXT ? s.slice(0, MAX_TEXT) + '...' : s;
}

function relative(file) {
  if (!file) return '';
  let p = String(file);
  if (p.startsWith('file://')) {
    try { p = fileURLToPath(p); } catch { return p; }
  }
  if (!path.isAbsolute(p)) return p.split(path.sep).join('/');
  const rel = path.relative(ROOT, p);
  if (rel.startsWith('..') || path.isAbsolute(rel)) return p;
  return rel.split(path.sep).join('/');
}

// the first place in the project (not node's internals, not node_modules) a stack names
function where(stack) {
  for (const line of String(stack ?? '').split('\n')) {
    const m = FRAME.exec(line.trim());
    if (!m) continue;
    const file = relative(m[1]);
    if (path.isAbsolute(file) || file.split('/').includes('node_modules')) continue;
    return { file, line: Number(m[2]) };
  }
  return null;
}

// the stack's lines that point into the project, with paths relative to its root
function projectFrames(stack, limit = 5) {
  const out = [];
  for (const line of String(stack ?? '').split('\n').slice(1)) {
    const text = line.trim();
    const m = FRAME.exec(text);
    if (!m) continue;
    const file = relative(m[1]);
    if (path.isAbsolute(file) || file.split('/').includes('node_modules')) continue;
    out.push(text.replace(m[1], file));
    if (out.length >= limit) break;
  }
  return out;
}

function describeError(error) {
  // the runner wraps what a test threw in ERR_TEST_FAILURE, with the thrown value as cause
  const failureType = error?.failureType ?? '';
  const cause = error && error.code === 'ERR_TEST_FAILURE' && 'cause' in error ? error.cause : error;
  const isError = cause instanceof Error || (cause && typeof cause === 'object' && 'stack' in cause);
  const out = {
    failure_type: failureType,
    error_name: isError ? String(cause.name ?? '') : '',
    error_code: isError && cause.code !== undefined ? String(cause.code) : '',
    message: bounded(isError ? cause.message : inspect(cause, { depth: 2 })),
    stack: bounded(isError ? cause.stack : ''),
  };
  if (isError && ('expected' in cause || 'actual' in cause)) {
    out.expected = bounded(inspect(cause.expected, { depth: 3 }));
    out.actual = bounded(inspect(cause.actual, { depth: 3 }));
    out.operator = String(cause.operator ?? '');
  }
  out.frames = projectFrames(out.stack);
  // a syntax error names its place on the stack's first line: "/abs/file.js:3"
  out.at = where(out.stack) ?? where(String(out.stack).split('\n')[0]);
  return out;
}

export default async function* looprunOutcome(source) {
  const started = new Map(); // file -> names of the tests open at each nesting level
  const counts = {};
  const stderr = new Map(); // file -> what its process wrote to stderr (bounded)
  yield JSON.stringify({ event: 'start', reporter: 'looprun-node', root: ROOT, node: process.version }) + '\n';
  for await (const { type, data } of source) {
    if (type === 'test:start') {
      const names = started.get(data.file ?? '') ?? [];
      names.length = data.nesting;
      names.push(data.name);
      started.set(data.file ?? '', names);
      continue;
    }
    if (type === 'test:stderr') {
      const seen = stderr.get(data.file ?? '') ?? '';
      if (seen.length < MAX_TEXT) stderr.set(data.file ?? '', seen + String(data.message ?? ''));
      continue;
    }
    if (type === 'test:diagnostic') {
      const m = /^(tests|suites|pass|fail|cancelled|skipped|todo) (\d+)$/.exec(String(data.message));
      if (m && data.nesting === 0) counts[m[1]] = Number(m[2]);
      continue;
    }
    if (type !== 'test:pass' && type !== 'test:fail') continue;
    const details = data.details ?? {};
    const names = (started.get(data.file ?? '') ?? []).slice(0, data.nesting);
    const record = {
      event: type === 'test:pass' ? 'pass' : 'fail',
      file: relative(data.file),
      path: [...names, String(data.name)],
      nesting: data.nesting,
      line: data.line ?? null,
      suite: details.type === 'suite',
      skip: data.skip !== undefined && data.skip !== false,
      todo: data.todo !== undefined && data.todo !== false,
      duration_ms: details.duration_ms ?? null,
    };
    // a file whose process failed before it ran its tests (a syntax error, a missing
    // module) is reported as one test named after the file, its error on the stderr
    record.whole_file = data.nesting === 0 && data.file !== undefined && data.name === data.file;
    if (type === 'test:fail') {
      Object.assign(record, describeError(details.error));
      if (record.whole_file) {
        record.stderr = bounded(stderr.get(data.file) ?? '');
        record.at = record.at ?? where(record.stderr.split('\n')[0]);
      }
    }
    yield JSON.stringify(record) + '\n';
  }
  yield JSON.stringify({ event: 'end', counts }) + '\n';
}
