'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { formatDuration, formatTotal } = require('../src/duration');

test.describe('formatDuration', () => {
  test.it('formats minutes and seconds', () => {
    assert.equal(formatDuration(75), '1:15');
  });

  test.it('formats hours from one hour on', () => {
    assert.equal(formatDuration(3750), '1:02:30');
  });

  test.it('refuses a negative duration', () => {
    assert.throws(() => formatDuration(-1), RangeError);
  });
});

test('formatTotal adds the durations up', () => {
  assert.equal(formatTotal([30, 45, 600]), '11:15');
});
