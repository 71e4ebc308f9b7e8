import type { RTCDtlsTransport, RTCPeerConnection } from 'werift';

/**
 * Closes a werift peer connection together with every DTLS/ICE transport it has used, so that none of their UDP
 * sockets stays bound.
 *
 * Works around werift 0.25.2: an offerer under werift's default `bundlePolicy` (`max-compat`) creates one DTLS/ICE
 * transport per m-line (`findOrCreateTransport`, lib/webrtc/src/peerConnection.js:638) and gathers host candidates on
 * each, one UDP socket per address bound on 0.0.0.0. When the answer BUNDLEs the m-lines, `setRemoteDescription`
 * points every member at the shared transport (`owner.setDtlsTransport(shared)`, peerConnection.js:1152) and drops
 * the others without stopping them; `close()` stops only the transports still referenced (`allDtlsTransports`,
 * lib/webrtc/src/secureTransportManager.js:495), so the dropped ones keep their sockets (two per session on one
 * interface plus loopback) until the process exits. Remembering the transports before the answer is applied lets
 * {@link close} stop them too.
 */
export class PeerTransports {
  private readonly seen = new Set<RTCDtlsTransport>();

  constructor(private readonly pc: RTCPeerConnection) {
    this.remember();
  }

  /** Records the peer's current transports. Call it before anything may replace them (applying a remote description). */
  remember(): void {
    try {
      for (const t of this.pc.dtlsTransports) this.seen.add(t);
    } catch {
      // A werift whose internals moved: nothing to remember, close() still closes the peer connection.
    }
  }

  /** Closes the peer connection, then stops every remembered transport werift left open. Never throws. */
  async close(): Promise<void> {
    this.remember();
    await this.pc.close().catch(() => undefined);
    const transports = [...this.seen];
    this.seen.clear();
    await Promise.allSettled(
      transports.map(async (t) => {
        if (t.state !== 'closed' || t.iceTransport.state !== 'closed') await t.stop();
      }),
    );
  }
}
