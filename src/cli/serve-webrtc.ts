import { OmniError } from '../errors';
import { IceServerSchema, isTurnUrl, WebrtcConfigSchema, type IceServer, type WebrtcConfig } from '../placement/webrtc-config';
import type { DeployConfig } from '../placement/deploy-config';

/** The WebRTC flags of `omnirx serve` (docs/webrtc.md, "ICE servers and NAT"), as parsed by commander. */
export interface WebrtcFlags {
  /** `--ice-server <url>`, repeatable. */
  iceServer: string[];
  /** `--ice-bind <address>`. */
  iceBind?: string;
  /** `--ice-transport-policy <all|relay>`. */
  iceTransportPolicy?: string;
}

/** The deploy config's `webrtc` fields the flags set (each replaces the config file's value). */
export type WebrtcOverrides = Partial<Pick<WebrtcConfig, 'iceServers' | 'bindAddress' | 'iceTransportPolicy'>>;

/**
 * The `webrtc` overrides of `--ice-server` (each a `stun:`, `turn:` or `turns:` URL; a TURN server takes its long-term
 * credentials from `OMNIRX_TURN_USERNAME` and `OMNIRX_TURN_CREDENTIAL`, so they stay out of the process list),
 * `--ice-bind` and `--ice-transport-policy`.
 * @throws OmniError `OMNIRX_ERR_CLI_ARGUMENT` naming the flag (or the variable a TURN server misses).
 */
export function webrtcOverrides(flags: WebrtcFlags, env: NodeJS.ProcessEnv): WebrtcOverrides {
  const out: WebrtcOverrides = {};
  if (flags.iceServer.length > 0) {
    out.iceServers = flags.iceServer.map((url): IceServer => {
      const turn = isTurnUrl(url);
      const server = {
        urls: url,
        ...(turn && env.OMNIRX_TURN_USERNAME !== undefined ? { username: env.OMNIRX_TURN_USERNAME } : {}),
        ...(turn && env.OMNIRX_TURN_CREDENTIAL !== undefined ? { credential: env.OMNIRX_TURN_CREDENTIAL } : {}),
      };
      const r = IceServerSchema.safeParse(server);
      if (r.success) return r.data;
      const issue = r.error.issues[0]!;
      const field = issue.path.map(String).join('.');
      const hint =
        field === 'username' ? ' (set OMNIRX_TURN_USERNAME)' : field === 'credential' ? ' (set OMNIRX_TURN_CREDENTIAL)' : field === 'urls' ? '' : ` (${field})`;
      throw new OmniError('OMNIRX_ERR_CLI_ARGUMENT', `--ice-server ${JSON.stringify(url.slice(0, 100))}: ${issue.message}${hint}`);
    });
  }
  if (flags.iceBind !== undefined) {
    const r = WebrtcConfigSchema.shape.bindAddress.safeParse(flags.iceBind);
    if (!r.success) throw new OmniError('OMNIRX_ERR_CLI_ARGUMENT', `--ice-bind ${JSON.stringify(flags.iceBind.slice(0, 100))}: expected an IPv4 address`);
    out.bindAddress = r.data;
  }
  if (flags.iceTransportPolicy !== undefined) out.iceTransportPolicy = flags.iceTransportPolicy === 'relay' ? 'relay' : 'all';
  return out;
}

/**
 * `deploy` with the flags' `webrtc` fields in place of the file's, the section validated again as a whole (a
 * `relay` policy needs a TURN server from either).
 * @throws OmniError `OMNIRX_ERR_CONFIG` naming the field (`webrtc.iceTransportPolicy`).
 */
export function withWebrtcOverrides(deploy: DeployConfig, overrides: WebrtcOverrides): DeployConfig {
  if (Object.keys(overrides).length === 0) return deploy;
  const r = WebrtcConfigSchema.safeParse({ ...deploy.webrtc, ...overrides });
  if (!r.success) {
    const issue = r.error.issues[0]!;
    const field = ['webrtc', ...issue.path.map(String)].join('.');
    throw new OmniError('OMNIRX_ERR_CONFIG', `${field}: ${issue.message} (from the flags and the deploy config)`, { param: field });
  }
  return { ...deploy, webrtc: r.data };
}
