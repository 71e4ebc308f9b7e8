/**
 * Wan's 3D rotary tables (diffusers `WanRotaryPosEmbed`): the head dim D is split into a frame part
 * D − 4·⌊D/6⌋ and height/width parts 2·⌊D/6⌋ each; pair i of an axis part of size d rotates by
 * pos · θ^(−2i/d). Returns cos and sin tables `[L, D/2]` (float32), L = frames·height·width, for tokens in (f, h, w)
 * order. Frame f of the block rotates by position `frameStart + f` (the ABSOLUTE frame index; 0 for a whole clip,
 * the chunk's first frame in `CausalWanDiT`), rows and columns by their index.
 * @param frameStart absolute index of the first frame (default 0).
 */
export function wanRopeTables(frames: number, height: number, width: number, headDim: number, theta: number, frameStart = 0): { cos: Float32Array; sin: Float32Array } {
  const hw = 2 * Math.floor(headDim / 6);
  const parts = [headDim - 2 * hw, hw, hw];
  const freqs = parts.map((d) => Array.from({ length: d / 2 }, (_, i) => 1 / theta ** ((2 * i) / d)));
  const half = headDim / 2;
  const L = frames * height * width;
  const cos = new Float32Array(L * half);
  const sin = new Float32Array(L * half);
  let l = 0;
  for (let f = 0; f < frames; f++)
    for (let y = 0; y < height; y++)
      for (let x = 0; x < width; x++, l++) {
        const pos = [frameStart + f, y, x];
        let p = 0;
        for (let axis = 0; axis < 3; axis++)
          for (const fr of freqs[axis]) {
            const angle = pos[axis] * fr;
            cos[l * half + p] = Math.cos(angle);
            sin[l * half + p] = Math.sin(angle);
            p++;
          }
      }
  return { cos, sin };
}

/**
 * Sinusoidal timestep embedding `[freqDim]` as in Wan (`sinusoidal_embedding_1d`) and diffusers `Timesteps` with
 * flip_sin_to_cos=True, downscale_freq_shift=0: [cos(t·ωᵢ), sin(t·ωᵢ)], ωᵢ = 10000^(−i/half).
 * @param t timestep in [0, 1000] (σ · 1000)
 */
export function timestepEmbedding(t: number, freqDim: number): Float32Array {
  const half = freqDim / 2;
  const out = new Float32Array(freqDim);
  for (let i = 0; i < half; i++) {
    const w = Math.exp((-Math.log(10000) * i) / half);
    out[i] = Math.cos(t * w);
    out[half + i] = Math.sin(t * w);
  }
  return out;
}
