"""
Independent PyTorch reference for omnirx's multistep and few-step samplers (src/pipeline/samplers/unipc.ts, dmd.ts).

Written from the upstream definitions, not from omnirx's TypeScript:

* ``FlowUniPCMultistep``: UniPC (Zhao et al. 2023, "UniPC: A Unified Predictor-Corrector Framework for Fast
  Sampling of Diffusion Models") in the flow-matching form of Wan 2.1's ``FlowUniPCMultistepScheduler``
  (``wan/utils/fm_solvers_unipc.py``, itself "copied from diffusers v0.31.0
  ``schedulers/scheduling_unipc_multistep.py``, converted for flow matching"). It keeps the structure of that class
  (``convert_model_output``, ``multistep_uni_p_bh_update``, ``multistep_uni_c_bh_update``, ``step`` with its
  ``model_outputs`` / ``last_sample`` / ``this_order`` / ``lower_order_nums`` bookkeeping) with the configuration Wan
  samples with: ``solver_order=2``, ``predict_x0=True``, ``prediction_type="flow_prediction"``, ``solver_type="bh2"``,
  ``lower_order_final=True``, ``disable_corrector=[]``, ``final_sigmas_type="zero"``, no thresholding, no
  ``solver_p``. Flow parameterisation: alpha_t = 1 − σ, sigma_t = σ, λ = log(alpha_t) − log(sigma_t), and the
  model's velocity v is converted to the data prediction x0 = x − σ·v.
* ``dmd_sample``: the few-step sampling loop of distribution-matching-distilled generators (DMD, Yin et al. 2024;
  CausVid / Self-Forcing ``pipeline/causal_inference.py``): at each listed timestep the generator's flow prediction
  is turned into x0 = x − σ·v (``_convert_flow_pred_to_x0``), then re-noised to the next listed timestep with
  ``FlowMatchScheduler.add_noise`` = (1 − σ_next)·x0 + σ_next·ε, and the last step returns x0.

Differences from upstream, all deliberate and mirrored by omnirx (see tools/reference/README.md):

* Sigma schedule. ``unipc_sigmas(steps, shift)`` with the default ``sigma_max=1`` is omnirx's ``flowMatchSigmas``
  (= Wan's ``get_sampling_sigmas``: linspace(1, 0, N+1)[:N], shifted, + 0). Wan's own
  ``FlowUniPCMultistepScheduler(shift=1).set_timesteps(N, shift=s)`` starts from its 1000-entry training table, whose
  largest sigma is float32(0.999): linspace(0.999, 0, N+1)[:N], shifted, + 0. ``sigma_max=WAN_SIGMA_MAX`` reproduces
  that schedule exactly (up to Wan casting the sigmas to float32).
* σ = 1 (λ = −∞). Wan never evaluates at σ = 1. With σ₀ = 1 its code divides by rk = ±∞ (harmless: the history
  difference D1 becomes 0) and, at the order-2 UniC of step 2, calls ``torch.linalg.solve`` on a matrix holding −∞,
  which returns NaN. We use the limit λ₀ → −∞ instead: the σ = 1 history point drops out of the system (its ρ → 0,
  the remaining ρ solve the system without that column and without the highest-power row).
* bh1 at σ_next = 0: upstream subtracts alpha_t·B_h·0 with B_h = −inf (NaN); the predictor here skips the empty
  term. Only the diagnostics use bh1.
* The timestep handed to the model is the float t = σ·1000 (Wan's multistep solvers cast it to int64); the sampler
  itself never sees t.
* Everything runs in the dtype you pass (float64 for the fixtures; Wan runs float32).
"""

from __future__ import annotations

import math
from typing import Callable, List, Optional, Sequence

import numpy as np
import torch

NUM_TRAIN_TIMESTEPS = 1000

# FlowUniPCMultistepScheduler.__init__: alphas = np.linspace(1, 1/1000, 1000)[::-1]; sigmas = 1 - alphas (float32);
# sigma_max = sigmas[0].item()
WAN_SIGMA_MAX = float(torch.from_numpy(1.0 - np.linspace(1, 1 / NUM_TRAIN_TIMESTEPS, NUM_TRAIN_TIMESTEPS)[::-1].copy()).to(torch.float32)[0].item())

VelocityModel = Callable[[torch.Tensor, float], torch.Tensor]


def time_shift(sigmas, shift: float):
    """SD3 / Wan time shift σ' = s·σ / (1 + (s − 1)·σ)."""
    return shift * sigmas / (1 + (shift - 1) * sigmas)


def unipc_sigmas(steps: int, shift: float, sigma_max: float = 1.0) -> np.ndarray:
    """``FlowUniPCMultistepScheduler.set_timesteps`` with ``sigma_min = 0`` and ``final_sigmas_type="zero"``, in float64.

    sigma_max = 1 → omnirx's / Wan's ``get_sampling_sigmas`` schedule; sigma_max = WAN_SIGMA_MAX → Wan's UniPC schedule.
    """
    sigmas = np.linspace(sigma_max, 0.0, steps + 1).copy()[:-1]
    sigmas = time_shift(sigmas, shift)
    return np.concatenate([sigmas, [0.0]])


class FlowUniPCMultistep:
    """UniPC-p with B(h) (bh1/bh2) for flow matching, after Wan's ``FlowUniPCMultistepScheduler`` (predict_x0=True).

    ``step(model_output, sample)`` must be called once per entry of ``timesteps`` with the velocity predicted at
    ``sample``; it returns the next sample (corrected by UniC at the start of the following call, as upstream).
    """

    def __init__(
        self,
        steps: int,
        shift: float,
        sigma_max: float = 1.0,
        solver_order: int = 2,
        solver_type: str = "bh2",
        lower_order_final: bool = True,
        disable_corrector: Sequence[int] = (),
        dtype: torch.dtype = torch.float64,
        inf_limit: str = "drop",
    ):
        if solver_type not in ("bh1", "bh2"):
            raise NotImplementedError(solver_type)
        self.solver_order = solver_order
        self.solver_type = solver_type
        self.lower_order_final = lower_order_final
        self.disable_corrector = list(disable_corrector)
        self.dtype = dtype
        self.inf_limit = inf_limit  # "drop" (the λ → −∞ limit) or "solve" (upstream's plain linalg.solve: NaN)
        self.sigmas = torch.tensor(unipc_sigmas(steps, shift, sigma_max), dtype=dtype)
        self.timesteps = self.sigmas[:-1] * NUM_TRAIN_TIMESTEPS
        self.num_inference_steps = steps
        self.model_outputs: List[Optional[torch.Tensor]] = [None] * solver_order
        self.lower_order_nums = 0
        self.last_sample: Optional[torch.Tensor] = None
        self.this_order = 0
        self.step_index = 0

    # -- flow parameterisation -------------------------------------------------------------------------------------
    @staticmethod
    def _sigma_to_alpha_sigma_t(sigma: torch.Tensor):
        return 1 - sigma, sigma

    def _lambda(self, sigma: torch.Tensor) -> torch.Tensor:
        alpha_t, sigma_t = self._sigma_to_alpha_sigma_t(sigma)
        return torch.log(alpha_t) - torch.log(sigma_t)

    def convert_model_output(self, model_output: torch.Tensor, sample: torch.Tensor) -> torch.Tensor:
        """flow_prediction + predict_x0: x0 = x − σ·v."""
        sigma_t = self.sigmas[self.step_index]
        return sample - sigma_t * model_output

    # -- B(h) coefficients shared by UniP and UniC -----------------------------------------------------------------
    def _coefficients(self, h: torch.Tensor, rks: List[torch.Tensor], order: int):
        hh = -h  # predict_x0
        h_phi_1 = torch.expm1(hh)  # h·φ₁(h) = e^h − 1
        h_phi_k = h_phi_1 / hh - 1
        factorial_i = 1
        B_h = hh if self.solver_type == "bh1" else torch.expm1(hh)
        R, b = [], []
        rks_t = torch.stack([*rks, torch.ones((), dtype=self.dtype)]) if rks else torch.ones(1, dtype=self.dtype)
        for i in range(1, order + 1):
            R.append(torch.pow(rks_t, i - 1))
            b.append(h_phi_k * factorial_i / B_h)
            factorial_i *= i + 1
            h_phi_k = h_phi_k / hh - 1 / factorial_i
        return h_phi_1, B_h, torch.stack(R), torch.stack(b)

    def _solve(self, R: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """torch.linalg.solve(R, b); with inf_limit="drop", columns whose rk is ±inf (a history point at σ = 1) get ρ = 0
        and the rest solve the system without those columns and without as many highest-power rows (the limit)."""
        finite = torch.isfinite(R[1]) if R.shape[0] > 1 else torch.ones(R.shape[1], dtype=torch.bool)
        if self.inf_limit == "solve" or bool(finite.all()):
            return torch.linalg.solve(R, b)
        keep = finite.nonzero().flatten()
        n = int(keep.numel())
        rho = torch.zeros(R.shape[1], dtype=R.dtype)
        rho[keep] = torch.linalg.solve(R[:n][:, keep], b[:n])
        return rho

    # -- UniP (predictor) ------------------------------------------------------------------------------------------
    def multistep_uni_p_bh_update(self, sample: torch.Tensor, order: int) -> torch.Tensor:
        m0 = self.model_outputs[-1]
        x = sample
        sigma_t, sigma_s0 = self.sigmas[self.step_index + 1], self.sigmas[self.step_index]
        alpha_t, sigma_t = self._sigma_to_alpha_sigma_t(sigma_t)
        lambda_t, lambda_s0 = self._lambda(self.sigmas[self.step_index + 1]), self._lambda(self.sigmas[self.step_index])
        h = lambda_t - lambda_s0

        rks, D1s = [], []
        for i in range(1, order):
            si = self.step_index - i
            mi = self.model_outputs[-(i + 1)]
            rk = (self._lambda(self.sigmas[si]) - lambda_s0) / h
            rks.append(rk)
            D1s.append((mi - m0) / rk)  # → 0 when rk = ±inf (σ_si = 1)

        h_phi_1, B_h, R, b = self._coefficients(h, rks, order)

        x_t_ = sigma_t / sigma_s0 * x - alpha_t * h_phi_1 * m0
        if D1s:
            D1s_t = torch.stack(D1s, dim=0)  # (K, ...)
            if order == 2:
                rhos_p = torch.tensor([0.5], dtype=x.dtype)  # upstream: "for order 2, we use a simplified version"
            else:
                rhos_p = self._solve(R[:-1, :-1], b[:-1]).to(x.dtype)
            pred_res = torch.einsum("k,k...->...", rhos_p, D1s_t)
            x_t = x_t_ - alpha_t * B_h * pred_res
        else:
            # upstream computes x_t_ − alpha_t·B_h·0, which is NaN for bh1 at σ_next = 0 (B_h = hh = −inf)
            x_t = x_t_
        return x_t.to(x.dtype)

    # -- UniC (corrector) ------------------------------------------------------------------------------------------
    def multistep_uni_c_bh_update(self, this_model_output: torch.Tensor, last_sample: torch.Tensor, order: int) -> torch.Tensor:
        m0 = self.model_outputs[-1]
        x = last_sample
        model_t = this_model_output
        sigma_t, sigma_s0 = self.sigmas[self.step_index], self.sigmas[self.step_index - 1]
        alpha_t, sigma_t = self._sigma_to_alpha_sigma_t(sigma_t)
        lambda_t, lambda_s0 = self._lambda(self.sigmas[self.step_index]), self._lambda(self.sigmas[self.step_index - 1])
        h = lambda_t - lambda_s0

        rks, D1s = [], []
        for i in range(1, order):
            si = self.step_index - (i + 1)
            mi = self.model_outputs[-(i + 1)]
            rk = (self._lambda(self.sigmas[si]) - lambda_s0) / h
            rks.append(rk)
            D1s.append((mi - m0) / rk)

        h_phi_1, B_h, R, b = self._coefficients(h, rks, order)

        if order == 1:
            rhos_c = torch.tensor([0.5], dtype=x.dtype)  # upstream: "for order 1, we use a simplified version"
        else:
            rhos_c = self._solve(R, b).to(x.dtype)

        x_t_ = sigma_t / sigma_s0 * x - alpha_t * h_phi_1 * m0
        corr_res = torch.einsum("k,k...->...", rhos_c[:-1], torch.stack(D1s, dim=0)) if D1s else 0
        D1_t = model_t - m0
        return (x_t_ - alpha_t * B_h * (corr_res + rhos_c[-1] * D1_t)).to(x.dtype)

    # -- one call per model evaluation -----------------------------------------------------------------------------
    def step(self, model_output: torch.Tensor, sample: torch.Tensor) -> torch.Tensor:
        use_corrector = self.step_index > 0 and (self.step_index - 1) not in self.disable_corrector and self.last_sample is not None
        model_output_convert = self.convert_model_output(model_output, sample)  # from the uncorrected sample
        if use_corrector:
            sample = self.multistep_uni_c_bh_update(model_output_convert, self.last_sample, self.this_order)

        for i in range(self.solver_order - 1):
            self.model_outputs[i] = self.model_outputs[i + 1]
        self.model_outputs[-1] = model_output_convert

        if self.lower_order_final:
            this_order = min(self.solver_order, len(self.timesteps) - self.step_index)
        else:
            this_order = self.solver_order
        self.this_order = min(this_order, self.lower_order_nums + 1)  # warmup for multistep
        assert self.this_order > 0

        self.last_sample = sample
        prev_sample = self.multistep_uni_p_bh_update(sample, self.this_order)
        if self.lower_order_nums < self.solver_order:
            self.lower_order_nums += 1
        self.step_index += 1
        return prev_sample


@torch.no_grad()
def unipc_sample(model: VelocityModel, noise: torch.Tensor, steps: int, shift: float, **kwargs) -> List[torch.Tensor]:
    """Runs UniPC from ``noise``; returns [x₀, x₁, …, x_N] (x_i = the sample the (i+1)-th model call sees; x_N the output)."""
    sched = FlowUniPCMultistep(steps, shift, dtype=noise.dtype, **kwargs)
    x = noise.clone()
    traj = [x.clone()]
    for i in range(steps):
        v = model(x, float(sched.sigmas[i]))
        x = sched.step(v, x)
        traj.append(x.clone())
    return traj


# ----------------------------------------------------------------------------------------------------------------
# DMD / Self-Forcing few-step sampling
# ----------------------------------------------------------------------------------------------------------------

DEFAULT_DMD_TIMESTEPS = (1000, 750, 500, 250)


def dmd_sigmas(timesteps: Sequence[float], shift: float) -> np.ndarray:
    """σ_k = shift(t_k / 1000) (float64). With shift = 5 this is Self-Forcing's ``warp_denoising_step``."""
    return time_shift(np.asarray(timesteps, dtype=np.float64) / NUM_TRAIN_TIMESTEPS, shift)


def self_forcing_warp(timesteps: Sequence[int], shift: float) -> np.ndarray:
    """Self-Forcing's warp as written upstream (float32): FlowMatchScheduler(shift, sigma_min=0, extra_one_step=True)
    .set_timesteps(1000) then ``cat(timesteps, [0])[1000 - t]``. Returns warped σ = t_warped / 1000 (for the diagnostics)."""
    sig = torch.linspace(1.0, 0.0, NUM_TRAIN_TIMESTEPS + 1)[:-1]
    sig = shift * sig / (1 + (shift - 1) * sig)
    table = torch.cat((sig * NUM_TRAIN_TIMESTEPS, torch.tensor([0.0])))
    return (table[NUM_TRAIN_TIMESTEPS - torch.tensor(list(timesteps), dtype=torch.long)] / NUM_TRAIN_TIMESTEPS).double().numpy()


@torch.no_grad()
def dmd_sample(model: VelocityModel, noise: torch.Tensor, timesteps: Sequence[float], shift: float, renoise: Sequence[torch.Tensor]) -> List[torch.Tensor]:
    """Few-step DMD sampling; ``renoise[k]`` is the ε used to re-noise to step k + 1. Returns [x₀, …, x_K] (x_K = x0 of the last step)."""
    sigmas = dmd_sigmas(timesteps, shift)
    assert len(renoise) == len(sigmas) - 1
    noisy_input = noise.clone()
    traj = [noisy_input.clone()]
    for index, sigma in enumerate(sigmas):
        flow_pred = model(noisy_input, float(sigma))
        denoised_pred = noisy_input - float(sigma) * flow_pred  # _convert_flow_pred_to_x0
        if index < len(sigmas) - 1:
            sigma_next = float(sigmas[index + 1])
            noisy_input = (1 - sigma_next) * denoised_pred + sigma_next * renoise[index]  # FlowMatchScheduler.add_noise
        else:
            noisy_input = denoised_pred
        traj.append(noisy_input.clone())
    return traj


# ----------------------------------------------------------------------------------------------------------------
# Stochastic Euler (η re-noising)
# ----------------------------------------------------------------------------------------------------------------


def euler_eta_sample(model: VelocityModel, noise: torch.Tensor, steps: int, shift: float, eta: float, renoise: Sequence[torch.Tensor]) -> List[torch.Tensor]:
    """Euler on the shifted linspace schedule with DDIM-style re-noising (Song et al. 2021, eq. 12, on the
    rectified-flow interpolant x_σ = (1 − σ)·x₀ + σ·ε): at each step the model's velocity gives the data and noise
    predictions x₀ = x − σ·v and ε̂ = (x − (1 − σ)·x₀)/σ, and the next state keeps the marginal noise level σ' with a
    fresh-noise scale η·σ': x' = (1 − σ')·x₀ + √(σ'² − (η·σ')²)·ε̂ + η·σ'·renoise[k]. η = 0 is the ODE step, η = 1
    diffusers' ``FlowMatchEulerDiscreteScheduler(stochastic_sampling=True)``. The last step (σ' = 0) returns x₀ and
    takes no ε. Returns [x₀, …, x_N]."""
    sigmas = unipc_sigmas(steps, shift)
    assert len(renoise) == steps - 1
    x = noise.clone()
    traj = [x.clone()]
    for k in range(steps):
        sigma, nxt = float(sigmas[k]), float(sigmas[k + 1])
        x0 = x - sigma * model(x, sigma)
        if nxt == 0.0:
            x = x0
        else:
            eps_hat = (x - (1 - sigma) * x0) / sigma
            fresh = eta * nxt
            x = (1 - nxt) * x0 + math.sqrt(nxt * nxt - fresh * fresh) * eps_hat + fresh * renoise[k]
        traj.append(x.clone())
    return traj


# ----------------------------------------------------------------------------------------------------------------
# The closed-form "model" of the fixtures
# ----------------------------------------------------------------------------------------------------------------


def closed_form_velocity(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, d: torch.Tensor) -> VelocityModel:
    """v(x, σ) = a·x + b·tanh(x) + σ·c + d (elementwise; smooth, nonlinear, deterministic; no DiT needed)."""

    def model(x: torch.Tensor, sigma: float) -> torch.Tensor:
        return a * x + b * torch.tanh(x) + sigma * c + d

    return model


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """max|a − b| / max|b| in float64."""
    a, b = a.double(), b.double()
    return float((a - b).abs().max() / b.abs().max())


def max_traj_rel_err(ta: Sequence[torch.Tensor], tb: Sequence[torch.Tensor]) -> float:
    """Largest per-state relative error along two trajectories (inf/NaN → inf)."""
    worst = 0.0
    for a, b in zip(ta, tb):
        e = rel_err(a, b)
        worst = max(worst, e if math.isfinite(e) else math.inf)
    return worst
