// The node pack's `lint` check: the project's TypeScript type check and ESLint, run one
// after the other, their findings written as one SARIF 2.1.0 log (one run per tool) that
// looprun's sarif parser reads, so both reach the loop through one observer with the
// same place, rule and message for each finding.
//
//   node looprun_lint.mjs OUT.sarif [::tsc WORD...] [::eslint WORD...]
//
// Each tool is a program and its arguments (no shell): `::tsc` output lines
// `file(line,col): error TSxxxx: message` (`--pretty false`) are read; `::eslint` gets
// `--format json` appended and its JSON read from stdout. A project configured with
// `.eslintrc*` or package.json's `eslintConfig` only (no eslint.config.*) is linted in
// ESLint's legacy configuration mode, which ESLint 9 needs to be told.
//
// Exit: 0 no error-level finding; 1 findings; 2 a tool ran but could not check (a crash,
// no configuration, output that is not its report), written as an error finding too, so
// the count of errors never drops when a check stops working; 127 a tool not installed.
import { spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { relative, resolve, sep } from 'node:path';

const MAX_OUTPUT = 64 * 1024 * 1024;
const FLAT_CONFIGS = ['js', 'mjs', 'cjs', 'ts', 'mts', 'cts'].map((e) => `eslint.config.${e}`);
const TSC_LINE = /^(?<file>[^\s(][^(\n]*?)\((?<line>\d+),(?<col>\d+)\): (?<level>error|warning) (?<rule>TS\d+): (?<message>.*)$/;
const TSC_GLOBAL = /^(?<level>error|warning) (?<rule>TS\d+): (?<message>.*)$/;

function place(file) {
  const rel = relative(process.cwd(), resolve(file));
  return rel.split(sep).join('/');
}

function result(rule, level, message, file, line, col) {
  const out = { ruleId: rule, level, message: { text: message } };
  if (file) {
    const region = {};
    if (line > 0) region.startLine = line;
    if (col > 0) region.startColumn = col;
    out.locations = [{ physicalLocation: { artifactLocation: { uri: place(file) }, region } }];
  }
  return out;
}

function tail(text) {
  const lines = String(text || '').trim().split('\n').filter((l) => l.trim());
  return lines.slice(-6).join(' | ').slice(0, 1500);
}

function run(words, env) {
  const done = spawnSync(words[0], words.slice(1), {
    encoding: 'utf8',
    maxBuffer: MAX_OUTPUT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return done;
}

// what one tool found: [results, status] (status 0 ran, 2 could not check, 127 missing)
function tsc(words) {
  const done = run(words, process.env);
  if (done.error) return missing('tsc', words, done.error);
  const results = [];
  for (const raw of `${done.stdout}\n${done.stderr}`.split('\n')) {
    const line = raw.trimEnd();
    const m = TSC_LINE.exec(line) || TSC_GLOBAL.exec(line);
    if (!m) continue;
    const g = m.groups;
    results.push(result(g.rule, g.level, g.message, g.file, Number(g.line), Number(g.col)));
  }
  // 2 type errors found; 1 the options or the project file are wrong (no tsconfig.json)
  if (done.status !== 0 && (done.status !== 2 || results.length === 0)) {
    return failed('tsc', done, []);
  }
  return [results, 0];
}

function eslint(words) {
  const env = { ...process.env };
  if (!FLAT_CONFIGS.some((f) => existsSync(f))) env.ESLINT_USE_FLAT_CONFIG = 'false';
  const done = run([...words, '--format', 'json'], env);
  if (done.error) return missing('eslint', words, done.error);
  let doc;
  try {
    doc = JSON.parse(done.stdout);
  } catch {
    doc = null;
  }
  // 0 clean, 1 findings; 2 (a bad configuration, a crash) or anything else: not checked
  if (!Array.isArray(doc) || (done.status !== 0 && done.status !== 1)) {
    return failed('eslint', done, []);
  }
  const results = [];
  for (const file of doc) {
    for (const m of file.messages || []) {
      const level = m.severity === 2 || m.fatal ? 'error' : 'warning';
      const rule = m.ruleId || (m.fatal ? 'eslint/parse-error' : 'eslint');
      results.push(result(rule, level, m.message || '', file.filePath, m.line, m.column));
    }
  }
  return [results, 0];
}

function missing(tool, words, error) {
  const why = error.code === 'ENOENT' ? 'not found' : error.message;
  const text = `${tool} could not start (${words[0]}: ${why})`;
  return [[result(tool, 'error', text)], 127];
}

function failed(tool, done, results) {
  const why = done.signal ? `killed by ${done.signal}` : `exit ${done.status}`;
  const text = `${tool} could not check the project (${why}): ${tail(done.stderr || done.stdout)}`;
  return [[...results, result(tool, 'error', text)], 2];
}

function main(argv) {
  const [out, ...rest] = argv;
  const tools = [];
  for (const word of rest) {
    if (word === '::tsc' || word === '::eslint') tools.push({ name: word.slice(2), words: [] });
    else if (tools.length) tools[tools.length - 1].words.push(word);
  }
  if (!out || tools.length === 0 || tools.some((t) => t.words.length === 0)) {
    process.stderr.write('usage: looprun_lint.mjs OUT.sarif [::tsc WORD...] [::eslint WORD...]\n');
    return 2;
  }
  const runs = [];
  let status = 0;
  let errors = 0;
  for (const tool of tools) {
    const [results, st] = (tool.name === 'tsc' ? tsc : eslint)(tool.words);
    status = Math.max(status, st);
    errors += results.filter((r) => r.level === 'error').length;
    runs.push({ tool: { driver: { name: tool.name } }, results });
    for (const r of results) {
      const loc = r.locations?.[0]?.physicalLocation;
      const where = loc ? `${loc.artifactLocation.uri}:${loc.region.startLine ?? ''}:${loc.region.startColumn ?? ''}: ` : '';
      process.stdout.write(`${where}${r.level} [${r.ruleId}] ${r.message.text}\n`);
    }
  }
  writeFileSync(out, JSON.stringify({ version: '2.1.0', runs }));
  if (status) return status;
  return errors ? 1 : 0;
}

process.exitCode = main(process.argv.slice(2));
