import {
  barWidth,
  formatCount,
  formatMs,
  formatShare,
  shortId
} from '../format';

describe('formatMs', () => {
  it.each<[number | null, string]>([
    [0.0042, '4.2 µs'],
    [0.25, '250 µs'],
    [1.333, '1.33 ms'],
    [12.34, '12.3 ms'],
    [999.94, '999.9 ms'],
    [1500, '1.50 s'],
    [null, '–'],
    [NaN, '–']
  ])('formats %p as %p', (ms, text) => {
    expect(formatMs(ms)).toBe(text);
  });
});

describe('other formats', () => {
  it('formats shares, counts, ids and bar widths', () => {
    expect(formatShare(0.4412)).toBe('44.1 %');
    expect(formatCount(1234567)).toBe('1,234,567');
    expect(shortId('abc')).toBe('abc');
    expect(shortId('0123456789abcdef')).toBe('01234567…');
    expect(barWidth(0.5)).toBe('50.0%');
    expect(barWidth(1.7)).toBe('100.0%');
    expect(barWidth(-1)).toBe('0.0%');
    expect(barWidth(NaN)).toBe('0.0%');
  });
});
