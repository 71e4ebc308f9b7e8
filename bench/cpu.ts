import { readFileSync } from 'node:fs';
import * as os from 'node:os';

/** "AMD EPYC (family 25, model 17: Zen 4)" from /proc/cpuinfo; the microarchitecture decides the FMA peak. */
export function cpuDescription(): string {
  try {
    const info = readFileSync('/proc/cpuinfo', 'utf8');
    const field = (k: string): string => new RegExp(`^${k}\\s*:\\s*(.*)$`, 'm').exec(info)?.[1]?.trim() ?? '?';
    const family = Number(field('cpu family'));
    const model = Number(field('model'));
    const vendor = field('vendor_id');
    let arch = '';
    if (vendor === 'AuthenticAMD' && family === 25)
      arch =
        (model >= 0x10 && model <= 0x1f) || (model >= 0x60 && model <= 0x7f) || model >= 0xa0
          ? 'Zen 4: AVX-512 on 256-bit units, 32 fp32 FLOP/cycle/core'
          : 'Zen 3';
    else if (vendor === 'AuthenticAMD' && family === 26) arch = 'Zen 5: 512-bit units, 64 fp32 FLOP/cycle/core';
    return `${field('model name')} (family ${family}, model ${model}${arch ? `: ${arch}` : ''})`;
  } catch {
    return os.cpus()[0]?.model ?? '?';
  }
}
