import * as zlib from 'node:zlib';

/** The reflected CRC-32 (IEEE 802.3, polynomial 0xEDB88320) lookup table, one entry per byte value. */
function crcTable(): Uint32Array {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
}

/**
 * CRC-32 in plain TypeScript (about 0.5 GB/s), for Node releases before 20.15 that lack `zlib.crc32`. Same
 * contract as `zlib.crc32`: `value` is the CRC of the bytes before `data`, so CRCs of consecutive parts chain.
 */
export function crc32Portable(data: Uint8Array, value = 0, table: Uint32Array = crcTable()): number {
  let c = ~value >>> 0;
  for (let i = 0; i < data.length; i++) c = table[(c ^ data[i]!) & 0xff]! ^ (c >>> 8);
  return ~c >>> 0;
}

/**
 * The CRC-32 function to use: Node's native `zlib.crc32` (several GB/s) when present, else `crc32Portable` with its
 * table built once for the returned closure. Call once per codec, not per frame.
 */
export function crc32Function(): (data: Uint8Array, value?: number) => number {
  if (typeof zlib.crc32 === 'function') return (data, value = 0) => zlib.crc32(data, value);
  const table = crcTable();
  return (data, value = 0) => crc32Portable(data, value, table);
}
