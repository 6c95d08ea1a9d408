/**
 * Number formatting shared by the panel, the renderer and the status bar.
 */

/** A duration in milliseconds, with a unit that keeps 3 significant digits. */
export function formatMs(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms)) {
    return '–';
  }
  if (ms < 1) {
    return `${(ms * 1000).toFixed(ms < 0.01 ? 1 : 0)} µs`;
  }
  if (ms < 10) {
    return `${ms.toFixed(2)} ms`;
  }
  if (ms < 1000) {
    return `${ms.toFixed(1)} ms`;
  }
  return `${(ms / 1000).toFixed(2)} s`;
}

/** A fraction as a percentage with one decimal. */
export function formatShare(share: number): string {
  return `${(share * 100).toFixed(1)} %`;
}

/** An integer with thousands separators. */
export function formatCount(n: number): string {
  return n.toLocaleString('en-US');
}

/** A short form of a cell id for headers (ids are often UUIDs). */
export function shortId(key: string): string {
  return key.length > 12 ? `${key.slice(0, 8)}…` : key;
}

/** Width of an inline bar, as a CSS percentage clamped to [0, 100]. */
export function barWidth(fraction: number): string {
  const clamped = Math.min(
    1,
    Math.max(0, Number.isFinite(fraction) ? fraction : 0)
  );
  return `${(clamped * 100).toFixed(1)}%`;
}
