import { RTCRtpCodecParameters, type PeerConfig } from 'werift';
import { VIDEO_CLOCK_RATE } from './video-sender';

/**
 * The werift configuration of a session's peer connection: no ICE servers at all (werift's default names a public
 * STUN server; a loopback session needs none), loopback added to the host candidates (werift drops it otherwise),
 * one DTLS/ICE transport for the video track and the data channel (`max-bundle`: under werift's default
 * `max-compat` the offer gathers a transport per m-line, and werift 0.25.2 drops the one a bundling answer replaces
 * without stopping it, leaving its UDP sockets bound), and one video codec, H.264 constrained baseline in
 * packetization mode 1, with NACK, PLI and REMB feedback.
 * `hostAddresses` are extra host-candidate addresses (default `['127.0.0.1']`).
 */
export function rtcPeerConfig(hostAddresses: string[] = ['127.0.0.1']): Partial<PeerConfig> {
  return {
    iceServers: [],
    bundlePolicy: 'max-bundle',
    iceAdditionalHostAddresses: hostAddresses,
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
