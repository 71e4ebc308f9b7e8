import { chromium, type Browser } from 'playwright-core';

/**
 * Flags for Debian's headless Chromium (../shared/FACTS.md): the usual headless set, autoplay without a gesture,
 * and the two a WebRTC peer on loopback needs. Playwright gives each launch a fresh user data dir.
 */
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--autoplay-policy=no-user-gesture-required',
  '--allow-loopback-in-peer-connection',
  '--disable-features=WebRtcHideLocalIpsWithMdns',
];

/** Launches Debian's chromium (`/usr/bin/chromium`, or OMNIRX_CHROMIUM) headless with `CHROMIUM_ARGS`. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: process.env.OMNIRX_CHROMIUM ?? '/usr/bin/chromium', args: CHROMIUM_ARGS });
}
