// One error class for everything the client refuses: the message is one line naming the rule
// and the value (like the Python side's InvalidParameterError).

export class ProtocolError extends Error {
  constructor(message) {
    super(message);
    this.name = 'ProtocolError';
  }
}
