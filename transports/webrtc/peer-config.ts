import { networkInterfaces } from 'node:os';
import { RTCRtpCodecParameters, type PeerConfig } from 'werift';
import { OmniError } from '../../src/errors';
import type { IceServer, WebrtcConfig } from '../../src/placement/webrtc-config';
import { VIDEO_CLOCK_RATE } from './video-sender';

/** The ICE settings of a session's peer (the deploy config's `webrtc` section, docs/webrtc.md "ICE servers and NAT"). */
export interface RtcIceOptions {
  /** STUN/TURN servers (werift uses the first STUN and the first TURN URL). Default none. */
  iceServers?: IceServer[];
  /** `relay`: relayed candidates only. Default `all`. */
  iceTransportPolicy?: 'all' | 'relay';
  /** IPv4 address the ICE sockets bind. Default all addresses. */
  bindAddress?: string;
  /** UDP ports of the ICE sockets, `[min, max]`. Default any free port. */
  portRange?: [number, number];
  /** Extra host-candidate addresses. Default `['127.0.0.1']`, or `[bindAddress]` when that is set. */
  hostAddresses?: string[];
}

/** The session options' ICE part from a validated `webrtc` config section. */
export function iceOptionsOf(c: WebrtcConfig): RtcIceOptions {
  return {
    iceServers: c.iceServers,
    iceTransportPolicy: c.iceTransportPolicy,
    ...(c.bindAddress !== undefined ? { bindAddress: c.bindAddress } : {}),
    ...(c.portRange !== undefined ? { portRange: c.portRange } : {}),
    ...(c.hostAddresses !== undefined ? { hostAddresses: c.hostAddresses } : {}),
  };
}

/**
 * Checks that `bindAddress` is an IPv4 address of this host (werift would otherwise fail every session's gathering).
 * @throws OmniError OMNIRX_ERR_CONFIG, param `webrtc.bindAddress`.
 */
export function checkBindAddress(bindAddress: string): void {
  const own = Object.values(networkInterfaces())
    .flat()
    .filter((a) => a !== undefined && a.family === 'IPv4')
    .map((a) => a!.address);
  if (!own.includes(bindAddress))
    throw new OmniError('OMNIRX_ERR_CONFIG', `webrtc.bindAddress: ${bindAddress} is not an IPv4 address of this host (it has ${own.join(', ')})`, {
      param: 'webrtc.bindAddress',
    });
}

/**
 * The werift configuration of a session's peer connection: the given ICE servers only (werift's default names a
 * public STUN server), loopback added to the host candidates unless told otherwise (werift drops it), one DTLS/ICE
 * transport for the video track and the data channel (`max-bundle`: under werift's default `max-compat` the offer
 * gathers a transport per m-line, and werift 0.25.2 drops the one a bundling answer replaces without stopping it,
 * leaving its UDP sockets bound), and one video codec, H.264 constrained baseline in packetization mode 1, with
 * NACK, PLI and REMB feedback. With `bindAddress` the ICE sockets bind that address and it is the host candidate.
 */
export function rtcPeerConfig(ice: RtcIceOptions = {}): Partial<PeerConfig> {
  const { bindAddress, portRange } = ice;
  return {
    iceServers: ice.iceServers ?? [],
    iceTransportPolicy: ice.iceTransportPolicy ?? 'all',
    bundlePolicy: 'max-bundle',
    iceAdditionalHostAddresses: ice.hostAddresses ?? (bindAddress !== undefined ? [bindAddress] : ['127.0.0.1']),
    ...(bindAddress !== undefined ? { iceInterfaceAddresses: { udp4: bindAddress } } : {}),
    ...(portRange !== undefined ? { icePortRange: portRange } : {}),
    iceUseIpv6: false,
    codecs: {
      video: [
        new RTCRtpCodecParameters({
          mimeType: 'video/H264',
          clockRate: VIDEO_CLOCK_RATE,
          rtcpFeedback: [{ type: 'nack' }, { type: 'nack', parameter: 'pli' }, { type: 'goog-remb' }],
          parameters: 'profile-level-id=42e01f;packetization-mode=1;level-asymmetry-allowed=1',
        }),
      ],
    },
  };
}
