import { parseServeArgs } from '../../src/cli/serve';
import { withWebrtcOverrides } from '../../src/cli/serve-webrtc';
import { parseDeployConfig } from '../../src/placement/deploy-config';
import { checkBindAddress, rtcPeerConfig } from '../../transports/webrtc/peer-config';

const quiet = () => undefined;

describe('deploy config: webrtc', () => {
  it('takes ICE servers, a bind address, a port range, host addresses and the relay policy', () => {
    const c = parseDeployConfig({
      schemaVersion: 1,
      webrtc: {
        iceServers: [
          { urls: 'stun:stun.example.com:3478' },
          { urls: ['turn:turn.example.com?transport=udp', 'turns:turn.example.com:5349'], username: 'u', credential: 'p' },
        ],
        iceTransportPolicy: 'relay',
        bindAddress: '127.0.0.1',
        portRange: [50000, 50100],
        hostAddresses: ['203.0.113.7'],
      },
    });
    expect(c.webrtc).toMatchObject({ iceTransportPolicy: 'relay', bindAddress: '127.0.0.1', portRange: [50000, 50100] });
    expect(parseDeployConfig({ schemaVersion: 1, webrtc: {} }).webrtc).toEqual({ iceServers: [], iceTransportPolicy: 'all' });
  });

  it.each([
    [{ iceServers: [{ urls: 'http://example.com' }] }, 'webrtc.iceServers.0.urls'],
    [{ iceServers: [{ urls: 'turn:t.example.com' }] }, 'webrtc.iceServers.0.username'],
    [{ iceServers: [{ urls: 'turn:t.example.com', username: 'u' }] }, 'webrtc.iceServers.0.credential'],
    [{ iceServers: [{ urls: 'turn:t.example.com', username: 'u', credential: 'x'.repeat(257) }] }, 'webrtc.iceServers.0.credential'],
    [{ iceServers: [{ urls: 'stun:s', password: 'p' }] }, 'webrtc.iceServers.0'],
    [{ iceTransportPolicy: 'relay' }, 'webrtc.iceTransportPolicy'],
    [{ bindAddress: 'eth0' }, 'webrtc.bindAddress'],
    [{ portRange: [50100, 50000] }, 'webrtc.portRange'],
    [{ portRange: [80, 90] }, 'webrtc.portRange.0'],
    [{ stunServer: 'stun:s' }, 'webrtc'],
  ])('refuses %j naming %s', (webrtc, param) => {
    expect(() => parseDeployConfig({ schemaVersion: 1, webrtc })).toThrow(expect.objectContaining({ code: 'OMNIRX_ERR_CONFIG', param }));
  });
});

describe('omnirx serve: --ice-server, --ice-bind, --ice-transport-policy', () => {
  it('takes repeated ICE servers with TURN credentials from the environment', () => {
    const args = parseServeArgs(
      ['--ice-server', 'stun:127.0.0.1:3478', '--ice-server', 'turn:127.0.0.1:3478', '--ice-bind', '127.0.0.1', '--ice-transport-policy', 'relay'],
      { OMNIRX_TURN_USERNAME: 'u', OMNIRX_TURN_CREDENTIAL: 'p' },
      quiet,
    );
    expect(args).toMatchObject({
      webrtc: {
        iceServers: [{ urls: 'stun:127.0.0.1:3478' }, { urls: 'turn:127.0.0.1:3478', username: 'u', credential: 'p' }],
        bindAddress: '127.0.0.1',
        iceTransportPolicy: 'relay',
      },
    });
    expect((args as { webrtc: { iceServers: unknown[] } }).webrtc.iceServers[0]).toEqual({ urls: 'stun:127.0.0.1:3478' });
    expect(parseServeArgs([], {}, quiet)).not.toHaveProperty('webrtc');
  });

  it.each([
    [['--ice-server', 'turn:127.0.0.1'], /--ice-server "turn:127.0.0.1": .*OMNIRX_TURN_USERNAME/],
    [['--ice-server', 'https://x'], /--ice-server "https:\/\/x": expected a stun:, turn: or turns: URL/],
    [['--ice-bind', 'localhost'], /--ice-bind "localhost": expected an IPv4 address/],
    [['--ice-transport-policy', 'none'], /ice-transport-policy/],
  ])('refuses %j', (argv, message) => {
    expect(() => parseServeArgs(argv, {}, quiet)).toThrow(
      expect.objectContaining({ code: 'OMNIRX_ERR_CLI_ARGUMENT', message: expect.stringMatching(message) }),
    );
  });

  it('flags replace the file’s fields; a relay policy needs a TURN server from either', () => {
    const file = parseDeployConfig({
      schemaVersion: 1,
      webrtc: { iceServers: [{ urls: 'turn:t', username: 'u', credential: 'p' }], bindAddress: '127.0.0.1' },
    });
    expect(withWebrtcOverrides(file, { iceTransportPolicy: 'relay' }).webrtc).toMatchObject({ iceTransportPolicy: 'relay', bindAddress: '127.0.0.1' });
    expect(() => withWebrtcOverrides(file, { iceServers: [{ urls: 'stun:s' }], iceTransportPolicy: 'relay' })).toThrow(
      expect.objectContaining({ code: 'OMNIRX_ERR_CONFIG', param: 'webrtc.iceTransportPolicy' }),
    );
  });
});

describe('rtcPeerConfig', () => {
  it('passes the ICE servers, policy, bind address and port range to werift', () => {
    expect(rtcPeerConfig()).toMatchObject({ iceServers: [], iceTransportPolicy: 'all', iceAdditionalHostAddresses: ['127.0.0.1'] });
    const c = rtcPeerConfig({
      iceServers: [{ urls: 'turn:t', username: 'u', credential: 'p' }],
      iceTransportPolicy: 'relay',
      bindAddress: '127.0.0.1',
      portRange: [50000, 50010],
    });
    expect(c).toMatchObject({
      iceTransportPolicy: 'relay',
      iceInterfaceAddresses: { udp4: '127.0.0.1' },
      iceAdditionalHostAddresses: ['127.0.0.1'],
      icePortRange: [50000, 50010],
    });
  });

  it('refuses a bind address that is not one of this host’s', () => {
    expect(() => checkBindAddress('127.0.0.1')).not.toThrow();
    expect(() => checkBindAddress('192.0.2.123')).toThrow(expect.objectContaining({ code: 'OMNIRX_ERR_CONFIG', param: 'webrtc.bindAddress' }));
  });
});
