import { candidateProblem } from '../../../transports/webrtc/ice-candidate';

test('candidates as Chromium, Firefox and werift trickle them pass, as does end-of-candidates', () => {
  for (const c of [
    '',
    'candidate:1 1 udp 2130706431 127.0.0.1 9 typ host',
    'candidate:842163049 1 udp 1677729535 203.0.113.7 46154 typ srflx raddr 10.0.0.1 rport 46154 generation 0 ufrag EsAw network-cost 999',
    'candidate:2999745851 1 tcp 1518280447 192.168.1.5 9 typ host tcptype active generation 0 ufrag EsAw network-id 1',
    'candidate:3130355214 1 udp 2113937151 4b1f1c5e-7a3e-4bd5-9b5f-0c1d2e3f4a5b.local 53012 typ host generation 0',
    'candidate:0 1 UDP 2122252543 2001:db8::1 61077 typ host',
    'candidate:5 1 UDP 8265471 198.51.100.3 3478 typ relay raddr 0.0.0.0 rport 0',
    'candidate:a+b/c 2 udp 1 127.0.0.1 65535 typ prflx',
  ]) {
    expect([c, candidateProblem(c)]).toEqual([c, undefined]);
  }
});

test('malformed candidates are refused with the offending part named', () => {
  const cases: Array<[string, RegExp]> = [
    ['garbage', /"candidate:/],
    ['1 1 udp 2130706431 127.0.0.1 9 typ host', /"candidate:/],
    ['candidate:1 1 udp 2130706431 127.0.0.1 9 typ', /at least 8 .* got 7/],
    ['candidate:1 0 udp 2130706431 127.0.0.1 9 typ host', /component id "0"/],
    ['candidate:1 1 udp 0 127.0.0.1 9 typ host', /priority "0"/],
    ['candidate:1 1 udp 4294967296 127.0.0.1 9 typ host', /priority "4294967296"/],
    ['candidate:1 1 udp 2130706431 127.0.0.1 70000 typ host', /port "70000"/],
    ['candidate:1 1 udp 2130706431 300.0.0.1 9 typ host', /connection address "300.0.0.1"/],
    ['candidate:1 1 udp 2130706431 127.0.0.1 9 type host', /expected "typ".*"type"/],
    ['candidate:1 1 udp 2130706431 127.0.0.1 9 typ host raddr', /raddr ""/],
    ['candidate:1 1 udp 2130706431 127.0.0.1 9 typ host rport x', /rport "x"/],
    ['candidate:1 1 udp 2130706431 127.0.0.1 9 typ host generation', /extension "generation" has no value/],
    ['candidate:1 1 udp 2130706431 127.0.0.1 9 typ host  generation 0', /extension name ""/],
    [`candidate:${'f'.repeat(33)} 1 udp 1 127.0.0.1 9 typ host`, /foundation/],
  ];
  for (const [c, why] of cases) expect([c, candidateProblem(c)]).toEqual([c, expect.stringMatching(why)]);
});
