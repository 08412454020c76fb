'use strict';

/**
 * Formats a number of seconds as m:ss, or h:mm:ss from one hour on.
 * @param {number} totalSeconds a whole, non-negative number of seconds
 * @returns {string}
 */
function formatDuration(totalSeconds) {
  if (!Number.isInteger(totalSeconds) || totalSeconds < 0) {
    throw new RangeError(`not a duration in seconds: ${totalSeconds}`);
  }
  const hours = Math.floor(totalSeconds / 3600);
  const minutes = Math.floor((totalSeconds % 3600) / 60);
  const seconds = String(totalSeconds % 60);
  if (hours > 0) {
    return `${hours}:${String(minutes).padStart(2, '0')}:${seconds}`;
  }
  return `${minutes}:${seconds}`;
}

/** The sum of several durations, formatted. */
function formatTotal(durations) {
  return formatDuration(durations.reduce((sum, d) => sum + d, 0));
}

module.exports = { formatDuration, formatTotal };
