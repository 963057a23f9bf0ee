// The MQTT connection of a client process (mqtt.js): connect once, no automatic reconnect, and
// a refused or failed connection as one clear line. In a browser the transport is a WebSocket;
// ``subprotocols`` names what it asks the server for (websockify in front of Mosquitto speaks
// "binary"; a broker's own WebSocket listener speaks "mqtt").

import { ProtocolError } from './errors.js';

const CONNACK = {
  1: 'unacceptable protocol version', 2: 'client identifier rejected', 3: 'server unavailable',
  4: 'bad user name or password', 5: 'not authorized',
  134: 'bad user name or password', 135: 'not authorized',
};

export async function connectBroker(mqtt, url, { username, password, clientId, subprotocols, timeoutSeconds = 10 } = {}) {
  const options = {
    username, password, clientId, clean: true, reconnectPeriod: 0, protocolVersion: 4,
    connectTimeout: timeoutSeconds * 1000, keepalive: 30,
  };
  if (subprotocols && typeof WebSocket !== 'undefined') {
    options.createWebsocket = (wsUrl) => new WebSocket(wsUrl, subprotocols);
  }
  const who = username ?? 'anonymous';
  try {
    return await mqtt.connectAsync(url, options, false);
  } catch (error) {
    const code = error?.code;
    const reason = CONNACK[code] ?? error?.message ?? String(error);
    const detail = Number.isInteger(code) ? `${reason} (CONNACK ${code})` : reason;
    throw new ProtocolError(`the broker at ${url} refused ${who}: ${detail}`);
  }
}

/** The payload of an mqtt.js message (a Buffer) as a plain Uint8Array view. */
export function payloadBytes(payload) {
  return new Uint8Array(payload.buffer, payload.byteOffset, payload.byteLength);
}
