import { flowMatchSigmas } from './flow-match-euler';
import { checkNoEta, checkStepsAndShift, StepGuard, type Sampler, type SamplerState } from './sampler';

/**
 * UniPC multistep sampler (Zhao, Bai, Rao, Zhou, Lu 2023, "UniPC: A Unified Predictor-Corrector Framework for Fast
 * Sampling of Diffusion Models"), order 2, B(h) = e^h − 1 ("bh2"), data prediction, in the flow-matching form of
 * Wan 2.1's `FlowUniPCMultistepScheduler` (wan/utils/fm_solvers_unipc.py, "copied from diffusers v0.31.0
 * src/diffusers/schedulers/scheduling_unipc_multistep.py, converted for flow matching") with the configuration Wan
 * samples with: solver_order = 2, predict_x0 = true, prediction_type = "flow_prediction", solver_type = "bh2",
 * lower_order_final = true, final_sigmas_type = "zero", disable_corrector = [] (configurable), no thresholding.
 *
 * Flow parameterisation: α(σ) = 1 − σ, σ(σ) = σ, λ(σ) = log α − log σ; the velocity v is converted to the data
 * prediction m = x − σ·v (upstream `convert_model_output`, from the sample the model saw). With h = λ_t − λ_s,
 * hh = −h, hφ₁ = e^{hh} − 1 and B(h) = e^{hh} − 1:
 *
 *  - UniP-p (predictor, σ_s = σ_i → σ_t = σ_{i+1}):
 *      x_t = (σ_t/σ_s)·x_s − α_t·hφ₁·m_s − α_t·B(h)·ρ·D₁,   D₁ = (m_{i−1} − m_s)/r,  r = (λ_{i−1} − λ_s)/h,
 *    with ρ = 1/2 for p = 2 (upstream's "simplified version") and no D₁ term for p = 1 (= DDIM / DPM-Solver-1,
 *    which for rectified flow is exactly the Euler step x_s + (σ_t − σ_s)·v).
 *  - UniC-p (corrector, applied when the model output m_t at the predicted x_t arrives, i.e. at the start of the
 *    next step, to the previous predictor's result; never to the final output):
 *      x_t^c = (σ_t/σ_s)·x_s − α_t·hφ₁·m_s − α_t·B(h)·(ρ₀·D₁ + ρ₁·(m_t − m_s)),
 *    ρ = [1/2] for p = 1; for p = 2, [[1, 1], [r, 1]]·ρ = b with b_k from the φ-function recursion
 *    (b₁ = (hφ₁/hh − 1)/B(h), b₂ = 2·((hφ₁/hh − 1)/hh − 1/2)/B(h)).
 *    The model output at x_t is computed from the *uncorrected* x_t (as upstream); only the sample carried forward
 *    is corrected. `disableCorrector` holds predictor-step indices k whose result is not corrected (upstream skips
 *    UniC at step k + 1 when k ∈ disable_corrector).
 *  - Orders: the predictor at step i uses p_i = min(2, i + 1 (warm-up), N − i (lower_order_final)); UniC at step i
 *    uses p_{i−1}. diffusers' UniPC applies lower_order_final to the last step for any N (its "< 15 steps" note is
 *    DPM-Solver's rule, not in UniPC's code); it is also required here, since an order-2 step to σ = 0 (λ = +∞)
 *    would divide by r = 0.
 *  - σ = 0 (final step, λ = +∞): h = +∞, hφ₁ = −1, so x_N = m_{N−1}, the last data prediction (as upstream).
 *
 * Sigma schedule: by default the same as omnirx's Euler, `flowMatchSigmas(steps, shift)` = Wan's
 * `get_sampling_sigmas` (σ = 1 − i/N for i < N, time-shifted σ' = s·σ/(1 + (s − 1)·σ), then 0). Wan's own
 * `FlowUniPCMultistepScheduler(shift=1).set_timesteps(N, shift=s)` instead takes `np.linspace(sigma_max, 0, N+1)[:-1]`
 * with sigma_max = float32(0.999) (the top of its 1000-entry training table, `WAN_UNIPC_SIGMA_MAX`), then shifts;
 * pass `sigmaMax: WAN_UNIPC_SIGMA_MAX` to reproduce it (the two differ by ~3e-4 … 8e-3 relative in the samples on
 * the parity fixture). Wan also keeps its sigmas, samples and coefficients in float32; here coefficients are
 * float64 and the state is float32.
 *
 * σ₀ = 1 (λ₀ = −∞), which Wan never evaluates: step 0 is the exact Euler step; wherever the σ = 1 data prediction
 * would enter a later order-2 step as a history point, r = ±∞ and we use the limit λ₀ → −∞: the term drops out
 * (predictor: D₁ → 0; corrector: ρ₀ → 0, ρ₁ → b₁). Upstream's code would divide by ±∞ (harmless) and then call
 * `torch.linalg.solve` on a matrix holding −∞ (NaN). The limit is approached slowly (like 1/|λ₀|), so σ_max = 1 is a
 * genuinely different schedule from Wan's 0.999.
 *
 * The model is called by the caller at t = σ·1000 as a float; Wan's multistep solvers cast t to int64.
 * Deterministic: `rng` is not used.
 */

/** float32(0.999): the largest sigma of Wan's `FlowUniPCMultistepScheduler` training table (shift 1). */
export const WAN_UNIPC_SIGMA_MAX = Math.fround(0.999);

export interface UniPCOptions {
  /**
   * Largest sigma before the time shift, in (0, 1]. 1 (default): omnirx's / Wan's `get_sampling_sigmas` schedule,
   * identical to the Euler sampler's. `WAN_UNIPC_SIGMA_MAX`: Wan's `FlowUniPCMultistepScheduler.set_timesteps`.
   */
  sigmaMax?: number;
  /** Predictor steps k whose result UniC does not correct (upstream `disable_corrector`); non-negative integers. */
  disableCorrector?: readonly number[];
}

/**
 * UniPC's schedule, N + 1 sigmas ending in 0: shift(sigmaMax·(1 − i/N)) for i < N (np.linspace(sigmaMax, 0, N+1)[:-1]
 * shifted). sigmaMax = 1 returns `flowMatchSigmas(steps, shift)` itself.
 */
export function uniPCSigmas(steps: number, shift: number, sigmaMax = 1): Float64Array {
  checkStepsAndShift('unipc', steps, shift);
  if (!(sigmaMax > 0 && sigmaMax <= 1)) throw new RangeError(`unipc: sigmaMax must be in (0, 1], got ${sigmaMax}`);
  if (sigmaMax === 1) return flowMatchSigmas(steps, shift);
  const sigmas = new Float64Array(steps + 1);
  for (let i = 0; i < steps; i++) {
    const s = sigmaMax * (1 - i / steps);
    sigmas[i] = (shift * s) / (1 + (shift - 1) * s);
  }
  sigmas[steps] = 0;
  return sigmas;
}

/** λ(σ) = log(1 − σ) − log σ: −∞ at σ = 1, +∞ at σ = 0. */
function lambda(sigma: number): number {
  return Math.log(1 - sigma) - Math.log(sigma);
}

/** hφ₁ = B(h) (bh2) and b₁, b₂ of the φ-function recursion, for h = λ_t − λ_s (predict_x0: hh = −h). */
function phiCoefficients(h: number): { hPhi1: number; bH: number; b1: number; b2: number } {
  const hh = -h;
  const hPhi1 = Math.expm1(hh);
  const bH = hPhi1; // bh2: B(h) = expm1(hh)
  let hPhiK = hPhi1 / hh - 1;
  const b1 = hPhiK / bH; // factorial 1
  hPhiK = hPhiK / hh - 1 / 2;
  const b2 = (hPhiK * 2) / bH; // factorial 2
  return { hPhi1, bH, b1, b2 };
}

/** One step's update, x_next = cX·x + cM·m + cD·(m_prev − m) (predictor) or the corrector's analogue. */
interface PredictorCoefficients {
  /** σ_t/σ_s on the (corrected) current sample. */
  cX: number;
  /** −α_t·hφ₁ on the current data prediction. */
  cM: number;
  /** −α_t·B(h)·ρ/r on (m_{i−1} − m_i); 0 for order 1 or when m_{i−1} is the σ = 1 point (limit). */
  cD: number;
}

interface CorrectorCoefficients {
  /** σ_t/σ_s on the previous (corrected) sample. */
  cX: number;
  /** −α_t·hφ₁ on m_{i−1}. */
  cM: number;
  /** −α_t·B(h)·ρ₀/r on (m_{i−2} − m_{i−1}); 0 for order 1 or in the σ = 1 limit. */
  cD: number;
  /** −α_t·B(h)·ρ₁ on (m_i − m_{i−1}). */
  cT: number;
}

/** State of one UniPC run (see `uniPCSampler`). */
export class UniPCState implements SamplerState {
  readonly sigmas: Float64Array;
  /** The full schedule: `sigmas` followed by the terminal 0. */
  readonly schedule: Float64Array;
  /** Predictor order of each step (1 or 2). */
  readonly orders: readonly number[];
  private readonly predictor: PredictorCoefficients[] = [];
  /** corrector[i]: UniC applied at the start of step i (to the result of step i − 1), or undefined. */
  private readonly corrector: (CorrectorCoefficients | undefined)[] = [];
  private readonly guard: StepGuard;
  /** Data predictions m_{i−1} (newest) and m_{i−2}; float32 like upstream's model dtype. */
  private mPrev: Float32Array | undefined;
  private mOld: Float32Array | undefined;
  /** The previous step's (corrected) sample x_{i−1}, which UniC restarts from. */
  private last: Float32Array | undefined;

  constructor(steps: number, shift: number, options: UniPCOptions) {
    const disabled = new Set<number>();
    for (const k of options.disableCorrector ?? []) {
      if (!Number.isInteger(k) || k < 0) throw new RangeError(`unipc: disableCorrector entries must be non-negative integers, got ${k}`);
      disabled.add(k);
    }
    const sched = uniPCSigmas(steps, shift, options.sigmaMax ?? 1);
    this.schedule = sched;
    this.sigmas = sched.slice(0, steps);
    this.guard = new StepGuard('unipc', steps);
    const lam = Array.from(sched, lambda);
    const orders: number[] = [];
    for (let i = 0; i < steps; i++) orders.push(Math.min(2, i + 1, steps - i));
    this.orders = orders;

    for (let i = 0; i < steps; i++) {
      // UniP: σ_i → σ_{i+1}
      {
        const h = lam[i + 1] - lam[i];
        const alphaT = 1 - sched[i + 1];
        const { hPhi1, bH } = phiCoefficients(h);
        let cD = 0;
        if (orders[i] === 2) {
          const r = (lam[i - 1] - lam[i]) / h;
          if (Number.isFinite(r)) cD = (-alphaT * bH * 0.5) / r;
        }
        this.predictor.push({ cX: sched[i + 1] / sched[i], cM: -alphaT * hPhi1, cD });
      }
      // UniC at step i corrects step i − 1's result, with that step's order
      if (i === 0 || disabled.has(i - 1)) {
        this.corrector.push(undefined);
        continue;
      }
      const order = orders[i - 1];
      const h = lam[i] - lam[i - 1];
      const alphaT = 1 - sched[i];
      const { hPhi1, bH, b1, b2 } = phiCoefficients(h);
      let rho0 = 0;
      let rho1 = 0.5; // order 1: upstream's "simplified version"
      let r = Infinity;
      if (order === 2) {
        r = (lam[i - 2] - lam[i - 1]) / h;
        if (Number.isFinite(r)) {
          // [[1, 1], [r, 1]]·[ρ₀, ρ₁] = [b₁, b₂]
          rho0 = (b2 - b1) / (r - 1);
          rho1 = b1 - rho0;
        } else {
          rho1 = b1; // limit r → ±∞ (m_{i−2} at σ = 1)
        }
      }
      this.corrector.push({
        cX: sched[i] / sched[i - 1],
        cM: -alphaT * hPhi1,
        cD: rho0 === 0 ? 0 : (-alphaT * bH * rho0) / r,
        cT: -alphaT * bH * rho1,
      });
    }
  }

  step(x: Float32Array, v: Float32Array, i: number): void {
    this.guard.check(x, v, i);
    const n = x.length;
    if (this.mPrev === undefined) {
      this.mPrev = new Float32Array(n);
      this.mOld = new Float32Array(n);
      this.last = new Float32Array(n);
    }
    const mPrev = this.mPrev; // m_{i−1}
    const mOld = this.mOld!; // m_{i−2}; receives m_i
    const last = this.last!;
    const sigma = this.sigmas[i];
    const p = this.predictor[i];
    const c = this.corrector[i];
    if (c !== undefined) {
      for (let j = 0; j < n; j++) {
        const m = x[j] - sigma * v[j]; // data prediction from the uncorrected sample the model saw
        const m1 = mPrev[j];
        const xc = c.cX * last[j] + c.cM * m1 + c.cD * (mOld[j] - m1) + c.cT * (m - m1);
        last[j] = xc;
        mOld[j] = m;
        x[j] = p.cX * xc + p.cM * m + p.cD * (m1 - m);
      }
    } else {
      for (let j = 0; j < n; j++) {
        const m = x[j] - sigma * v[j];
        const xc = x[j];
        last[j] = xc;
        mOld[j] = m;
        x[j] = p.cX * xc + p.cM * m + p.cD * (mPrev[j] - m);
      }
    }
    // the buffer that received m_i becomes the newest history entry
    this.mOld = mPrev;
    this.mPrev = mOld;
  }
}

export interface UniPCSampler extends Sampler {
  create(steps: number, shift: number, rng?: () => number, eta?: number): UniPCState;
}

/** UniPC-2 (bh2) sampler; see the module documentation for the formulas, schedule and sources. */
export function uniPCSampler(options: UniPCOptions = {}): UniPCSampler {
  const opts: UniPCOptions = { sigmaMax: options.sigmaMax, disableCorrector: options.disableCorrector?.slice() };
  // validate eagerly so a bad configuration fails where it is built
  if (opts.sigmaMax !== undefined && !(opts.sigmaMax > 0 && opts.sigmaMax <= 1))
    throw new RangeError(`unipc: sigmaMax must be in (0, 1], got ${opts.sigmaMax}`);
  for (const k of opts.disableCorrector ?? []) {
    if (!Number.isInteger(k) || k < 0) throw new RangeError(`unipc: disableCorrector entries must be non-negative integers, got ${k}`);
  }
  return {
    name: 'unipc',
    create(steps: number, shift: number, _rng?: () => number, eta?: number): UniPCState {
      checkNoEta('unipc', eta);
      return new UniPCState(steps, shift, opts);
    },
  };
}

/** UniPC-2 bh2 on omnirx's Euler schedule (σ_max = 1), corrector always on. */
export const uniPC: UniPCSampler = uniPCSampler();
