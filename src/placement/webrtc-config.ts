import { z } from 'zod';

/**
 * The `webrtc` section of the deploy config (docs/deploy.md, docs/webrtc.md "ICE servers and NAT"): the ICE servers
 * the server's peers and the browser use, the address and UDP ports the server's ICE sockets bind, extra host
 * addresses to advertise, and the ICE transport policy. Plain data; transports/webrtc/peer-config.ts maps it to
 * werift's configuration.
 */

/** Longest ICE server URL, characters. */
const MAX_URL = 512;
/** Longest TURN username or credential, characters. */
const MAX_SECRET = 256;

/** A `stun:`, `turn:` or `turns:` URL (RFC 7064/7065: `scheme:host[:port][?transport=udp|tcp]`), no spaces. */
export const IceUrlSchema = z
  .string()
  .max(MAX_URL)
  .regex(/^(stun|turn|turns):[^\s/?#]+(\?transport=(udp|tcp))?$/i, 'expected a stun:, turn: or turns: URL (scheme:host[:port][?transport=udp|tcp])');

/** True when `url` names a TURN server (which needs credentials). */
export function isTurnUrl(url: string): boolean {
  return /^turns?:/i.test(url);
}

/** One ICE server, as `RTCIceServer`: a TURN server needs `username` and `credential` (long-term credentials). */
export const IceServerSchema = z
  .strictObject({
    urls: z.union([IceUrlSchema, z.array(IceUrlSchema).min(1).max(8)]),
    username: z.string().min(1).max(MAX_SECRET).optional(),
    credential: z.string().min(1).max(MAX_SECRET).optional(),
  })
  .superRefine((s, ctx) => {
    const urls = typeof s.urls === 'string' ? [s.urls] : s.urls;
    if (!urls.some(isTurnUrl)) return;
    if (s.username === undefined) ctx.addIssue({ code: 'custom', path: ['username'], message: 'a turn: or turns: server needs a username' });
    else if (s.credential === undefined) ctx.addIssue({ code: 'custom', path: ['credential'], message: 'a turn: or turns: server needs a credential' });
  });
export type IceServer = z.infer<typeof IceServerSchema>;

const PortSchema = z.number().int().min(1024).max(65535);

export const WebrtcConfigSchema = z
  .strictObject({
    /**
     * ICE servers of the server's peer connections, also sent to the client in the `offer` message. werift uses the
     * first STUN and the first TURN URL. Default none (host candidates only).
     */
    iceServers: z.array(IceServerSchema).max(8).default([]),
    /** `relay` gathers and uses relayed (TURN) candidates only, on the server and (sent in the offer) the browser. */
    iceTransportPolicy: z.enum(['all', 'relay']).default('all'),
    /** IPv4 address of this host the ICE sockets bind (and the only host candidate besides `hostAddresses`). Default all. */
    bindAddress: z.ipv4().optional(),
    /** UDP ports of the ICE sockets, `[min, max]` (min < max). Default: any free port. */
    portRange: z
      .tuple([PortSchema, PortSchema])
      .refine(([min, max]) => min < max, 'expected [min, max] with min < max')
      .optional(),
    /**
     * Host-candidate addresses advertised besides the interfaces' own: a 1:1 NAT's public address, say (its sockets
     * bind `bindAddress`, or all addresses). Default `["127.0.0.1"]` (loopback peers), or `[bindAddress]` when set.
     */
    hostAddresses: z.array(z.ipv4()).max(8).optional(),
  })
  .superRefine((c, ctx) => {
    const turn = c.iceServers.some((s) => (typeof s.urls === 'string' ? [s.urls] : s.urls).some(isTurnUrl));
    if (c.iceTransportPolicy === 'relay' && !turn)
      ctx.addIssue({ code: 'custom', path: ['iceTransportPolicy'], message: '"relay" needs a turn: or turns: server in iceServers' });
  });
export type WebrtcConfig = z.infer<typeof WebrtcConfigSchema>;
export type WebrtcConfigInput = z.input<typeof WebrtcConfigSchema>;
