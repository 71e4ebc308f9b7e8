/**
 * A client's SDP answer checked against the server's offer before werift applies it. werift 0.25.2 accepts an
 * answer without media sections or ICE credentials and then stops the transceivers and transports the answer left
 * out, which fails the peer connection; checked first, such an answer is refused and the session can take another.
 */

/** One `m=` section of an SDP: its kind, port (0: rejected) and what the answer must carry for ICE and DTLS. */
export interface SdpSection {
  kind: string;
  port: number;
  mid?: string;
  /** The `a=ice-ufrag` value (the section's, else the session's), if any. */
  iceUfrag?: string;
  icePwd: boolean;
  fingerprint: boolean;
  /** The `a=setup` role (`active`, `passive`, `actpass`), if any. */
  setup?: string;
}

/** The media sections of `sdp`, in order; session-level ICE credentials and fingerprints count for every section. Never throws. */
export function sdpSections(sdp: string): SdpSection[] {
  const sections: SdpSection[] = [];
  const session: { iceUfrag?: string; icePwd: boolean; fingerprint: boolean; setup?: string } = { icePwd: false, fingerprint: false };
  let cur: SdpSection | undefined;
  for (const line of sdp.split(/\r?\n/)) {
    const m = /^m=(\S+) (\d+)/.exec(line);
    if (m !== null) {
      cur = {
        kind: m[1]!,
        port: Number(m[2]),
        icePwd: session.icePwd,
        fingerprint: session.fingerprint,
        ...(session.iceUfrag !== undefined ? { iceUfrag: session.iceUfrag } : {}),
        ...(session.setup !== undefined ? { setup: session.setup } : {}),
      };
      sections.push(cur);
      continue;
    }
    const target = cur ?? session;
    if (line.startsWith('a=mid:') && cur !== undefined) cur.mid = line.slice('a=mid:'.length).trim();
    else if (/^a=ice-ufrag:\S/.test(line)) target.iceUfrag = line.slice('a=ice-ufrag:'.length).trim();
    else if (/^a=setup:\S/.test(line)) target.setup = line.slice('a=setup:'.length).trim();
    else if (/^a=ice-pwd:\S/.test(line)) target.icePwd = true;
    else if (/^a=fingerprint:\S+ \S/.test(line)) target.fingerprint = true;
  }
  return sections;
}

/**
 * What makes `answer` unusable for `offer`, or undefined: not SDP (`v=0` first), a different number of media
 * sections, a section whose mid differs from the offer's at the same index (RFC 3264 §6), an accepted section
 * without `a=ice-ufrag`, `a=ice-pwd` or `a=fingerprint`, or one that is the offer sent back (`a=setup:actpass`, which
 * an answer may not use, RFC 5763 §5; or the offer's own ICE username fragment). Never throws.
 */
export function answerProblem(answer: string, offer: string): string | undefined {
  if (!/^v=0\r?\n/.test(answer)) return 'not an SDP description (it must start with the line "v=0")';
  const offered = sdpSections(offer);
  const answered = sdpSections(answer);
  if (answered.length !== offered.length)
    return `the answer has ${answered.length} media section(s), the offer ${offered.length} (an answer lists every offered section, in order)`;
  for (const [i, a] of answered.entries()) {
    const o = offered[i]!;
    if (a.mid !== o.mid) return `media section ${i} has mid ${a.mid === undefined ? 'none' : `"${a.mid.slice(0, 40)}"`}, the offer's is "${o.mid ?? ''}"`;
    if (a.port === 0) continue;
    const missing = [
      a.iceUfrag !== undefined ? undefined : 'a=ice-ufrag',
      a.icePwd ? undefined : 'a=ice-pwd',
      a.fingerprint ? undefined : 'a=fingerprint',
    ].filter((s) => s !== undefined);
    if (missing.length > 0) return `media section ${i} (mid "${o.mid ?? ''}") has no ${missing.join(', ')}`;
    if (a.setup === 'actpass')
      return `media section ${i} has a=setup:actpass, which only an offer may use (an answer is active or passive, RFC 5763 §5): is this the offer sent back?`;
    if (a.iceUfrag === o.iceUfrag)
      return `media section ${i} carries the offer's own ICE username fragment: the answer must carry the client's (is this the offer sent back?)`;
  }
  return undefined;
}
