// STOMP over WebSocket with @stomp/stompjs (the `ws` package as its WebSocket: Node 20 has
// none built in), against a node started by tests/integration/test_websocket.py.
//
//   node roundtrip.mjs '{"url": "ws://127.0.0.1:61613", "queue": "orders", ...}'
//
// Options: url, queue (anycast, via destination-type / subscription-type headers), ca (a PEM
// file to trust, for wss), heartbeat (ms, both ways), idle (ms to stay connected and count
// heart-beats), binary (hex of a body to send as binary), text (a body to send as text),
// waiting (messages already in the queue), forward (a queue to send the binary body to too).
// Prints one JSON object: what was negotiated, received and acknowledged.
import { readFileSync } from 'node:fs';
import { Client, Versions } from '@stomp/stompjs';
import WebSocket from 'ws';

const options = JSON.parse(process.argv[2]);
const result = {
  pongs: 0, pings: 0, receipts: [], messages: [], errors: [], received: { text: 0, binary: 0 },
};
let finished = false;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function fail(message) {
  console.log(JSON.stringify({ ...result, failure: message }));
  process.exit(1);
}
setTimeout(() => fail('timed out'), options.timeout ?? 30000).unref();

const client = new Client({
  webSocketFactory: () => {
    const ws = new WebSocket(options.url, Versions.default.protocolVersions(), {
      ca: options.ca ? readFileSync(options.ca) : undefined,
    });
    // How the node sent each message (webSocketEncoderType): stompjs does not tell.
    ws.addEventListener('message', (event) => {
      result.received[typeof event.data === 'string' ? 'text' : 'binary'] += 1;
    });
    return ws;
  },
  heartbeatIncoming: options.heartbeat ?? 0,
  heartbeatOutgoing: options.heartbeat ?? 0,
  reconnectDelay: 0,
  debug: (line) => {
    if (line === '<<< PONG') result.pongs += 1;
    if (line === '>>> PING') result.pings += 1;
  },
  onStompError: (frame) => result.errors.push(frame.headers.message),
  onWebSocketClose: (event) => {
    result.closed = { code: event.code, reason: event.reason };
    if (!finished) fail(`closed early (${event.code} ${event.reason})`);
  },
});

const connected = new Promise((resolve) => {
  client.onConnect = (frame) => resolve(frame);
});
client.activate();
const frame = await connected;
result.subprotocol = client.webSocket.protocol;
result.connected = frame.headers;

const expected =
  (options.waiting ?? 0) + (options.text !== undefined ? 1 : 0) + (options.binary !== undefined ? 1 : 0);
const all = new Promise((resolve) => {
  client.subscribe(
    options.queue,
    (message) => {
      result.messages.push({
        headers: message.headers,
        text: message.body,
        hex: Buffer.from(message.binaryBody).toString('hex'),
      });
      message.ack();
      if (result.messages.length === expected) resolve();
    },
    { ack: 'client-individual', 'subscription-type': 'ANYCAST', receipt: 'subscribed' },
  );
});
const receipt = (id) =>
  new Promise((resolve) => {
    client.watchForReceipt(id, () => {
      result.receipts.push(id);
      resolve();
    });
  });

await receipt('subscribed');
const headers = { 'destination-type': 'ANYCAST', persistent: 'true' };
if (options.text !== undefined) {
  const sent = receipt('text');
  client.publish({ destination: options.queue, body: options.text, headers: { ...headers, receipt: 'text' } });
  await sent;
}
if (options.binary !== undefined) {
  const sent = receipt('binary');
  client.publish({
    destination: options.queue,
    binaryBody: new Uint8Array(Buffer.from(options.binary, 'hex')),
    headers: { ...headers, receipt: 'binary', 'content-type': 'application/octet-stream' },
  });
  await sent;
  if (options.forward !== undefined) {
    // The same bytes to a queue a client over TCP reads.
    const forwarded = receipt('forwarded');
    client.publish({
      destination: options.forward,
      binaryBody: new Uint8Array(Buffer.from(options.binary, 'hex')),
      headers: { ...headers, receipt: 'forwarded' },
    });
    await forwarded;
  }
}
await all;
// The ACKs are settled once a receipt after them comes back (frames are handled in order).
const synced = receipt('acked');
client.publish({ destination: `${options.queue}.sync`, body: '', headers: { receipt: 'acked' } });
await synced;
if (options.idle) await sleep(options.idle);
result.stillConnected = client.connected;
finished = true;
await client.deactivate();
console.log(JSON.stringify(result));
process.exit(0);
