// Topics (docs/protocol.md, "Topics and states").

export const topics = {
  ingress: (prefix, round) => `${prefix}/round/${round}/hop/0`,
  status: (prefix, round, stage) => `${prefix}/round/${round}/status/${stage}`,
  progress: (prefix, round, stage) => `${prefix}/round/${round}/progress/${stage}`,
  claim: (prefix, round, process) => `${prefix}/round/${round}/claim/${process}`,
  receipt: (prefix, round, process) => `${prefix}/round/${round}/receipt/${process}`,
  report: (prefix, round) => `${prefix}/round/${round}/report`,
};

export const READY_STATES = new Set(['ready', 'working']);
export const END_STATES = new Set(['done', 'refused', 'failed']);
